"""The documented production deploy (SPEC §10.4): deploy/Procfile runs gunicorn, a worker and
beat; deploy/production.env lists every variable they need; `manage.py check --deploy` is clean
with it."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def _production_env(tmp_path: Path) -> dict[str, str]:
    """deploy/production.env with its placeholders filled, and nothing else but PATH."""
    env: dict[str, str] = {"PATH": "/usr/bin:/bin", "SERENITY_VAR_DIR": str(tmp_path)}
    for line in (DEPLOY / "production.env").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, value = line.partition("=")
        env[name] = re.sub(r"<[^>]*>", secrets.token_urlsafe(50), value)
    env["FIELD_ENCRYPTION_KEY"] = env["FIELD_ENCRYPTION_KEYS"].split(",")[0]
    env["SERENITY_VAR_DIR"] = str(tmp_path)
    return env


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_procfile_runs_gunicorn_a_worker_and_beat():
    # when
    processes = dict(
        line.split(": ", 1)
        for line in (DEPLOY / "Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    )
    # then
    assert set(processes) == {"release", "web", "worker", "beat"}
    assert processes["web"].startswith("gunicorn -c config/gunicorn.py config.wsgi ")
    assert processes["worker"].startswith("celery -A config worker ")
    assert processes["beat"].startswith("celery -A config beat ")
    assert "collectstatic --no-input" in processes["release"]
    assert "migrate --no-input" in processes["release"]
    assert (ROOT / "config" / "gunicorn.py").exists()


def test_every_production_variable_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Production deploy") :]
    for line in (DEPLOY / "production.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert f"`{line.split('=', 1)[0]}`" in section


def test_check_deploy_is_clean_with_the_production_variables(tmp_path):
    # given deploy/production.env, filled in
    env = _production_env(tmp_path)
    # when
    checked = _manage(env, "check", "--deploy", "--fail-level", "WARNING")
    # then nothing at all
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout == "System check identified no issues (0 silenced).\n"
