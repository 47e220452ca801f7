"""The whole service as real processes, for chaos tests and benchmarks.

A `Stack` starts, on free loopback ports and with one shared environment:

- the Semrush simulator (`manage.py semrush_simulator --port P --parent ID`),
- a fresh PostgreSQL database (created, migrated with `manage.py migrate`, dropped at `stop()`),
- its own `redis-server` (`--save "" --appendonly no`: a restart loses every message),
- the API under gunicorn (`gunicorn config.wsgi -w 2 --threads 4`),
- N Celery workers (`celery -A config worker -c C -Q <queue>,<queue>.periodic`) and Celery beat,

with the time tunables shrunk to fractions of a second (settings of `config.settings_test`,
given to every process as SERENITY_TEST_SETTINGS), so that a settle wait, a lost message or an
expired lease resolves in seconds. It offers the faults a chaos test needs (SIGKILL a
worker, stop/start Redis with its data lost, terminate the database's backends, simulator
faults), an HTTP client, direct reads of the job/attempt tables, `wait_until_quiet()` and
`audit()`. Every process writes its own log under `stack.log_dir`; `dump_logs()` returns their
tails for a failure report.

Nothing here imports Django: the harness drives the service from the outside, like an operator.

    with Stack(StackConfig(workers=2)).start() as stack:
        org_id, token = stack.create_org_and_token()
        api = stack.client(token, org_id)
        api.post(api.brands_path, {"name": "Acme", "baseUrl": "https://acme.example",
                                   "async": True})
        stack.wait_until_quiet()
        assert stack.violations() == []
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
import requests
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent

SIM_TOKEN = "dev-token"

# Shrunk tunables (SPEC §9), as settings. The lease must exceed the longest single upstream
# call with its retries: 3 attempts x 2 s timeout + backoffs (~6.6 s) would not fit in 5 s, so
# 8 s. Benchmarks and chaos runs send bursts with one token from one address: the throttles
# (SPEC §10.5, tested on their own) stay at config.settings_test's, which never shape them.
DEFAULT_SETTINGS: dict[str, Any] = {
    "SERENITY_PROVISION_BACKOFF_SECONDS": [0.5, 0.5, 1, 1, 2],
    "SERENITY_SETTLE_POLL_INTERVAL_MS": 100,
    "SERENITY_SETTLE_POLL_ATTEMPTS": 30,
    "SERENITY_PROVISIONING_STALE_AFTER_SECONDS": 60,
    "SERENITY_STALE_SWEEP_INTERVAL_SECONDS": 1,
    "SEMRUSH_TIMEOUT_SECONDS": 2,
    "JOBS_LEASE_SECONDS": 8,
    "JOBS_DISPATCH_INTERVAL_SECONDS": 0.5,
    "DB_CONN_MAX_AGE": 60,
    # production's (config/settings.py), not config.settings_test's
    "SEMRUSH_RATE_LIMIT_BURST": 5,
}

TERMINAL_JOB_STATUSES = frozenset({"COMPLETED", "FAILED", "CANCELLED"})

# `provisioning_audit` takes this share of the credential's rate (its setting
# SERENITY_AUDIT_RATE_SHARE, at its default); a `manage.py` process starts within this long on
# the shared 2-core machine.
AUDIT_RATE_SHARE = 0.5
AUDIT_STARTUP_SECONDS = 30.0


class StackError(RuntimeError):
    """A process did not start, or the stack did not converge in time."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(
    predicate: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.1
) -> Any:
    """Poll `predicate` until it returns a truthy value (returned); StackError on timeout.
    Exceptions raised by the predicate count as "not yet"."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:
            last_error = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise StackError(f"timed out after {timeout:g} s waiting for {what}{detail}")
        time.sleep(interval)


class ManagedProcess:
    """One child process in its own session (so a signal reaches its whole process group,
    e.g. a Celery worker and its pool children), logging to one file."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str],
        log_path: Path,
        ready: Callable[[ManagedProcess], bool] | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = dict(env)
        self.log_path = log_path
        self._ready = ready
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ManagedProcess:
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {time.strftime('%H:%M:%S')} {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=str(ROOT),
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = 60.0) -> ManagedProcess:
        def probe() -> bool:
            if not self.alive:
                raise StackError(f"{self.name} exited early (code {self.returncode})")
            return self._ready is None or self._ready(self)

        try:
            wait_for(probe, timeout=timeout, what=f"{self.name} to be ready", interval=0.1)
        except StackError as exc:
            raise StackError(f"{exc}; log: {self.log_path}\n{self.tail(40)}") from None
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole process group (a crash: nothing is acknowledged or cleaned up)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`. Also reaps pool children left behind."""
        if self.proc is None:
            return
        if self.alive:
            self.signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        self.kill()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


@dataclass
class StackConfig:
    """What to start. `settings` overrides DEFAULT_SETTINGS (config.settings_test reads them
    from SERENITY_TEST_SETTINGS); `env` adds operator variables (README, "Configuration")."""

    workers: int = 1
    concurrency: int = 2
    worker_pool: str | None = None  # `celery worker -P`: None = Celery's default (prefork)
    # The deliveries' own worker (`-Q <queue>.webhooks`, as deploy/Procfile's `webhooks`).
    webhook_concurrency: int = 4
    api: bool = True
    api_workers: int = 2
    api_threads: int = 4
    beat: bool = True
    settle_seconds: float = 1.0
    settings: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout: float = 60.0


@dataclass(frozen=True)
class Response:
    """An HTTP answer, decoded; `elapsed` in seconds."""

    status: int
    body: Any
    headers: Mapping[str, str]
    elapsed: float


class ApiClient:
    """A bearer-token HTTP client for one org. One per thread (a requests.Session is not
    thread-safe)."""

    def __init__(self, base_url: str, token: str, org_id: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.org_id = org_id
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    @property
    def brands_path(self) -> str:
        return f"/v2/orgs/{self.org_id}/brands"

    def brand_path(self, brand_id: str) -> str:
        return f"{self.brands_path}/{brand_id}"

    def serenity_path(self, brand_id: str, rest: str = "") -> str:
        return f"{self.brand_path(brand_id)}/serenity{'/' + rest.lstrip('/') if rest else ''}"

    def request(self, method: str, path: str, body: Any = None) -> Response:
        started = time.monotonic()
        answer = self.session.request(
            method,
            f"{self.base_url}{path}",
            json=body,
            timeout=self.timeout,
        )
        elapsed = time.monotonic() - started
        try:
            decoded: Any = answer.json() if answer.content else None
        except ValueError:
            decoded = answer.text
        return Response(answer.status_code, decoded, dict(answer.headers), elapsed)

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None) -> Response:
        return self.request("POST", path, body if body is not None else {})

    def patch(self, path: str, body: Any) -> Response:
        return self.request("PATCH", path, body)

    def delete(self, path: str) -> Response:
        return self.request("DELETE", path)

    def job(self, brand_id: str, job_id: str) -> Response:
        return self.get(self.serenity_path(brand_id, f"jobs/{job_id}"))

    def close(self) -> None:
        self.session.close()


class Stack:
    """The service as real processes on free ports, with one environment. See the module doc."""

    def __init__(self, config: StackConfig | None = None, *, name: str = "stack") -> None:
        self.config = config or StackConfig()
        self.id = f"{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"serenity-{name}-"))
        self.parent_id = f"parent-{uuid.uuid4()}"
        self.db_name = f"serenity_{self.id.replace('-', '_')}"
        self.queue = f"serenity-{self.id}"
        # The server of the DATABASE_URL given (README), a database of the stack's own.
        admin_url = _admin_url(
            os.environ.get("DATABASE_URL", "postgres://root@127.0.0.1:5432/postgres")
        )
        self.admin_database_url = admin_url
        self.database_url = _with_database(admin_url, self.db_name)
        self.sim_port = free_port()
        self.redis_port = free_port()
        self.api_port = free_port()
        self.broker_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.sim_url = f"http://127.0.0.1:{self.sim_port}"
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.env = self._build_env()
        self.sim: ManagedProcess | None = None
        self.redis: ManagedProcess | None = None
        self.api: ManagedProcess | None = None
        self.beat: ManagedProcess | None = None
        self.workers: list[ManagedProcess] = []
        self.webhook_worker: ManagedProcess | None = None
        self._worker_serial = 0
        self._db_created = False
        self._db: psycopg.Connection[dict[str, Any]] | None = None
        self._db_lock = threading.Lock()
        self._sim_http = requests.Session()
        self.started = False

    # --- environment ---------------------------------------------------------------------------

    def _build_env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            # The pytest process' own service settings must not leak into the stack.
            if not k.startswith(("SERENITY_", "JOBS_", "SEMRUSH_", "CELERY_", "PYTEST_"))
            and k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR"}
        }
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings_test",
            SERENITY_TEST_SETTINGS=json.dumps(self.settings),
            PYTHONUNBUFFERED="1",
            DATABASE_URL=self.database_url,
            CELERY_BROKER_URL=self.broker_url,
            SEMRUSH_BASE_URL=self.sim_url,
            SEMRUSH_API_TOKEN=SIM_TOKEN,
            SECRET_KEY=f"stack-secret-{self.id}",
            FIELD_ENCRYPTION_KEY=f"stack-field-encryption-key-of-the-stack-{self.id}",
            DEBUG="false",
            ALLOWED_HOSTS="127.0.0.1,localhost",
            LOG_LEVEL="INFO",
            SERENITY_VAR_DIR=str(self.log_dir / "var"),
        )
        env.update(self.config.env)
        return env

    @property
    def settings(self) -> dict[str, Any]:
        """The settings every process of the stack gets over config.settings_test's."""
        return {
            **DEFAULT_SETTINGS,
            "CELERY_TASK_DEFAULT_QUEUE": self.queue,
            **self.config.settings,
        }

    def tunable(self, name: str) -> float:
        return float(self.settings[name])

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Stack:
        """Start everything and wait until each process answers. On failure, stop what started
        and raise StackError with the logs."""
        try:
            self.sim = self._process(
                "simulator",
                [
                    PYTHON,
                    "manage.py",
                    "semrush_simulator",
                    "--port",
                    str(self.sim_port),
                    "--parent",
                    self.parent_id,
                    "--token",
                    SIM_TOKEN,
                    "--settle-seconds",
                    str(self.config.settle_seconds),
                ],
                ready=lambda _p: self._get_ok(f"{self.sim_url}/__sim/health"),
            ).start()
            self.redis = self._redis_process().start()
            self._create_database()
            self.sim.wait_ready(self.config.startup_timeout)
            self.redis.wait_ready(self.config.startup_timeout)
            self.manage("migrate", "--no-input", "-v", "0", check=True)
            if self.config.api:
                self.api = self._api_process().start()
            for _ in range(self.config.workers):
                self.workers.append(self._worker_process().start())
            if self.config.workers:
                self.webhook_worker = self._webhook_worker_process().start()
            if self.config.beat:
                self.beat = self._beat_process().start()
            for process in self.processes():
                process.wait_ready(self.config.startup_timeout)
        except BaseException:
            self.stop(keep_logs=True)
            raise
        self.started = True
        return self

    def stop(self, *, keep_logs: bool = False) -> None:
        """Stop every process (SIGTERM, SIGKILL after 5 s), drop the database, and (unless
        `keep_logs`) delete the logs."""
        running = [
            p
            for p in [*self.workers, self.webhook_worker, self.beat, self.api, self.sim, self.redis]
            if p is not None
        ]
        for process in running:
            process.signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for process in running:
            if process.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            process.kill()
        if self._db is not None:
            with contextlib.suppress(Exception):
                self._db.close()
            self._db = None
        if self._db_created:
            with psycopg.connect(self.admin_database_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
            self._db_created = False
        self._sim_http.close()
        self.started = False
        if not keep_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> Stack:
        if not self.started:
            self.start()
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.stop(keep_logs=exc_type is not None)

    def processes(self) -> list[ManagedProcess]:
        processes = [self.sim, self.redis, self.api, *self.workers, self.webhook_worker, self.beat]
        return [p for p in processes if p]

    # --- processes --------------------------------------------------------------------------

    def _process(
        self,
        name: str,
        argv: list[str],
        *,
        ready: Callable[[ManagedProcess], bool] | None = None,
    ) -> ManagedProcess:
        return ManagedProcess(
            name, argv, env=self.env, log_path=self.log_dir / f"{name}.log", ready=ready
        )

    def _redis_process(self) -> ManagedProcess:
        redis_dir = self.log_dir / "redis"
        redis_dir.mkdir(exist_ok=True)
        return self._process(
            "redis",
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(redis_dir),
            ],
            ready=lambda _p: self._redis_ping(),
        )

    def _api_process(self) -> ManagedProcess:
        return self._process(
            "api",
            [
                str(BIN / "gunicorn"),
                "-c",
                "config/gunicorn.py",
                "config.wsgi",
                "-w",
                str(self.config.api_workers),
                "--threads",
                str(self.config.api_threads),
                "-b",
                f"127.0.0.1:{self.api_port}",
                "--timeout",
                "60",
                "--graceful-timeout",
                "5",
                "--no-control-socket",
                "--access-logfile",
                "-",
                "--access-logformat",
                "%(m)s %(U)s %(s)s %(L)ss",
            ],
            ready=lambda _p: self._get_ok(f"{self.api_url}/healthz"),
        )

    def _worker_process(self, concurrency: int | None = None) -> ManagedProcess:
        self._worker_serial += 1
        serial = self._worker_serial
        return self._process(
            f"worker-{serial}",
            [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                # The steps' queue and beat's (config/settings.py: CELERY_PERIODIC_QUEUE).
                "-Q",
                f"{self.queue},{self.queue}.periodic",
                "-c",
                str(concurrency or self.config.concurrency),
                "-l",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"{self.id}-{serial}@%h",
                *(["-P", self.config.worker_pool] if self.config.worker_pool else []),
            ],
            ready=lambda p: " ready." in p.log_text()[-50000:],
        )

    def _webhook_worker_process(self) -> ManagedProcess:
        return self._process(
            "webhook-worker",
            [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-P",
                "threads",
                "-Q",
                f"{self.queue}.webhooks",
                "-c",
                str(self.config.webhook_concurrency),
                "-l",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"{self.id}-webhooks@%h",
            ],
            ready=lambda p: " ready." in p.log_text()[-50000:],
        )

    def _beat_process(self) -> ManagedProcess:
        return self._process(
            "beat",
            [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "config",
                "-q",  # no printed banner: every line is JSON (README, "Logs and metrics")
                "beat",
                "-l",
                "INFO",
                "-s",
                str(self.log_dir / "celerybeat-schedule"),
            ],
            ready=lambda p: "beat: Starting" in p.log_text(),
        )

    def manage(
        self, *args: str, check: bool = False, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run `manage.py <args>` with the stack's environment."""
        completed = subprocess.run(
            [PYTHON, "manage.py", *args],
            env=self.env,
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and completed.returncode != 0:
            raise StackError(
                f"manage.py {' '.join(args)} exited {completed.returncode}:\n"
                f"{completed.stdout}\n{completed.stderr}"
            )
        return completed

    # --- workers ---------------------------------------------------------------------------

    def add_worker(self, concurrency: int | None = None) -> ManagedProcess:
        worker = self._worker_process(concurrency).start().wait_ready(self.config.startup_timeout)
        self.workers.append(worker)
        return worker

    def kill_worker(self, index: int = 0) -> ManagedProcess:
        """SIGKILL worker `index` and its pool children: its unacknowledged message stays with
        the broker and its claim stays in the database until the lease expires."""
        worker = self.workers[index]
        worker.kill()
        return worker

    def restart_worker(self, index: int = 0) -> ManagedProcess:
        """Kill worker `index` (if alive) and start a fresh one in its place."""
        self.workers[index].kill()
        fresh = self._worker_process().start()
        self.workers[index] = fresh
        return fresh.wait_ready(self.config.startup_timeout)

    def restart_webhook_worker(self) -> ManagedProcess:
        """SIGKILL the deliveries' worker (an attempt in flight is lost with it: its job stays
        claimed until its lease expires) and start a fresh one in its place."""
        assert self.webhook_worker is not None, "the stack runs no worker"
        self.webhook_worker.kill()
        self.webhook_worker = self._webhook_worker_process().start()
        return self.webhook_worker.wait_ready(self.config.startup_timeout)

    def pause_workers(self) -> None:
        """SIGSTOP every worker (and its pool): messages wait in the broker (or in a paused
        worker's socket) until `resume_workers()`."""
        for worker in self.workers:
            worker.signal(signal.SIGSTOP)

    def resume_workers(self) -> None:
        for worker in self.workers:
            worker.signal(signal.SIGCONT)

    def worker_log_lines(self, *needles: str) -> list[str]:
        """Lines of every worker log (of live and dead workers) that contain all of
        `needles`."""
        return [
            line
            for path in sorted(self.log_dir.glob("worker-*.log"))
            for line in path.read_text(errors="replace").splitlines()
            if all(needle in line for needle in needles)
        ]

    def live_workers(self) -> list[ManagedProcess]:
        return [w for w in self.workers if w.alive]

    # --- redis -----------------------------------------------------------------------------

    def _redis_ping(self) -> bool:
        client = redis.Redis(host="127.0.0.1", port=self.redis_port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        finally:
            client.close()

    def stop_redis(self) -> None:
        """Kill the stack's Redis: every queued, unacknowledged and countdown message is gone
        (it never persists anything)."""
        assert self.redis is not None
        self.redis.kill()

    def start_redis(self) -> None:
        """Start Redis again, empty, on the same port."""
        assert self.redis is not None
        if self.redis.alive:
            return
        self.redis = self._redis_process().start().wait_ready(self.config.startup_timeout)

    def freeze_redis(self) -> None:
        """SIGSTOP Redis: connections are still accepted (by the kernel) but nothing answers,
        like a broker behind a broken network."""
        assert self.redis is not None
        self.redis.signal(signal.SIGSTOP)

    def thaw_redis(self) -> None:
        assert self.redis is not None
        self.redis.signal(signal.SIGCONT)

    def restart_redis(self) -> None:
        self.stop_redis()
        self.start_redis()

    def send_task(self, name: str, *args: Any, countdown: float | None = None) -> None:
        """Publish a raw task message to the stack's queue, as the service would (e.g. a step
        name from `serenity.step.<step>` with a job id: a duplicate delivery)."""
        from celery import Celery

        app = Celery("stack-client", set_as_current=False)
        # An explicit connection: Celery prefers a CELERY_BROKER_URL in this process's
        # environment (e.g. the test suite's shared Redis) over any configured broker.
        try:
            with app.connection_for_write(self.broker_url) as connection:
                app.send_task(
                    name,
                    args=list(args),
                    queue=self.queue,
                    countdown=countdown,
                    connection=connection,
                )
        finally:
            app.close()

    def broker_queue_length(self) -> int:
        client = redis.Redis(host="127.0.0.1", port=self.redis_port, socket_connect_timeout=0.5)
        try:
            return int(client.llen(self.queue))  # type: ignore[arg-type]
        finally:
            client.close()

    # --- database --------------------------------------------------------------------------

    def _create_database(self) -> None:
        with psycopg.connect(self.admin_database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{self.db_name}"')
        self._db_created = True

    def _connection(self) -> psycopg.Connection[dict[str, Any]]:
        if self._db is None or self._db.closed or self._db.broken:
            self._db = psycopg.connect(self.database_url, autocommit=True, row_factory=dict_row)
        return self._db

    def query(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        """Run one statement on the stack's database (autocommit); rows as dicts."""
        with self._db_lock:
            for attempt in (1, 2):
                try:
                    with self._connection().cursor() as cursor:
                        cursor.execute(sql, params)  # type: ignore[arg-type]
                        return list(cursor.fetchall()) if cursor.description else []
                except psycopg.OperationalError:
                    # Our own connection may have been terminated by a chaos step: reconnect.
                    self._db = None
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    def terminate_db_backends(self) -> int:
        """`pg_terminate_backend` every connection to the stack's database but the harness's
        own (the workers', the API's, beat's). Returns how many were terminated."""
        rows = self.query(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (self.db_name,),
        )
        return int(rows[0]["n"])

    def jobs(self) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM jobs_asyncjob ORDER BY created_at, position")

    def job(self, job_id: str) -> dict[str, Any]:
        rows = self.query("SELECT * FROM jobs_asyncjob WHERE id = %s", (job_id,))
        if not rows:
            raise StackError(f"no job {job_id}")
        return rows[0]

    def chain(self, root_id: str) -> list[dict[str, Any]]:
        """A chain's rows, in order (the root first)."""
        return self.query(
            "SELECT * FROM jobs_asyncjob WHERE id = %s OR root_id = %s ORDER BY position",
            (root_id, root_id),
        )

    def attempts(self) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM provisioning_provisioningattempt ORDER BY created_at")

    def markets(self) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM serenity_market ORDER BY created_at")

    def brands(self) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM serenity_brand ORDER BY created_at")

    def job_counts(self) -> dict[str, int]:
        """Roots (the jobs clients poll) by status."""
        rows = self.query(
            "SELECT status, count(*) AS n FROM jobs_asyncjob WHERE root_id IS NULL GROUP BY status"
        )
        return {row["status"]: int(row["n"]) for row in rows}

    # --- the simulator -----------------------------------------------------------------------

    def _sim(self, method: str, path: str, body: Any = None) -> Any:
        answer = self._sim_http.request(method, f"{self.sim_url}{path}", json=body, timeout=10)
        if answer.status_code >= 400:
            raise StackError(f"simulator {method} {path}: {answer.status_code} {answer.text}")
        return answer.json() if answer.content else None

    def sim_config(self, **updates: Any) -> dict[str, Any]:
        """Merge `/__sim/config` (settleSeconds, errorRate5xx, rateLimitPerSecond, ...)."""
        return dict(self._sim("POST", "/__sim/config", updates))

    def sim_fault(
        self,
        *,
        method: str,
        path_regex: str,
        times: int = 1,
        status: int | None = None,
        body: Any = None,
        delay_ms: float = 0,
        commit: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Script the next `times` answers to `method` on paths matching `path_regex`."""
        spec: dict[str, Any] = {
            "method": method,
            "pathRegex": path_regex,
            "times": times,
            "delayMs": delay_ms,
            "commit": commit,
        }
        if status is not None:
            spec["status"] = status
        if body is not None:
            spec["body"] = body
        if headers:
            spec["headers"] = dict(headers)
        return dict(self._sim("POST", "/__sim/faults", spec))

    def sim_faults(self) -> list[dict[str, Any]]:
        return list(self._sim("GET", "/__sim/faults"))

    def sim_add_token(self, token: str) -> None:
        """Accept one more bearer token (`/__sim/tokens`): an org with its own credential."""
        self._sim("POST", "/__sim/tokens", {"token": token})

    def sim_clear_faults(self) -> None:
        self._sim("DELETE", "/__sim/faults")

    def sim_state(self) -> dict[str, Any]:
        return dict(self._sim("GET", "/__sim/state"))

    def sim_requests(self) -> list[dict[str, Any]]:
        return list(self._sim("GET", "/__sim/requests"))

    def _get_ok(self, url: str) -> bool:
        return requests.get(url, timeout=1).status_code == 200

    # --- tenants and the API -----------------------------------------------------------------

    def create_org(self, name: str | None = None, *, flat: bool = False) -> str:
        """A Serenity org under the simulator's parent (`create_org --json`). Returns its id."""
        completed = self.manage(
            "create_org",
            "--name",
            name or f"Org {uuid.uuid4().hex[:8]}",
            "--parent-workspace-id",
            self.parent_id,
            "--serenity",
            "--workspace-mode",
            "flat" if flat else "subworkspace",
            "--json",
            check=True,
        )
        return str(json.loads(completed.stdout)["id"])

    def create_token(
        self, org_id: str, *, role: str = "writer", username: str | None = None
    ) -> str:
        completed = self.manage(
            "create_api_token",
            "--org",
            org_id,
            "--role",
            role,
            "--username",
            username or f"user-{uuid.uuid4().hex[:8]}",
            "--json",
            check=True,
        )
        return str(json.loads(completed.stdout)["token"])

    def create_org_and_token(self, *, flat: bool = False) -> tuple[str, str]:
        org_id = self.create_org(flat=flat)
        return org_id, self.create_token(org_id)

    def client(self, token: str, org_id: str, *, timeout: float = 30.0) -> ApiClient:
        return ApiClient(self.api_url, token, org_id, timeout=timeout)

    # --- convergence -----------------------------------------------------------------------

    def unfinished_jobs(self) -> list[dict[str, Any]]:
        return self.query(
            "SELECT id, root_id, step, position, run_after, published_at, claim_token,"
            " lease_expires_at, run_count, publish_count FROM jobs_asyncjob"
            " WHERE status = 'IN_PROGRESS' ORDER BY created_at"
        )

    def wait_until_quiet(self, timeout: float = 60.0) -> None:
        """Wait until every job is terminal and no attempt is pending. StackError (listing the
        stragglers) on timeout."""

        def quiet() -> bool:
            rows = self.query(
                "SELECT (SELECT count(*) FROM jobs_asyncjob WHERE status = 'IN_PROGRESS') AS jobs,"
                " (SELECT count(*) FROM provisioning_provisioningattempt"
                "  WHERE status = 'pending') AS attempts"
            )
            return rows[0]["jobs"] == 0 and rows[0]["attempts"] == 0

        try:
            wait_for(quiet, timeout=timeout, what="every job to finish", interval=0.25)
        except StackError as exc:
            pending = self.query(
                "SELECT id, brand_id, started_by, updated_at FROM provisioning_provisioningattempt"
                " WHERE status = 'pending'"
            )
            raise StackError(
                f"{exc}\nunfinished jobs: {self.unfinished_jobs()}\npending attempts: {pending}"
            ) from None

    def audit(self, *args: str) -> tuple[int, dict[str, Any]]:
        """`manage.py provisioning_audit --json [args]` → (exit code, parsed report), within
        the audit's own bound (:meth:`audit_bound_seconds`) plus a process start."""
        completed = self.manage(
            "provisioning_audit",
            "--json",
            *args,
            timeout=self.audit_bound_seconds() + AUDIT_STARTUP_SECONDS,
        )
        try:
            report = json.loads(completed.stdout)
        except ValueError:
            raise StackError(
                f"provisioning_audit printed no JSON (exit {completed.returncode}):\n"
                f"{completed.stdout}\n{completed.stderr}"
            ) from None
        return completed.returncode, report

    def audit_bound_seconds(self) -> float:
        """SPEC §12.4: the audit finishes within its calls ÷ its share of the rate + 60 s. Its
        calls are at most one family listing and one parent listing per org, and one listing
        per workspace upstream; its share is half of the pace of the limiter (the rate less the
        margin)."""
        workspaces = len(self.sim_state()["workspaces"])
        orgs = int(self.query("SELECT count(*) AS n FROM serenity_organization")[0]["n"])
        rate = float(self.env.get("SEMRUSH_RATE_LIMIT_PER_SECOND") or 10.0)
        margin = 0.02  # SEMRUSH_RATE_LIMIT_MARGIN (config/sections/provisioning.py)
        share = rate * (1.0 - margin) * AUDIT_RATE_SHARE
        return (workspaces + 2 * orgs) / share + 60.0

    def duplicate_slices(self) -> dict[tuple[str, int, str], int]:
        """Upstream slices (workspace, location, language) holding more than one project."""
        counts = Counter(
            (p["workspaceId"], int(p["locationId"]), str(p["language"]))
            for p in self.sim_state()["projects"]
        )
        return {key: n for key, n in counts.items() if n > 1}

    def violations(self, audit: tuple[int, dict[str, Any]] | None = None) -> list[str]:
        """Everything that breaks SPEC §3/§6.4/§7 once the stack is quiet: unfinished jobs,
        attempts pending or failed without a reason, audit findings, several projects on one
        slice, markets whose project does not exist upstream, reservations left 'creating'.
        Empty when all is well. `audit`: a `provisioning_audit` already run on the quiet
        stack (its result), instead of running it again."""
        problems: list[str] = []
        for job in self.query("SELECT id, step, status FROM jobs_asyncjob"):
            if job["status"] not in TERMINAL_JOB_STATUSES:
                problems.append(f"job {job['id']} ({job['step']}) is {job['status']}")
        for attempt in self.attempts():
            if attempt["status"] == "ready":
                continue
            if attempt["status"] != "failed" or not attempt["reason"]:
                problems.append(
                    f"attempt {attempt['id']} is {attempt['status']} (reason {attempt['reason']!r})"
                )
        code, report = audit if audit is not None else self.audit()
        findings = {
            key: report.get(key)
            for key in ("orphanWorkspaces", "orphanProjects", "stuckAttempts", "errors")
        }
        if code != 0 or any(findings.values()):
            problems.append(f"provisioning_audit exit {code}: {findings}")
        for key, n in self.duplicate_slices().items():
            problems.append(f"{n} projects on one slice upstream {key}")
        upstream = {p["id"] for p in self.sim_state()["projects"]}
        for market in self.markets():
            project = market["semrush_project_id"]
            if market["deleted_at"] is None and project and project not in upstream:
                problems.append(
                    f"{market['status']} market {market['id']} points at a missing project "
                    f"{project}"
                )
            if market["deleted_at"] is None and market["status"] == "creating":
                owner = market["reserved_by"]
                owners = self.query(
                    "SELECT 'attempt' AS kind, status, reason AS detail, started_by AS what"
                    " FROM provisioning_provisioningattempt WHERE id = %s"
                    " UNION ALL SELECT 'job', status, error::text, step FROM jobs_asyncjob"
                    " WHERE id = %s",
                    (owner, owner),
                )
                problems.append(
                    f"market {market['id']} of brand {market['brand_id']} is still 'creating' "
                    f"(geo {market['geo_target_id']}, project {market['semrush_project_id']}, "
                    f"owner {owner}: {owners or 'unknown'})"
                )
        return problems

    def dump_logs(self, lines: int = 40, width: int = 400) -> str:
        """The tail of every process log (each line cut at `width`), for a failure report;
        warnings and errors first."""
        parts = [f"stack {self.id}: logs in {self.log_dir}"]
        for path in sorted(self.log_dir.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()
            alarms = [
                line
                for line in text
                if '"level": "ERROR"' in line
                or '"level": "CRITICAL"' in line
                or "Traceback" in line
            ]
            parts.append(f"----- {path.name}: {len(text)} lines, {len(alarms)} errors")
            parts.extend(line[:width] for line in alarms[-lines:])
            parts.append(f"----- {path.name}: last {lines} lines")
            parts.extend(line[:width] for line in text[-lines:])
        return "\n".join(parts)

    @contextlib.contextmanager
    def redis_down(self) -> Iterator[None]:
        """Redis stopped inside the block, started again (empty) after it."""
        self.stop_redis()
        try:
            yield
        finally:
            self.start_redis()


def _admin_url(database_url: str) -> str:
    """The server of `database_url`, database `postgres` (to create and drop databases)."""
    return _with_database(database_url, "postgres")


def _with_database(database_url: str, name: str) -> str:
    parts = urlsplit(database_url)
    scheme = "postgresql" if parts.scheme in {"postgres", "postgresql", "pgsql"} else parts.scheme
    return urlunsplit((scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
