"""Settings for the test suite and every process it starts (pytest's DJANGO_SETTINGS_MODULE).

The production settings, with the internal knobs the tests change. An operator never selects
this module; the environment still gives the operator variables (the test database, broker,
secrets: pyproject.toml's `env`).

A process the tests start (a Celery worker, gunicorn, beat, a probe script) runs with
DJANGO_SETTINGS_MODULE=config.settings_test and, to shrink its timings, SERENITY_TEST_SETTINGS:
a JSON object of setting name → value, applied here over the settings below (a JSON list becomes
a tuple). One variable rather than a settings module per harness: a harness composes its
overrides per test (tests/harness.py, tests/conftest.py) without writing files, and only this
module reads it, so no production process can be steered by it. The settings derived from the
knobs (the queues, beat's schedule, the database's connection age) are derived again after it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from config.settings import *  # noqa: F403
from config.settings import DATABASES, beat_schedule, periodic_queue, task_queues, webhook_queue

# Many tests refuse tokens from 127.0.0.1 or write in bursts: the throttle tests set their own
# tiny rates.
SERENITY_THROTTLE_WRITES = "100000/s"
SERENITY_THROTTLE_AUTH_FAILURES = "100000/min"
# The pytest process closes its connections at once (each test may use another database).
DB_CONN_MAX_AGE = 0
# The tests' webhook receivers listen on random loopback ports.
WEBHOOK_STANDARD_PORTS_ONLY = False
# The simulator answers in milliseconds, so without a burst every sync request's calls would
# wait ~0.1 s each for the pace (real Semrush calls take longer than that). The limiter grants at
# most the rate within a second whatever the burst. The stacks the chaos suite and the
# benchmarks start run production's (tests/harness.py).
SEMRUSH_RATE_LIMIT_BURST = 20


def _overrides() -> dict[str, Any]:
    raw = os.environ.get("SERENITY_TEST_SETTINGS", "").strip()
    overrides = json.loads(raw) if raw else {}
    if not isinstance(overrides, dict) or not all(name.isupper() for name in overrides):
        raise ValueError(f"SERENITY_TEST_SETTINGS must map setting names to values: {raw!r}")
    return {name: tuple(v) if isinstance(v, list) else v for name, v in overrides.items()}


globals().update(_overrides())

# --- Derived again from the knobs above --------------------------------------------------------
CELERY_PERIODIC_QUEUE = periodic_queue(CELERY_TASK_DEFAULT_QUEUE)  # noqa: F405
CELERY_WEBHOOK_QUEUE = webhook_queue(CELERY_TASK_DEFAULT_QUEUE)  # noqa: F405
CELERY_TASK_QUEUES = task_queues(
    CELERY_TASK_DEFAULT_QUEUE,  # noqa: F405
    CELERY_PERIODIC_QUEUE,
    CELERY_WEBHOOK_QUEUE,
)
CELERY_BEAT_SCHEDULE = beat_schedule(
    CELERY_PERIODIC_QUEUE,
    dispatch=JOBS_DISPATCH_INTERVAL_SECONDS,  # noqa: F405
    stale_sweep=SERENITY_STALE_SWEEP_INTERVAL_SECONDS,  # noqa: F405
    idempotency_purge=IDEMPOTENCY_PURGE_INTERVAL_SECONDS,  # noqa: F405
    credential_recheck=SERENITY_CREDENTIAL_RECHECK_SECONDS,  # noqa: F405
)
if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = DB_CONN_MAX_AGE
