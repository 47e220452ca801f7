"""With DEBUG off the process refuses to start without SECRET_KEY, FIELD_ENCRYPTION_KEY or
ALLOWED_HOSTS, and a whitespace-only secret counts as none (SPEC §8, §10.5); with DEBUG on,
development defaults apply. `check --deploy` warns without SERENITY_TLS and is clean with it
(tests/test_deploy.py: clean with deploy/production.env)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# An encryption key as long as a key that encrypts must be with DEBUG off (32 characters).
LONG_KEY = "k3y-k3y-k3y-k3y-k3y-k3y-k3y-k3y-"


def _start_django(tmp_path: Path, **overrides: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env["SERENITY_VAR_DIR"] = str(tmp_path)
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("missing", ["SECRET_KEY", "FIELD_ENCRYPTION_KEY"])
@pytest.mark.parametrize("how", ["unset", "empty", "whitespace"])
def test_debug_off_without_a_secret_refuses_to_start(tmp_path, missing, how):
    # given
    overrides: dict[str, str | None] = {
        "DEBUG": "false",
        "SECRET_KEY": "s3cret",
        "FIELD_ENCRYPTION_KEY": LONG_KEY,
        "FIELD_ENCRYPTION_KEYS": None,
    }
    overrides[missing] = {"unset": None, "empty": "", "whitespace": " \t "}[how]
    # when
    completed = _start_django(tmp_path, **overrides)
    # then
    assert completed.returncode != 0
    assert "ImproperlyConfigured" in completed.stderr
    assert f"{missing} must be set when DEBUG is off" in completed.stderr


def test_debug_off_with_both_secrets_starts(tmp_path):
    # when
    completed = _start_django(
        tmp_path, DEBUG="false", SECRET_KEY="s3cret", FIELD_ENCRYPTION_KEY=LONG_KEY
    )
    # then
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""


def test_debug_unset_means_off(tmp_path):
    # when
    completed = _start_django(tmp_path, DEBUG=None, SECRET_KEY=None, FIELD_ENCRYPTION_KEY=LONG_KEY)
    # then
    assert completed.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in completed.stderr


def test_debug_on_uses_development_defaults(tmp_path):
    # when
    completed = _start_django(tmp_path, DEBUG="true", SECRET_KEY=None, FIELD_ENCRYPTION_KEY=None)
    # then
    assert completed.returncode == 0, completed.stderr


@pytest.mark.parametrize("keys", [" ", " , \t,"])
def test_debug_off_with_only_whitespace_encryption_keys_refuses_to_start(tmp_path, keys):
    # when
    completed = _start_django(
        tmp_path,
        DEBUG="false",
        SECRET_KEY="s3cret",
        FIELD_ENCRYPTION_KEY=None,
        FIELD_ENCRYPTION_KEYS=keys,
    )
    # then
    assert completed.returncode != 0
    assert "FIELD_ENCRYPTION_KEY must be set when DEBUG is off" in completed.stderr


@pytest.mark.parametrize("hosts", [None, "", " , "])
def test_debug_off_without_allowed_hosts_refuses_to_start(tmp_path, hosts):
    # when
    completed = _start_django(
        tmp_path,
        DEBUG="false",
        SECRET_KEY="s3cret",
        FIELD_ENCRYPTION_KEY=LONG_KEY,
        ALLOWED_HOSTS=hosts,
    )
    # then
    assert completed.returncode != 0
    assert "ALLOWED_HOSTS must be set when DEBUG is off" in completed.stderr


def test_a_host_not_allowed_is_refused(client, db):
    # when (the probes answer any host: tests/api/test_probes_by_ip.py)
    response = client.get("/api/schema/", HTTP_HOST="evil.example")
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalidRequest",
        "message": "This host is not served here.",
    }


# The README's configuration, as a deployment would set it (values are examples): every
# deploy security setting follows from SERENITY_TLS.
PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "k6Jq2vYp0sWm9rT3xN8bZc1dF4gH7jL5aQeRtUyIoP-_vB2nM6kX9wS3zD8fG1hJ4",
    "FIELD_ENCRYPTION_KEYS": "Vq3nX8rT1mZ6pL0sK9wB4yF7hD2jG5cA",
    "ALLOWED_HOSTS": "serenity.example.com",
    "SERENITY_TLS": "true",
    "SERENITY_NUM_PROXIES": "1",
    "DATABASE_URL": "postgres://serenity@db.internal:5432/serenity",
    "CELERY_BROKER_URL": "redis://redis.internal:6379/0",
}


def _check_deploy(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=REPO_ROOT,
        # Only what a deployment sets: nothing of the test run's own environment.
        env={"PATH": os.environ.get("PATH", ""), "SERENITY_VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_deploy_warns_without_them(tmp_path):
    # given only what the process needs to start
    env = {k: PRODUCTION_ENV[k] for k in ("SECRET_KEY", "FIELD_ENCRYPTION_KEYS", "ALLOWED_HOSTS")}
    # when
    completed = _check_deploy(tmp_path, env)
    # then the warnings the deploy variables silence
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in completed.stderr


def test_the_tls_switch_silences_them(tmp_path):
    # when
    completed = _check_deploy(tmp_path, PRODUCTION_ENV)
    # then
    assert completed.returncode == 0, completed.stderr
    assert "System check identified no issues" in completed.stdout


@pytest.mark.parametrize(
    "keys",
    [
        {"FIELD_ENCRYPTION_KEY": "k"},
        {"FIELD_ENCRYPTION_KEY": LONG_KEY[:31]},
        {"FIELD_ENCRYPTION_KEYS": f"short,{LONG_KEY}"},
    ],
)
def test_debug_off_with_a_short_encryption_key_refuses_to_start(tmp_path, keys):
    # when
    completed = _start_django(
        tmp_path,
        DEBUG="false",
        SECRET_KEY="s3cret",
        **{"FIELD_ENCRYPTION_KEY": None, "FIELD_ENCRYPTION_KEYS": None, **keys},
    )
    # then
    assert completed.returncode != 0
    assert "must have at least 32 characters when DEBUG is off" in completed.stderr


def test_an_older_short_key_may_still_decrypt_during_a_rotation(tmp_path):
    # when the key that encrypts is long and the one being rotated away from is short
    completed = _start_django(
        tmp_path,
        DEBUG="false",
        SECRET_KEY="s3cret",
        FIELD_ENCRYPTION_KEY=None,
        FIELD_ENCRYPTION_KEYS=f"{LONG_KEY},short",
    )
    # then
    assert completed.returncode == 0, completed.stderr


def _placeholder_variables() -> dict[str, str]:
    placeholders = {}
    for line in (REPO_ROOT / "deploy" / "production.env.example").read_text().splitlines():
        name, _, value = line.partition("=")
        if not line.startswith("#") and "<" in value:
            placeholders[name] = value
    return placeholders


def test_production_env_has_placeholders():
    assert {"SECRET_KEY", "FIELD_ENCRYPTION_KEYS", "SEMRUSH_API_TOKEN", "DATABASE_URL"} <= set(
        _placeholder_variables()
    )


@pytest.mark.parametrize("name", sorted(_placeholder_variables()))
def test_a_placeholder_of_production_env_refuses_to_start(tmp_path, name):
    # given a working configuration, but for one value copied from deploy/production.env
    overrides: dict[str, str | None] = {
        "DEBUG": "false",
        "SECRET_KEY": "s3cret",
        "FIELD_ENCRYPTION_KEY": LONG_KEY,
        "FIELD_ENCRYPTION_KEYS": None,
        name: _placeholder_variables()[name],
    }
    # when
    completed = _start_django(tmp_path, **overrides)
    # then
    assert completed.returncode != 0
    assert f"{name} still holds a placeholder (<...>) of deploy/production.env" in (
        completed.stderr
    )
