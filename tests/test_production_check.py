"""The README's production section, run as written (SPEC §12.4 "Deploy as written"): in a fresh
clone of the repository, from an empty PostgreSQL to a completed async create and a signed
webhook received. CI runs it with the live suite (`.ci/run`: `./scripts/test -m live`).

Every line of the README's `sh` block runs, in order, in one bash script, unchanged but for:
- the names of the role and the database (`serenity` → a name of this run's own) and the port
  (`8000` → a free one), so that runs on one machine never collide;
- `<your Semrush parent workspace id>` → the simulator's parent.
What an operator does by hand is done by stand-ins: `$EDITOR` fills deploy/production.env (the
placeholders, the loopback PostgreSQL, Redis and simulator; plus the queue of this
run and `SERENITY_WEBHOOK_ALLOW_PRIVATE` (the receiver is on the loopback), as test
settings, and smaller
`WEB_CONCURRENCY` / `WORKER_THREADS`, the Procfile's sizes); the passwords typed are on stdin.
The section runs as root without sudo; the system user it creates has this run's name too, and
is deleted after. No systemd: the last
line, `honcho … start`, runs the Procfile's commands, as the units do.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis
import requests

from provisioning.simulator import SemrushSimulator
from tests.conftest import TEST_BROKER_URL
from tests.harness import _admin_url, free_port
from tests.run_resources import delete_run_keys
from tests.test_deploy import readme_production_commands

ROOT = Path(__file__).resolve().parent.parent
HOST = "serenity.example.com"
ROLE_PASSWORD = "role-password-17"
ADMIN_PASSWORD = "admin-password-17"
# The server of the DATABASE_URL given (README), to create and drop this run's role and database.
ADMIN_DATABASE = _admin_url(os.environ.get("DATABASE_URL", "postgres://root@127.0.0.1:5432/x"))


class _Receiver:
    """A webhook endpoint on the loopback (port 80 of an address of its own): keeps what it got."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        octets = (secrets.randbelow(200) + 20, secrets.randbelow(250), secrets.randbelow(250) + 2)
        address = "127.{}.{}.{}".format(*octets)
        self.server = ThreadingHTTPServer((address, 80), Handler)
        self.url = f"http://{address}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _stand_ins(tmp_path: Path, values: dict[str, str], extra: dict[str, str]) -> Path:
    """A folder with `editor` (fills the file it is given)."""
    folder = tmp_path / "stand-ins"
    folder.mkdir()
    filler = folder / "fill.py"
    filler.write_text(
        "import json, re, secrets, sys\n"
        f"values, extra = json.loads({json.dumps(json.dumps(values))}), "
        f"json.loads({json.dumps(json.dumps(extra))})\n"
        "path = sys.argv[1]\n"
        "lines = []\n"
        "for line in open(path).read().splitlines():\n"
        "    name, sep, value = line.partition('=')\n"
        "    if sep and not line.startswith('#'):\n"
        "        value = values.get(name, re.sub(r'<[^>]*>', secrets.token_urlsafe(40), value))\n"
        "        line = f'{name}={value}'\n"
        "    lines.append(line)\n"
        "lines += [f'{k}={v}' for k, v in extra.items()]\n"
        "open(path, 'w').write('\\n'.join(lines) + '\\n')\n"
    )
    editor = folder / "editor"
    editor.write_text(f'#!/bin/sh\nexec {sys.executable} {filler} "$1"\n')
    editor.chmod(0o755)
    return folder


def _script(name: str, port: int, parent: str) -> tuple[str, str]:
    """The README's lines, but the last, as one bash script; and the last (`honcho start`)."""
    lines = []
    for line in readme_production_commands():
        if line.startswith("runuser -u postgres") or "useradd" in line:
            line = re.sub(r"\bserenity\b", name, line)
        line = line.replace("<your Semrush parent workspace id>", parent)
        lines.append(line.replace("-p 8000", f"-p {port}"))
    return "set -euo pipefail\n" + "\n".join(lines[:-1]) + "\n", lines[-1]


@pytest.fixture
def upstream() -> Iterator[tuple[SemrushSimulator, str]]:
    parent = str(uuid.uuid4())
    simulator = SemrushSimulator(
        port=0, token="check-token", parents=[parent], config={"settleSeconds": 0.2}
    ).start()
    yield simulator, parent
    simulator.stop()


def _api(port: int, token: str) -> requests.Session:
    """Requests as the proxy of deploy/nginx/serenity.conf relays them."""
    session = requests.Session()
    session.headers.update(
        {
            "Authorization": f"Bearer {token}",
            "Host": HOST,
            "X-Forwarded-Proto": "https",
            "X-Forwarded-For": "203.0.113.9",
        }
    )
    session.base_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    return session


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout} s")


@pytest.mark.live
@pytest.mark.timeout(1200)
def test_the_readme_production_section_as_written(tmp_path, upstream):
    # given a fresh clone, an empty PostgreSQL (no role, no database), Redis, the simulator
    simulator, parent = upstream
    run = uuid.uuid4().hex[:8]
    name, queue, port = f"serenity_check_{run}", f"serenity-check-{run}", free_port()
    broker = TEST_BROKER_URL
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    stand_ins = _stand_ins(
        tmp_path,
        {
            "DATABASE_URL": _with_role(ADMIN_DATABASE, name, ROLE_PASSWORD),
            "CELERY_BROKER_URL": broker,
            "SEMRUSH_BASE_URL": simulator.base_url,
            "SEMRUSH_API_TOKEN": "check-token",
            "SERENITY_VAR_DIR": str(tmp_path / "var"),
        },
        {
            # This run's own queue and a receiver on the loopback: settings, through the test
            # settings module (nothing else changes for the processes but the throttles).
            "DJANGO_SETTINGS_MODULE": "config.settings_test",
            "SERENITY_TEST_SETTINGS": shlex.quote(
                json.dumps(
                    {"CELERY_TASK_DEFAULT_QUEUE": queue, "SERENITY_WEBHOOK_ALLOW_PRIVATE": True}
                )
            ),
            # The Procfile's sizes, smaller: the machine's PostgreSQL is shared.
            "WEB_CONCURRENCY": "1",
            "WORKER_THREADS": "4",
        },
    )
    env = {
        "PATH": f"{stand_ins}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(tmp_path),
        "EDITOR": str(stand_ins / "editor"),
        "PYTHON": sys.executable,  # the interpreter scripts/bootstrap-venv creates the venv with
    }
    script, start = _script(name, port, parent)
    receiver = _Receiver()
    started: subprocess.Popen[bytes] | None = None
    try:
        # when: the README's lines, up to the first org, token and admin
        setup = subprocess.run(
            ["bash", "-c", script],
            cwd=clone,
            env=env,
            input=f"{ADMIN_PASSWORD}\n{ROLE_PASSWORD}\n{ROLE_PASSWORD}\n",
            capture_output=True,
            text=True,
            timeout=900,
            start_new_session=True,  # no terminal: the prompts read stdin
            check=False,
        )
        assert setup.returncode == 0, (setup.stdout + setup.stderr)[-5000:]
        exports = re.search(r"^export API=https://\S+ TOKEN=(\S+) ORG=(\S+)$", setup.stdout, re.M)
        assert exports is not None, setup.stdout
        token, org = exports.groups()
        # and the processes, as the Procfile runs them
        log = (tmp_path / "honcho.log").open("wb")
        started = subprocess.Popen(
            ["bash", "-c", f". .venv/bin/activate && exec {start}"],
            cwd=clone,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # then a probe by IP answers, whatever the Host
        probe = f"http://127.0.0.1:{port}/healthz"
        _wait_for(lambda: _get_ok(probe), 90, "the probe to answer")
        api = _api(port, token)
        base = f"{api.base_url}/v2/orgs/{org}"  # type: ignore[attr-defined]
        # and a webhook is registered, an async create completes, its event arrives signed
        hook = api.post(f"{base}/serenity/webhooks", json={"url": receiver.url}, timeout=30)
        assert hook.status_code == 201, hook.text + _tail(tmp_path / "honcho.log")
        accepted = api.post(
            f"{base}/brands",
            json={
                "name": "Deployed Brand",
                "baseUrl": "https://deployed.example",
                "semrushMarket": {"market": "US", "languageCode": "en"},
                "async": True,
            },
            timeout=30,
        )
        assert accepted.status_code == 202, accepted.text + _tail(tmp_path / "honcho.log")
        job_url = f"{api.base_url}{accepted.headers['Location']}"  # type: ignore[attr-defined]
        job = _wait_for(
            lambda: _finished(api.get(job_url, timeout=30).json()), 120, "the job to finish"
        )
        assert job["status"] == "COMPLETED", str(job) + _tail(tmp_path / "honcho.log")
        headers, body = _wait_for(lambda: _event_of(receiver, accepted.json()["id"]), 60, "event")
        from standardwebhooks.webhooks import Webhook

        Webhook(hook.json()["secret"]).verify(body, headers)  # raises when the signature is wrong
        # and the admin user is a superuser with the password typed
        checked = subprocess.run(
            [
                "bash",
                "-c",
                ". .venv/bin/activate && honcho -e deploy/production.env run python manage.py "
                'shell -c "from django.contrib.auth import get_user_model; '
                "admin = get_user_model().objects.get(username='admin'); "
                f"print(admin.is_superuser and admin.check_password('{ADMIN_PASSWORD}'))\"",
            ],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert checked.stdout.splitlines()[-1:] == ["True"], checked.stdout + checked.stderr
    finally:
        _cleanup(started, receiver, name, broker, queue)


def _tail(path: Path, characters: int = 6000) -> str:
    return "\n--- " + str(path) + " ---\n" + path.read_text(errors="replace")[-characters:]


def _get_ok(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False


def _finished(job: dict[str, Any]) -> dict[str, Any] | None:
    return job if job.get("status") not in (None, "IN_PROGRESS") else None


def _event_of(receiver: _Receiver, brand_id: str) -> tuple[dict[str, str], bytes] | None:
    for headers, body in receiver.received:
        if brand_id in body.decode(errors="replace"):
            return headers, body
    return None


def _cleanup(
    started: subprocess.Popen[bytes] | None,
    receiver: _Receiver,
    name: str,
    broker: str,
    queue: str,
) -> None:
    if started is not None and started.poll() is None:
        os.killpg(started.pid, signal.SIGTERM)
        try:
            started.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(started.pid, signal.SIGKILL)
            started.wait()
    receiver.stop()
    # The shared server may be full for a moment ("too many clients"): retry.
    for attempt in range(10):
        try:
            with psycopg.connect(ADMIN_DATABASE, autocommit=True) as db:
                db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                db.execute(f'DROP ROLE IF EXISTS "{name}"')
            break
        except psycopg.OperationalError:
            if attempt == 9:
                raise
            time.sleep(3)
    # The system user the README's section created (this run's name).
    subprocess.run(["userdel", name], capture_output=True, timeout=60, check=False)
    keys = redis.Redis.from_url(broker)
    delete_run_keys(keys, queue)
    keys.close()


def _with_role(admin_url: str, name: str, password: str) -> str:
    """The given server, as role `name` with `password`, database `name`."""
    parts = urlsplit(admin_url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{name}:{password}@{host}:{parts.port or 5432}"
    return urlunsplit(("postgres", netloc, f"/{name}", "", ""))
