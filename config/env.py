"""The one module that reads the process environment.

Every setting the service takes from the environment (the README's configuration table: an
operator's few variables, no internal knob) is parsed here, with a safe local default, so that
a typo in a variable name fails in one place and settings.py stays declarative.
"""

from __future__ import annotations

import os
import re

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean, got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_float(name: str, default: float) -> float:
    """A non-negative number."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc
    if value < 0:
        raise ImproperlyConfigured(f"{name} must not be negative, got {raw!r}")
    return value


def env_list(name: str) -> list[str]:
    """A comma-separated list, items stripped, empty items dropped."""
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def env_secret(name: str) -> str:
    """A secret as given; one made only of whitespace counts as unset (it would be a guessable
    key, and a value like " " is a configuration mistake, not a choice)."""
    raw = os.environ.get(name, "")
    return raw if raw.strip() else ""


def env_secret_list(name: str) -> tuple[str, ...]:
    """Comma-separated secrets in order; whitespace-only items are dropped (see env_secret)."""
    return tuple(item for item in os.environ.get(name, "").split(",") if item.strip())


# --- Placeholders of deploy/production.env (SPEC §11.4) ---------------------------------------
# deploy/production.env's placeholders: `<what to put here>`.
_PLACEHOLDER = re.compile(r"<[^<>]*>")

# The variables deploy/production.env gives a placeholder (or could: every one it lists that
# takes free text); tests/test_settings_failfast.py checks each placeholder of the file.
DEPLOY_VARIABLES = (
    "SECRET_KEY",
    "FIELD_ENCRYPTION_KEYS",
    "FIELD_ENCRYPTION_KEY",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "SEMRUSH_BASE_URL",
    "SEMRUSH_API_TOKEN",
    "ALLOWED_HOSTS",
    "SERENITY_METRICS_TOKEN",
    "SERENITY_VAR_DIR",
)


def refuse_placeholders(names: tuple[str, ...] = DEPLOY_VARIABLES) -> None:
    """Stop the process if one of these variables still holds a placeholder of
    deploy/production.env (`<...>`): a copied example file must not start a service with
    "<the service-wide Semrush token>" as its token or a guessable key."""
    for name in names:
        if _PLACEHOLDER.search(os.environ.get(name, "")):
            raise ImproperlyConfigured(
                f"{name} still holds a placeholder (<...>) of deploy/production.env: "
                "replace it with the real value; refusing to start."
            )


# --- Secrets and hosts (SPEC §10.5): with DEBUG off, refuse to start without them -------------
_DEV_SECRET_KEY = "dev-only-insecure-secret-key-never-use-in-production"
_DEV_FIELD_ENCRYPTION_KEY = "dev-only-field-encryption-key"
# The key that encrypts must be long enough not to be guessed (it is a passphrase, stretched
# by HKDF, not a random key).
FIELD_ENCRYPTION_KEY_MIN_LENGTH = 32


def env_secret_key(*, debug: bool) -> str:
    """SECRET_KEY; with DEBUG on a fixed development value stands in for a missing one, with it
    off a missing (or whitespace-only) one stops the process."""
    secret_key = env_secret("SECRET_KEY") or (_DEV_SECRET_KEY if debug else "")
    if not secret_key:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off; refusing to start.")
    return secret_key


def env_field_encryption_keys(*, debug: bool) -> tuple[str, ...]:
    """FIELD_ENCRYPTION_KEYS, comma-separated: the first encrypts, every one decrypts (rotation,
    see kernel/crypto.py and `manage.py rotate_credentials`); FIELD_ENCRYPTION_KEY, the older
    single key, is read when FIELD_ENCRYPTION_KEYS is not set. With DEBUG on a fixed development
    value stands in for a missing one; with it off a missing one, or a first key shorter than
    FIELD_ENCRYPTION_KEY_MIN_LENGTH, stops the process. Older keys after the first only decrypt,
    so that a short one can still be rotated away from."""
    keys = env_secret_list("FIELD_ENCRYPTION_KEYS") or tuple(
        filter(None, [env_secret("FIELD_ENCRYPTION_KEY")])
    )
    if not keys and debug:
        keys = (_DEV_FIELD_ENCRYPTION_KEY,)
    if not keys:
        raise ImproperlyConfigured(
            "FIELD_ENCRYPTION_KEY must be set when DEBUG is off; refusing to start."
        )
    if not debug and len(keys[0].strip()) < FIELD_ENCRYPTION_KEY_MIN_LENGTH:
        raise ImproperlyConfigured(
            f"FIELD_ENCRYPTION_KEYS: the key that encrypts (the first) must have at least "
            f"{FIELD_ENCRYPTION_KEY_MIN_LENGTH} characters when DEBUG is off; refusing to start."
        )
    return keys


def env_allowed_hosts(*, debug: bool) -> list[str]:
    """ALLOWED_HOSTS, comma-separated. No `*` default with DEBUG off: the hosts this service
    answers for must be named, or a forged Host header would be accepted (and end up in absolute
    URLs such as the async Location); with DEBUG on, `*`."""
    hosts = env_list("ALLOWED_HOSTS") or (["*"] if debug else [])
    if not hosts:
        raise ImproperlyConfigured(
            "ALLOWED_HOSTS must be set when DEBUG is off (comma-separated host names); "
            "refusing to start."
        )
    return hosts
