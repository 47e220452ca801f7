"""Run the whole service on one machine, for development and demos (started by `scripts/run`).

Set-up, in this process: migrate the database, make sure a Serenity org exists whose parent
workspace is a seed parent of the simulator (the org id and the seed are kept in
`var/devserver.json`, so re-runs reuse them), mint a fresh writer token, and reset the admin
password. Then it supervises four children, each in its own process group with its output in
`var/log/<name>.log` (appended to: earlier runs' lines stay): the Semrush simulator, a Celery
worker, Celery beat and the API. Once `/healthz` answers it prints example requests and waits;
Ctrl-C (or SIGTERM) stops every child within a few seconds: the worker gets one SIGTERM (a warm
shutdown: it stops its own pool processes), the others a SIGTERM to their process group. If a
child dies, the others are stopped and the exit status is non-zero.

The simulator keeps its workspaces and projects in `var/simulator-state.json` across runs, and
`var/run.json` records this run's URLs (API, simulator) for `./scripts/manage`.

Prometheus' multiprocess folder (`var/prometheus`) is emptied at start: every process of this
run writes its counters there, and `/metrics` reads them all.

DEBUG is on for this run. DATABASE_URL and CELERY_BROKER_URL are honoured when set; the defaults
are SQLite and kombu's filesystem broker under `var/`, which need no server.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
# A warm worker shutdown waits for the tasks it runs (a step is short: seconds at most).
STOP_TIMEOUT_SECONDS = 20.0
READY_TIMEOUT_SECONDS = 90.0


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    # Stopped by a SIGTERM to its main process only (it stops its own children).
    own_shutdown: bool = False
    process: subprocess.Popen[bytes] | None = None
    log_file: IO[bytes] | None = None


class ChildExitedError(Exception):
    def __init__(self, child: Child) -> None:
        self.child = child
        code = child.process.returncode if child.process else None
        super().__init__(f"{child.name} exited with status {code}")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/run",
        description="Run API, Celery worker and beat, and the Semrush simulator locally.",
    )
    parser.add_argument("--host", default=os.environ.get("SERENITY_HOST", "127.0.0.1"))
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("SERENITY_PORT", "8000")), help="API port"
    )
    parser.add_argument(
        "--simulator-port",
        type=int,
        default=int(os.environ.get("SEMRUSH_SIMULATOR_PORT", "8765")),
    )
    parser.add_argument(
        "--concurrency", type=int, default=2, help="Celery worker threads (default 2)"
    )
    return parser.parse_args()


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback URL
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _environment(args: argparse.Namespace, var_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DEBUG="true",
        DJANGO_SETTINGS_MODULE="config.settings",
        SERENITY_VAR_DIR=str(var_dir),
        SEMRUSH_BASE_URL=f"http://127.0.0.1:{args.simulator_port}",
        SEMRUSH_API_TOKEN=env.get("SEMRUSH_API_TOKEN") or "dev-token",
        PYTHONUNBUFFERED="1",
    )
    return env


def _prepare(var_dir: Path) -> dict[str, str]:
    """Migrate; reuse or create the dev org; mint a token; reset the admin password."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections

    from serenity.models import Organization

    print("==> migrating the database", flush=True)
    call_command("migrate", interactive=False, verbosity=0)

    state_file = var_dir / "devserver.json"
    state: dict[str, str] = {}
    if state_file.exists():
        state = json.loads(state_file.read_text())
    parent = state.get("parentWorkspaceId") or str(uuid.uuid4())
    org_id = state.get("orgId", "")
    organization = None
    with contextlib.suppress(ValueError):
        organization = Organization.objects.filter(pk=uuid.UUID(org_id)).first()
    if organization is None or organization.semrush_parent_workspace_id != parent:
        out = io.StringIO()
        call_command(
            "create_org",
            "--name=Dev org",
            f"--parent-workspace-id={parent}",
            "--serenity",
            "--json",
            stdout=out,
        )
        org_id = json.loads(out.getvalue())["id"]
        print(f"==> created org {org_id} (parent workspace {parent})", flush=True)
    state_file.write_text(json.dumps({"orgId": org_id, "parentWorkspaceId": parent}, indent=2))

    out = io.StringIO()
    call_command("create_api_token", f"--org={org_id}", "--username=dev", "--json", stdout=out)
    token = json.loads(out.getvalue())["token"]

    admin_password = secrets.token_urlsafe(12)
    user_model = get_user_model()
    admin, _ = user_model.objects.get_or_create(username="admin")
    admin.is_staff = admin.is_superuser = True
    admin.set_password(admin_password)
    admin.save()

    connections.close_all()
    return {"orgId": org_id, "parent": parent, "token": token, "adminPassword": admin_password}


def _start(child: Child, env: dict[str, str]) -> None:
    child.log_file = child.log_path.open("ab")
    # A session of its own: the terminal's Ctrl-C reaches only this supervisor, which then stops
    # each child's whole process group (the worker's pool processes included).
    child.process = subprocess.Popen(  # noqa: S603 - fixed argv
        child.argv,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=child.log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    print(f"==> started {child.name} (pid {child.process.pid}, log {child.log_path})", flush=True)


def _check_alive(children: list[Child]) -> None:
    for child in children:
        if child.process is not None and child.process.poll() is not None:
            raise ChildExitedError(child)


def _wait_until(predicate: Any, children: list[Child], what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while not predicate():
        _check_alive(children)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not come up within {READY_TIMEOUT_SECONDS:.0f} s")
        time.sleep(0.25)


def _signal_group(child: Child, sig: signal.Signals) -> None:
    if child.process is None or child.process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.process.pid, sig)


def _signal_one(child: Child, sig: signal.Signals) -> None:
    if child.process is None or child.process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        child.process.send_signal(sig)


def _stop(children: list[Child]) -> None:
    for child in reversed(children):
        if child.own_shutdown:
            # The worker alone: its pool processes share its group, and a SIGTERM of their own
            # kills them mid-task, which leaves the worker waiting for them (~20 s) before it
            # can end its warm shutdown.
            _signal_one(child, signal.SIGTERM)
        else:
            _signal_group(child, signal.SIGTERM)
    started = time.monotonic()
    deadline = started + STOP_TIMEOUT_SECONDS
    for child in reversed(children):
        if child.process is None:
            continue
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            print(f"==> {child.name} stopped ({time.monotonic() - started:.1f} s)", flush=True)
        except subprocess.TimeoutExpired:
            print(f"==> {child.name} did not stop in time; killing it", flush=True)
            _signal_group(child, signal.SIGKILL)
            child.process.wait()
        # The worker's pool processes share its group; make sure none outlives it.
        _signal_group(child, signal.SIGKILL)
        if child.log_file is not None:
            child.log_file.close()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _banner(args: argparse.Namespace, setup: dict[str, str], log_dir: Path) -> str:
    base = f"http://{args.host}:{args.port}"
    org, token = setup["orgId"], setup["token"]
    auth = shlex.quote(f"Authorization: Bearer {token}")
    brand_body = json.dumps(
        {
            "name": f"Acme {secrets.token_hex(2)}",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
            "async": True,
        }
    )
    return "\n".join(
        [
            "",
            f"Serenity is running. Logs: {log_dir}/*.log   Stop: Ctrl-C",
            "",
            f"  API        {base}   (OpenAPI UI: {base}/api/docs/)",
            f"  Admin      {base}/admin/   user admin, password {setup['adminPassword']}",
            f"  Simulator  http://127.0.0.1:{args.simulator_port}   "
            f"(parent workspace {setup['parent']})",
            f"  Org        {org}",
            f"  Token      {token}   (writer; a new one every run)",
            "",
            "Paste this line into another shell: the README's examples use these variables.",
            "",
            f"export API={base} TOKEN={token} ORG={org}",
            "",
            "List the org's brands:",
            "",
            f"curl -sS -H {auth} {base}/v2/orgs/{org}/brands",
            "",
            "Create a brand with a US/en market asynchronously (answers 202 with a Location):",
            "",
            f"curl -sS -i -X POST -H {auth} -H 'Content-Type: application/json' "
            f"-d {shlex.quote(brand_body)} {base}/v2/orgs/{org}/brands",
            "",
            "then poll the job at the Location it answered:",
            "",
            f"curl -sS -H {auth} {base}<Location>",
            "",
            "Watch webhook events: start a receiver in another shell, then register it (the",
            "answer's `secret` lets the receiver verify signatures: add --secret whsec_...):",
            "",
            ".venv/bin/python scripts/webhook_receiver.py --port 9000",
            f"curl -sS -X POST -H {auth} -H 'Content-Type: application/json' "
            f"""-d '{{"url": "http://127.0.0.1:9000/"}}' {base}/v2/orgs/{org}/serenity/webhooks""",
            "",
        ]
    )


def _ports_free(args: argparse.Namespace) -> bool:
    """Whether the API's and the simulator's ports are free; if not, says which option to use."""
    for host, port, option, variable in (
        (args.host, args.port, "--port", "SERENITY_PORT"),
        ("127.0.0.1", args.simulator_port, "--simulator-port", "SEMRUSH_SIMULATOR_PORT"),
    ):
        if _port_in_use(host, port):
            print(
                f"error: port {port} is in use; pick another with {option} N (or set {variable})",
                file=sys.stderr,
            )
            return False
    return True


def _empty_metrics_dir(var_dir: Path) -> None:
    """Every process of this run writes its counters here; an earlier run's must not count."""
    metrics_dir = var_dir / "prometheus"
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(parents=True)


def _worker_child(args: argparse.Namespace, log_dir: Path) -> Child:
    argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info"]
    # Threads, as the README recommends for production: a warm shutdown takes well under a
    # second (prefork's takes ~2 s more, joining its processes).
    argv += ["-P", "threads", "--concurrency", str(args.concurrency), "-n", "serenity-dev@%h"]
    return Child("worker", argv, log_dir / "worker.log", own_shutdown=True)


def _children(
    args: argparse.Namespace, env: dict[str, str], setup: dict[str, str], var_dir: Path
) -> tuple[Child, list[Child]]:
    """The simulator, then what needs it: the worker, beat and the API, in start order."""
    python = sys.executable
    log_dir = var_dir / "log"
    simulator = Child(
        "simulator",
        [
            python,
            "manage.py",
            "semrush_simulator",
            "--host=127.0.0.1",
            f"--port={args.simulator_port}",
            f"--token={env['SEMRUSH_API_TOKEN']}",
            f"--parent={setup['parent']}",
            # Workspaces and projects outlive a restart, as the brands pointing at them do.
            f"--state-file={var_dir / 'simulator-state.json'}",
        ],
        log_dir / "simulator.log",
    )
    # -q: no printed banner (config/celery.py logs its facts as a JSON line instead).
    beat = Child(
        "beat",
        [python, "-m", "celery", "-A", "config", "-q", "beat", "-l", "info"],
        log_dir / "beat.log",
    )
    # gunicorn, as in production (deploy/Procfile): every line it writes is JSON, access lines
    # included (config/gunicorn.py), where runserver prints its own.
    api = Child(
        "api",
        [
            *(python, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"),
            *("--bind", f"{args.host}:{args.port}", "--workers", "1", "--threads", "4"),
            *("--graceful-timeout", "3"),
        ],
        log_dir / "api.log",
    )
    return simulator, [_worker_child(args, log_dir), beat, api]


def _write_run_file(args: argparse.Namespace, var_dir: Path) -> None:
    """`var/run.json`: where this run's API and simulator listen, for ./scripts/manage (which
    then talks to this run's simulator, whatever port it was given). No secret goes in it."""
    (var_dir / "run.json").write_text(
        json.dumps(
            {
                "apiUrl": f"http://{args.host}:{args.port}",
                "semrushBaseUrl": f"http://127.0.0.1:{args.simulator_port}",
            },
            indent=2,
        )
    )


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _supervise(
    args: argparse.Namespace,
    simulator: Child,
    others: list[Child],
    env: dict[str, str],
    banner: str,
) -> int:
    """Start the simulator, then the others once it listens; print the banner once the API
    answers; run until Ctrl-C or SIGTERM (0) or until a child exits or does not come up (1).
    Every child started is stopped on every way out."""
    # Explicitly, since a shell starting us in the background leaves SIGINT ignored.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    children: list[Child] = []
    try:
        children.append(simulator)
        _start(simulator, env)
        _wait_until(
            lambda: _port_in_use("127.0.0.1", args.simulator_port), children, "the simulator"
        )
        for child in others:
            children.append(child)
            _start(child, env)
        _wait_until(lambda: _http_ok(f"http://{args.host}:{args.port}/healthz"), children, "API")
        print(banner, flush=True)
        while True:
            _check_alive(children)
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("\n==> stopping", flush=True)
        _stop(children)
        return 0
    except (ChildExitedError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        failed = exc.child if isinstance(exc, ChildExitedError) else children[-1]
        print(f"--- last lines of {failed.log_path} ---", file=sys.stderr)
        print(_tail(failed.log_path), file=sys.stderr, flush=True)
        _stop(children)
        return 1


def main() -> int:
    args = _parse_args()
    var_dir = Path(os.environ.get("SERENITY_VAR_DIR") or ROOT / "var").resolve()
    log_dir = var_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    if not _ports_free(args):
        return 1
    _empty_metrics_dir(var_dir)

    env = _environment(args, var_dir)
    os.environ.update(env)
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    setup = _prepare(var_dir)

    _write_run_file(args, var_dir)
    simulator, others = _children(args, env, setup, var_dir)
    return _supervise(args, simulator, others, env, _banner(args, setup, log_dir))


if __name__ == "__main__":
    sys.exit(main())
