"""With DEBUG off the process refuses to start without SECRET_KEY or FIELD_ENCRYPTION_KEY
(SPEC §8); with DEBUG on, development defaults apply."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


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
@pytest.mark.parametrize("how", ["unset", "empty"])
def test_debug_off_without_a_secret_refuses_to_start(tmp_path, missing, how):
    # given
    overrides: dict[str, str | None] = {
        "DEBUG": "false",
        "SECRET_KEY": "s3cret",
        "FIELD_ENCRYPTION_KEY": "k3y",
    }
    overrides[missing] = None if how == "unset" else ""
    # when
    completed = _start_django(tmp_path, **overrides)
    # then
    assert completed.returncode != 0
    assert "ImproperlyConfigured" in completed.stderr
    assert f"{missing} must be set when DEBUG is off" in completed.stderr


def test_debug_off_with_both_secrets_starts(tmp_path):
    # when
    completed = _start_django(
        tmp_path, DEBUG="false", SECRET_KEY="s3cret", FIELD_ENCRYPTION_KEY="k3y"
    )
    # then
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""


def test_debug_unset_means_off(tmp_path):
    # when
    completed = _start_django(tmp_path, DEBUG=None, SECRET_KEY=None, FIELD_ENCRYPTION_KEY="k3y")
    # then
    assert completed.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in completed.stderr


def test_debug_on_uses_development_defaults(tmp_path):
    # when
    completed = _start_django(tmp_path, DEBUG="true", SECRET_KEY=None, FIELD_ENCRYPTION_KEY=None)
    # then
    assert completed.returncode == 0, completed.stderr
