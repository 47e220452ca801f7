"""Celery: the broker, the queues, the transport's options, beat's schedule."""

from __future__ import annotations

from typing import Any

from kombu import Queue

from config.env import env_str
from config.sections.api import IDEMPOTENCY_PURGE_INTERVAL_SECONDS
from config.sections.core import VAR_DIR
from config.sections.jobs import (
    JOBS_DISPATCH_INTERVAL_SECONDS,
    JOBS_LEASE_SECONDS,
    JOBS_PUBLISH_TIMEOUT_SECONDS,
)
from config.sections.provisioning import (
    SERENITY_CREDENTIAL_RECHECK_SECONDS,
    SERENITY_DRIFT_SWEEP_TICK_SECONDS,
    SERENITY_PROVISION_BACKOFF_SECONDS,
    SERENITY_STALE_SWEEP_INTERVAL_SECONDS,
)

# --- Celery -----------------------------------------------------------------------------------
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
# The steps' queue (each test run and each test stack has its own: config.settings_test).
CELERY_TASK_DEFAULT_QUEUE = "serenity"


def periodic_queue(default_queue: str) -> str:
    """Beat's periodic tasks (dispatcher, sweeps, purges) have their own queue, so that they
    never wait behind a backlog of steps, and each expires after its interval: with no worker
    consuming, they do not pile up into a burst of identical runs when one comes back."""
    return f"{default_queue}.periodic"


def task_queues(*names: str) -> tuple[Queue, ...]:
    """Each queue bound by its own name: a queue declared without a routing key would be bound
    by the default one and receive a copy of every step too. A worker started without -Q
    consumes every queue listed."""
    return tuple(Queue(name, routing_key=name) for name in names)


def webhook_queue(default_queue: str) -> str:
    """Webhook deliveries have their own queue (config.celery routes them), so a flood of slow
    receivers never queues provisioning steps behind it: production runs a worker for it alone."""
    return f"{default_queue}.webhooks"


CELERY_PERIODIC_QUEUE = periodic_queue(CELERY_TASK_DEFAULT_QUEUE)
CELERY_WEBHOOK_QUEUE = webhook_queue(CELERY_TASK_DEFAULT_QUEUE)
CELERY_TASK_QUEUES = task_queues(
    CELERY_TASK_DEFAULT_QUEUE, CELERY_PERIODIC_QUEUE, CELERY_WEBHOOK_QUEUE
)
# The longest delay we schedule is the last settle backoff; the visibility timeout must exceed
# it (and any lease), or Redis would redeliver a countdown message while it is still waiting.
_LONGEST_DELAY = max((*SERENITY_PROVISION_BACKOFF_SECONDS, JOBS_LEASE_SECONDS))
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": max(3600.0, 4 * _LONGEST_DELAY),
}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The embedded default: a worker's warm shutdown begins within 0.25 s of the signal instead
    # of up to 2 s (config/filesystem_broker.py), and the folder is polled every 0.2 s instead of
    # every second, so Ctrl-C on ./scripts/run stops everything well under 5 s.
    CELERY_BROKER_TRANSPORT = "config.filesystem_broker:Transport"
    _BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        data_folder_in=str(_BROKER_DIR),
        data_folder_out=str(_BROKER_DIR),
        control_folder=str(_BROKER_DIR / "control"),
        store_processed=False,
        polling_interval=0.2,
    )
else:
    if CELERY_BROKER_URL.startswith("redis://"):
        # Survives a broker lost while the worker holds messages (see config/broker.py).
        CELERY_BROKER_TRANSPORT = "config.broker:Transport"
    # Publishing in the request path is bounded: fail fast, the dispatcher re-publishes.
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        socket_connect_timeout=JOBS_PUBLISH_TIMEOUT_SECONDS,
        socket_timeout=max(JOBS_PUBLISH_TIMEOUT_SECONDS, 5.0),
        max_retries=0,
    )
# A job re-scheduled further out than this (a webhook retry hours later) gets no countdown
# message: the broker would redeliver it after its visibility timeout; the dispatcher publishes
# it when due.
JOBS_COUNTDOWN_MAX_SECONDS = float(CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]) / 2  # type: ignore[arg-type]
CELERY_BROKER_CONNECTION_TIMEOUT = JOBS_PUBLISH_TIMEOUT_SECONDS
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_PUBLISH_RETRY = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Each pool slot reserves this many messages (Celery's default, 4; a worker's
# `--prefetch-multiplier` overrides it). SPEC §6.4 asks for 1, against hoarding long tasks, but a
# step here is short (its waits are rows with a later `run_after`, not tasks), and 1 starved new
# work under load: Celery holds a countdown message (a settle read) outside the prefetch window
# and, once it is due, runs it inside that window without fetching it, so the settle reads falling
# due kept every reserved place, the worker fetched no new message, and a burst's late first steps
# waited for that wave to pass (31 of 300 creates waited 5.5 s; with 4: 300 creates in 2.6 to
# 3.2 x S instead of 3.4 to 3.6, docs/benchmarks.md, issue 44). A redelivered or duplicate
# message stays harmless (the claim).
CELERY_WORKER_PREFETCH_MULTIPLIER = 4
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_SEND_TASK_EVENTS = False
# Task events (received, started, succeeded: three Redis publishes per task) are off, Celery's
# own default: they cost a worker ~0.6 ms of CPU per task (a sixth of Celery's cost per task
# here), and the job rows already record every step's claim, finish and error. Turn them on
# for Celery monitoring tools with the worker's `-E`. The extra
# `task-sent` event per publish would cost the request path a Redis round trip.
CELERY_TASK_SEND_SENT_EVENT = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# No task time limits: the documented pool (-P threads) does not enforce them, so they would
# only pretend to. A step is bounded by its own means instead: every upstream call has a
# timeout, and a step whose lease expires is re-published by the dispatcher (JOBS_LEASE_SECONDS).
# Without this, Celery's Django fix-up closes every database connection before and after each
# task, so every step paid a new PostgreSQL connection (a backend start: ~25 ms on the
# benchmark machine, three per chain). With it a worker thread keeps its connection, and
# config/celery.py applies Django's own rules (DB_CONN_MAX_AGE, health checks after an error)
# around each task, as for a web request.
CELERY_DB_REUSE_MAX = 1000


def beat_schedule(
    queue: str,
    *,
    dispatch: float,
    stale_sweep: float,
    idempotency_purge: float,
    credential_recheck: float = SERENITY_CREDENTIAL_RECHECK_SECONDS,
) -> dict[str, dict[str, Any]]:
    """Beat's entries, each on the periodic queue and expiring after its interval (see
    periodic_queue); the intervals are the settings that say so."""
    every = {
        "jobs-dispatch": ("jobs.dispatch_due_jobs", dispatch),
        "provisioning-stale-sweep": ("provisioning.sweep_stale_attempts", stale_sweep),
        "jobs-purge": ("jobs.purge_finished_jobs", 3600.0),
        "provisioning-ledger-purge": ("provisioning.purge_upstream_calls", 3600.0),
        # SPEC §13.2: held credentials read again (SERENITY_CREDENTIAL_RECHECK_SECONDS).
        "provisioning-credential-recheck": ("provisioning.recheck_credentials", credential_recheck),
        "reconcile-drift-sweep": ("reconcile.sweep", SERENITY_DRIFT_SWEEP_TICK_SECONDS),
        "serenity-idempotency-purge": ("serenity.purge_idempotency_keys", idempotency_purge),
    }
    return {
        name: {"task": task, "schedule": seconds, "options": {"queue": queue, "expires": seconds}}
        for name, (task, seconds) in every.items()
    }


CELERY_BEAT_SCHEDULE = beat_schedule(
    CELERY_PERIODIC_QUEUE,
    dispatch=JOBS_DISPATCH_INTERVAL_SECONDS,
    stale_sweep=SERENITY_STALE_SWEEP_INTERVAL_SECONDS,
    idempotency_purge=IDEMPOTENCY_PURGE_INTERVAL_SECONDS,
)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
