"""Paths and mode, secrets and hosts: what every other section may follow from."""

from __future__ import annotations

from pathlib import Path

from config.env import (
    env_allowed_hosts,
    env_bool,
    env_field_encryption_keys,
    env_secret_key,
    env_str,
    refuse_placeholders,
)

# --- Paths and mode ---------------------------------------------------------------------------
BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("SERENITY_VAR_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", False)
# Served over https (through a TLS-terminating proxy or not): the SSL redirect, HSTS, secure
# cookies and the trusted origins follow from it ("Deploy security" below).
SERENITY_TLS = env_bool("SERENITY_TLS", False)

# --- Secrets and hosts (SPEC §10.5) -----------------------------------------------------------
# With DEBUG off each reader stops the process when its value is missing or whitespace only (or,
# for the key that encrypts, shorter than 32 characters); with DEBUG on, development values stand
# in (config/env.py).
SECRET_KEY = env_secret_key(debug=DEBUG)
FIELD_ENCRYPTION_KEYS = env_field_encryption_keys(debug=DEBUG)
FIELD_ENCRYPTION_KEY = FIELD_ENCRYPTION_KEYS[0]
# No variable of deploy/production.env may still hold its placeholder.
refuse_placeholders()
ALLOWED_HOSTS = env_allowed_hosts(debug=DEBUG)
