"""Shared fixtures. The suite runs against real PostgreSQL and Redis (see pyproject's env)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from serenity.models import Organization, Role
from tests.conformance import ServedDocument
from tests.factories import MembershipFactory, OrganizationFactory, UserFactory, make_token
from tests.run_resources import (
    database_url,
    delete_run_keys,
    remove_folder,
    remove_if_empty,
    run_broker_url,
    run_database_name,
)

ROOT = Path(__file__).resolve().parent.parent

# What the run is given (DATABASE_URL, CELERY_BROKER_URL) and what it owns, one per run so that
# concurrent runs on one machine never collide, gone at its end: tests/run_resources.py.
RUN_ID = os.getpid()
settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = run_database_name(
    str(settings.DATABASES["default"]["NAME"]), RUN_ID
)
# The run's SERENITY_VAR_DIR, for this process (set before any metric writes its file) and every
# process it starts (they inherit the environment).
RUN_VAR_DIR = Path(tempfile.mkdtemp(prefix=f"serenity-test-{RUN_ID}-"))
GIVEN_VAR_DIR = Path(settings.VAR_DIR)
(RUN_VAR_DIR / "prometheus").mkdir()
(RUN_VAR_DIR / "static").mkdir()
os.environ["SERENITY_VAR_DIR"] = str(RUN_VAR_DIR)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(RUN_VAR_DIR / "prometheus")
settings.VAR_DIR = RUN_VAR_DIR
settings.STATIC_ROOT = RUN_VAR_DIR / "static"
settings.PROMETHEUS_MULTIPROC_DIR = RUN_VAR_DIR / "prometheus"
settings.CELERY_BEAT_SCHEDULE_FILENAME = str(RUN_VAR_DIR / "celerybeat-schedule")


def _flush_through_a_late_write() -> None:
    """A transactional test ends with a TRUNCATE of every table, while the session's real worker
    may still be in one short transaction of its own (a webhook retry that came due, a ledger
    row): PostgreSQL then breaks the deadlock by failing one side, sometimes the TRUNCATE. The
    teardown flushes again (the worker's transaction has ended by then) rather than failing a
    test that passed; any other error, or a third deadlock, still fails it."""
    from django.db import OperationalError
    from django.test import TransactionTestCase

    flush = TransactionTestCase._fixture_teardown

    def teardown(self: TransactionTestCase) -> None:
        for attempt in range(3):
            try:
                flush(self)
                return
            except Exception as error:  # flush wraps the database's error in a CommandError
                cause = error.__cause__ or error
                if attempt == 2 or not (
                    isinstance(cause, OperationalError) and "deadlock detected" in str(cause)
                ):
                    raise
                time.sleep(0.2)

    TransactionTestCase._fixture_teardown = teardown  # type: ignore[method-assign]


_flush_through_a_late_write()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # The run's folder goes, and the folder pyproject gives the settings as they load when
    # nothing but empty folders is left in it (a concurrent run may still use it).
    remove_folder(RUN_VAR_DIR)
    remove_if_empty(GIVEN_VAR_DIR)


def pytest_addoption(parser: pytest.Parser) -> None:
    # ./scripts/test passes it unless told --no-browser-install (tests/test_operators_stack.py).
    parser.addoption(
        "--install-browser",
        action="store_true",
        help="install chromium and chromium-driver (scripts/install-browser) when a browser "
        "test runs and they are missing",
    )


@pytest.fixture(scope="session")
def served_document(django_db_setup: Any, django_db_blocker: Any) -> ServedDocument:
    """The OpenAPI document at /api/schema/, as a client reads it (from the test database's
    process, should serving it ever read one)."""
    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return ServedDocument(response.json())


@pytest.fixture(autouse=True)
def answers_conform_to_the_document(
    monkeypatch: pytest.MonkeyPatch, served_document: ServedDocument
) -> None:
    """Under every test: each answer a test client gets is one the served OpenAPI document
    describes (its status documented on its operation, its body valid under a strict OpenAPI
    3.0 validator, nulls included, its required headers sent: SPEC §11.5)."""
    original = APIClient.request

    def checked(self: APIClient, **kwargs: Any) -> Any:
        response = original(self, **kwargs)
        served_document.check(response)
        return response

    monkeypatch.setattr(APIClient, "request", checked)


@dataclass
class Caller:
    """An authenticated API client bound to one org."""

    client: APIClient
    org: Organization
    token: str
    user: Any

    def get(self, path: str, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.get(path, **kw)

    def post(self, path: str, data: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.post(path, data, format="json", **kw)

    def patch(self, path: str, data: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.patch(path, data, format="json", **kw)

    def delete(self, path: str, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.delete(path, **kw)


def make_caller(org: Organization, role: str = Role.WRITER) -> Caller:
    membership = MembershipFactory(organization=org, role=role)
    token = make_token(membership.user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return Caller(client=client, org=org, token=token, user=membership.user)


@pytest.fixture
def org(db) -> Organization:  # type: ignore[no-untyped-def]
    return OrganizationFactory()


@pytest.fixture
def writer(org: Organization) -> Caller:
    return make_caller(org, Role.WRITER)


@pytest.fixture
def reader(org: Organization) -> Caller:
    return make_caller(org, Role.READER)


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture
def staff_user(db):  # type: ignore[no-untyped-def]
    return UserFactory(is_staff=True)


# --- The Semrush simulator over real HTTP ----------------------------------------------------

SIM_TOKEN = "dev-token"


@pytest.fixture(scope="session")
def simulator():  # type: ignore[no-untyped-def]
    from provisioning.simulator import SemrushSimulator

    # Every exchange's bodies are kept, for `sim`'s contract check after each test.
    sim = SemrushSimulator(
        port=0, token=SIM_TOKEN, parents=[], config={"recordExchanges": True}
    ).start()
    yield sim
    sim.stop()


def off_contract_exchanges(exchanges: list[dict[str, Any]]) -> list[str]:
    """`METHOD path: problem` for each request or answer among the simulator's `exchanges`
    that breaks the contract description (SPEC §12.1). A scripted fault's answer is the
    test's choice, not checked; a route outside the contract (a test's own workspace delete)
    is not judged."""
    from provisioning.semrush.contract import answer_problems, operation_for, request_problems

    problems = []
    for e in exchanges:
        method, path = e["method"], e["path"]
        if operation_for(method, path) is None:
            continue
        query = dict(parse_qsl(e["query"], keep_blank_values=True))
        found = request_problems(method, path, query, e["request"])
        if not e["scripted"]:
            found += answer_problems(method, path, e["status"], e["answer"])
        problems.extend(f"{method} {path}: {problem}" for problem in found)
    return problems


@pytest.fixture
def sim(simulator, settings):  # type: ignore[no-untyped-def]
    """A freshly reset simulator with one parent workspace (`sim.parent_id`), fast settling,
    and the service pointed at it."""
    import uuid as _uuid

    from django.core.cache import cache

    parent_id = f"parent-{_uuid.uuid4()}"
    simulator.reset(parents=[parent_id], token=SIM_TOKEN)
    # The test's Serenity org has a credential of its own, so it has its own upstream quota
    # bucket (SPEC §10.6) at the default rate: no test waits for another's permits.
    simulator.org_token = f"org-token-{_uuid.uuid4()}"
    simulator.add_token(simulator.org_token)
    simulator.configure({"settleSeconds": 0.2})
    simulator.parent_id = parent_id
    settings.SEMRUSH_BASE_URL = simulator.base_url
    settings.SEMRUSH_API_TOKEN = SIM_TOKEN
    settings.SEMRUSH_TIMEOUT_SECONDS = 2.0
    settings.SERENITY_SETTLE_POLL_INTERVAL_MS = 50
    settings.SERENITY_SETTLE_POLL_ATTEMPTS = 30
    cache.clear()
    yield simulator
    # Every exchange of the test, the client's requests and the simulator's answers, keeps
    # the contract description (its workers' exchanges included: `worker` ends before this).
    assert off_contract_exchanges(simulator.exchanges()) == []


@pytest.fixture
def serenity_org(db, sim) -> Organization:  # type: ignore[no-untyped-def]
    org = OrganizationFactory(
        serenity_enabled=True,
        semrush_parent_workspace_id=sim.parent_id,
        workspace_mode="subworkspace",
    )
    org.set_semrush_credential(sim.org_token)
    org.save(update_fields=["semrush_credential_encrypted"])
    return org


@pytest.fixture
def sw_writer(serenity_org: Organization) -> Caller:
    """A writer of a Serenity org in sub-workspace mode, against the simulator."""
    return make_caller(serenity_org, Role.WRITER)


def upstream_calls(sim) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """(method, path) of every upstream request since the last reset, oldest first."""
    return [(r["method"], r["path"]) for r in sim.requests_log()]


# --- Broker isolation and a real Celery worker process -----------------------------------------

TEST_QUEUE = f"serenity-test-{RUN_ID}"
# The given Redis server, a database of the run's own (tests/run_resources.py).
TEST_BROKER_URL = run_broker_url(
    os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"), RUN_ID
)
WORKER_BACKOFF = (0.3, 0.3, 0.3, 0.3, 0.3)


@pytest.fixture(scope="session", autouse=True)
def isolated_broker():  # type: ignore[no-untyped-def]
    """Every run gets its own Redis database number and queue name. Redis must be reachable:
    the suite fails (never skips) without it."""
    import redis
    from django.conf import settings as dj_settings

    from config.celery import app as celery_app

    try:
        redis.Redis.from_url(TEST_BROKER_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        raise RuntimeError(f"Redis is not reachable at {TEST_BROKER_URL}: {exc}") from exc
    # Celery reads the CELERY_BROKER_URL environment variable before its configuration.
    os.environ["CELERY_BROKER_URL"] = TEST_BROKER_URL
    dj_settings.CELERY_BROKER_URL = TEST_BROKER_URL
    dj_settings.CELERY_TASK_DEFAULT_QUEUE = TEST_QUEUE
    dj_settings.CELERY_WEBHOOK_QUEUE = f"{TEST_QUEUE}.webhooks"
    celery_app.conf.broker_url = TEST_BROKER_URL
    celery_app.conf.task_default_queue = TEST_QUEUE
    # The throttles' cache of this process too (the settings made it from the given URL).
    dj_settings.CACHES["throttle"]["LOCATION"] = TEST_BROKER_URL
    yield
    client = redis.Redis.from_url(TEST_BROKER_URL)
    delete_run_keys(client, TEST_QUEUE)
    client.close()


def worker_env(*, simulator, db_name: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """A worker's environment: the test run's operator variables pointed at the test database,
    queue and simulator, and its shrunk knobs as settings of config.settings_test."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings_test",
        DATABASE_URL=database_url(settings.DATABASES["default"], db_name),
        CELERY_BROKER_URL=TEST_BROKER_URL,
        SEMRUSH_BASE_URL=simulator.base_url,
        SEMRUSH_API_TOKEN=SIM_TOKEN,
        LOG_LEVEL="INFO",
        DEBUG="false",
        SERENITY_TEST_SETTINGS=json.dumps(
            {
                "CELERY_TASK_DEFAULT_QUEUE": TEST_QUEUE,
                "SEMRUSH_TIMEOUT_SECONDS": 2,
                "SERENITY_PROVISION_BACKOFF_SECONDS": WORKER_BACKOFF,
                "SERENITY_SETTLE_POLL_INTERVAL_MS": 50,
                "JOBS_LEASE_SECONDS": 10,
                # The webhook tests' receivers listen on the loopback.
                "SERENITY_WEBHOOK_ALLOW_PRIVATE": True,
            }
        ),
    )
    return env


class WorkerProcess:
    """A real `celery worker` subprocess on the test database, queue and simulator."""

    def __init__(
        self,
        env: dict[str, str],
        log_path: Path,
        concurrency: int = 2,
        pool: str | None = None,
        queues: str = f"{TEST_QUEUE},{TEST_QUEUE}.webhooks",
    ) -> None:
        self.env = env
        self.queues = queues
        self.log_path = log_path
        self.concurrency = concurrency
        # None: Celery's default (prefork); "threads" is the README's recommended pool.
        self.pool = pool
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-Q",
                self.queues,
                "-c",
                str(self.concurrency),
                *(["-P", self.pool] if self.pool else []),
                "-l",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"test-{RUN_ID}-{time.monotonic_ns()}@%h",
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(ROOT),
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early; see {self.log_path}")
            if b"ready." in self.log_path.read_bytes()[-20000:]:
                return self
            time.sleep(0.2)
        raise RuntimeError(f"worker did not start; see {self.log_path}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, simulator, tmp_path_factory):  # type: ignore[no-untyped-def]
    """One real worker per test session, pointed at the test database: Celery's default pool
    on the steps' queue, and beside it a thread-pool worker for the webhook deliveries' queue,
    as deploy/Procfile runs them (`worker` and `webhooks`)."""
    from django.db import connection

    db_name = connection.settings_dict["NAME"]
    env = worker_env(simulator=simulator, db_name=db_name)
    folder = tmp_path_factory.mktemp("worker")
    worker = WorkerProcess(env, folder / "worker.log", queues=TEST_QUEUE).start()
    deliveries = WorkerProcess(
        env, folder / "webhooks.log", concurrency=4, pool="threads", queues=f"{TEST_QUEUE}.webhooks"
    ).start()
    yield worker
    deliveries.stop()
    worker.stop()


@pytest.fixture
def worker(celery_worker, transactional_db, sim, settings):  # type: ignore[no-untyped-def]
    """Use in tests whose jobs a worker must run; waits for it to go idle at teardown so that
    a late step of one test never lands in the next."""
    settings.SERENITY_PROVISION_BACKOFF_SECONDS = WORKER_BACKOFF
    yield celery_worker
    wait_for_idle()


def wait_for_idle(timeout: float = 20.0) -> None:
    from django.utils import timezone

    from jobs.models import AsyncJob
    from webhooks.models import AttemptSlot

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = timezone.now()
        running = AsyncJob.objects.filter(
            claim_token__isnull=False, lease_expires_at__gt=now, status="IN_PROGRESS"
        ).exists()
        attempting = AttemptSlot.objects.filter(held_until__gt=now).exists()
        if not running and not attempting:
            return
        time.sleep(0.1)


def poll_job(caller: Caller, location: str, *, timeout: float = 30.0, until_finished: bool = True):  # type: ignore[no-untyped-def]
    """Poll the job route until the job leaves IN_PROGRESS; returns the last body."""
    deadline = time.monotonic() + timeout
    while True:
        response = caller.get(location)
        assert response.status_code == 200, response.json()
        body = response.json()
        if body["status"] != "IN_PROGRESS" or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


@pytest.fixture
def chained_job_delivered_separately(settings):  # type: ignore[no-untyped-def]
    """The step after a promotion travels as its own message, as when the promoting worker
    dies before its hand-over (or JOBS_HAND_OVER_INLINE is off): a test runs it itself, after
    acting between the two steps."""
    settings.JOBS_HAND_OVER_INLINE = False
