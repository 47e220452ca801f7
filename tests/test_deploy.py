"""The documented production deploy (SPEC §10.4): deploy/Procfile runs gunicorn, a worker and
beat; deploy/production.env lists every variable they need; `manage.py check --deploy` is clean
with it."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis
import requests

from tests.harness import free_port

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


def test_the_procfile_runs_gunicorn_a_worker_a_webhook_worker_and_beat():
    # when
    processes = dict(
        line.split(": ", 1)
        for line in (DEPLOY / "Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    )
    # then
    assert set(processes) == {"release", "web", "worker", "webhooks", "beat"}
    assert processes["web"].startswith("gunicorn -c config/gunicorn.py config.wsgi ")
    assert processes["worker"].startswith("celery -A config worker ")
    # deliveries have their own worker: the provisioning one excludes their queue
    assert " -X ${CELERY_TASK_QUEUE:-serenity}.webhooks" in processes["worker"]
    assert processes["webhooks"].startswith("celery -A config worker ")
    assert " -Q ${CELERY_TASK_QUEUE:-serenity}.webhooks " in processes["webhooks"]
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


def _procfile() -> dict[str, str]:
    return dict(
        line.split(": ", 1)
        for line in (DEPLOY / "Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    )


def _readme_production_commands() -> list[str]:
    """The shell lines of the README's production run, in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Production deploy") :]
    block = section[section.index("```sh\n") + 6 :]
    block = block[: block.index("```")]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_web_listens_where_only_the_proxy_reaches_it():
    # then gunicorn is on loopback, and the file declares the one proxy in front of it
    assert "--bind 127.0.0.1:${PORT:-8000}" in _procfile()["web"]
    assert "0.0.0.0" not in (DEPLOY / "Procfile").read_text()
    assert "SERENITY_NUM_PROXIES=1" in (DEPLOY / "production.env").read_text().splitlines()


def test_the_readme_runs_release_to_its_end_before_the_processes_with_the_env_file():
    # when
    commands = [line for line in _readme_production_commands() if line.startswith("honcho")]
    # then: release runs alone (`honcho run`), then only the long-running processes start
    release = f"honcho -e deploy/production.env run sh -c {shlex.quote(_procfile()['release'])}"
    assert commands == [
        release,
        "honcho -e deploy/production.env -f deploy/Procfile start -p 8000 web worker webhooks beat",
    ]


def _filled_env_file(tmp_path: Path, *, database: str, broker: str, queue: str) -> Path:
    """deploy/production.env as an operator fills it, on this machine's loopback servers."""
    values = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "FIELD_ENCRYPTION_KEYS": secrets.token_urlsafe(40),
        "DATABASE_URL": f"postgres://root@127.0.0.1:5432/{database}",
        "CELERY_BROKER_URL": broker,
        "SEMRUSH_API_TOKEN": "dev-token",
        "SERENITY_METRICS_TOKEN": secrets.token_urlsafe(32),
        "SEMRUSH_BASE_URL": "http://127.0.0.1:9",
        "SERENITY_VAR_DIR": str(tmp_path / "var"),
    }
    values["FIELD_ENCRYPTION_KEY"] = values["FIELD_ENCRYPTION_KEYS"]
    lines = []
    for line in (DEPLOY / "production.env").read_text().splitlines():
        name = line.partition("=")[0]
        lines.append(f"{name}={values[name]}" if name in values else line)
    path = tmp_path / "production.env"
    lines.append(f"CELERY_TASK_QUEUE={queue}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.live
def test_the_readme_production_run_keeps_web_worker_and_beat_up(tmp_path):
    # given the README's commands, with the filled file in place of deploy/production.env, a
    # throwaway database and queues of this test's own
    run = uuid.uuid4().hex[:8]
    database = f"serenity_prodrun_{run}"
    queue = f"serenity-prodrun-{run}"
    broker = f"redis://127.0.0.1:6379/{1 + os.getpid() % 15}"
    port = free_port()
    env_file = _filled_env_file(tmp_path, database=database, broker=broker, queue=queue)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    commands = [
        shlex.split(line.replace("deploy/production.env", str(env_file)).replace("8000", str(port)))
        for line in _readme_production_commands()
        if line.startswith("honcho")
    ]
    admin = psycopg.connect("postgresql://root@127.0.0.1:5432/postgres", autocommit=True)
    admin.execute(f'CREATE DATABASE "{database}"')
    queue_keys = redis.Redis.from_url(broker)
    started: subprocess.Popen[bytes] | None = None
    try:
        # when: release, then the processes
        released = subprocess.run(
            commands[0], cwd=ROOT, env=env, capture_output=True, timeout=300, check=False
        )
        assert released.returncode == 0, released.stderr.decode()[-3000:]
        log = (tmp_path / "honcho.log").open("wb")
        started = subprocess.Popen(
            commands[1], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        healthy = None
        while time.monotonic() < deadline and started.poll() is None:
            try:
                healthy = requests.get(
                    f"http://127.0.0.1:{port}/healthz",
                    headers={"Host": "serenity.example.com"},
                    timeout=5,
                )
                break
            except requests.RequestException:
                time.sleep(0.5)
        time.sleep(8)  # beat ticks, the worker consumes
        output = (tmp_path / "honcho.log").read_text()
        # then every process is still up, with the production settings
        assert started.poll() is None, output[-3000:]
        assert healthy is not None and healthy.status_code == 200, output[-3000:]
        assert "stopped" not in output
        for process in ("web.1", "worker.1", "webhooks.1", "beat.1"):
            assert f"{process} started" in output
        assert "Listening at: http://127.0.0.1:" in output
        assert queue_keys.llen(f"{queue}.periodic") == 0  # beat's ticks were consumed
    finally:
        if started is not None and started.poll() is None:
            started.send_signal(signal.SIGTERM)
            try:
                started.wait(timeout=30)
            except subprocess.TimeoutExpired:
                started.kill()
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.close()
        for key in queue_keys.scan_iter(match=f"*{queue}*"):
            queue_keys.delete(key)
        queue_keys.close()
