"""Celery as it is operated (SPEC §11.4): beat's periodic tasks have their own queue and expire
after their interval, so none pile up while no worker consumes; the documented commands consume
that queue too; no task time limit is configured that the documented `-P threads` pool would
ignore; ATOMIC_REQUESTS sits where Django reads it, and the blocks that must be outermost are
durable."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
import redis
from celery.beat import Scheduler
from django.conf import settings
from django.db import transaction

from config.celery import app
from jobs.endings import Finish, step_commit
from provisioning import guard
from provisioning.models import AttemptStartedBy
from tests.conftest import TEST_BROKER_URL
from tests.factories import BrandFactory
from tests.run_resources import delete_run_keys

ROOT = Path(__file__).resolve().parent.parent


def test_every_periodic_task_goes_to_its_own_queue_and_expires_after_its_interval():
    # when
    schedule = app.conf.beat_schedule
    # then
    assert set(schedule) == {
        "jobs-dispatch",
        "provisioning-stale-sweep",
        "jobs-purge",
        "serenity-idempotency-purge",
        "provisioning-ledger-purge",
        "provisioning-credential-recheck",
        "reconcile-drift-sweep",
    }
    for entry in schedule.values():
        assert entry["options"] == {
            "queue": settings.CELERY_PERIODIC_QUEUE,
            "expires": entry["schedule"],
        }
    assert settings.CELERY_PERIODIC_QUEUE != settings.CELERY_TASK_DEFAULT_QUEUE


def test_beat_publishes_a_message_that_expires():
    # given beat's scheduler, publishing its dispatch entry to a queue of this test's own
    queue = f"periodic-test-{uuid.uuid4().hex}"
    scheduler = Scheduler(app=app, lazy=True)
    scheduler.update_from_dict(app.conf.beat_schedule)
    entry = scheduler.schedule["jobs-dispatch"]
    entry.options = {**entry.options, "queue": queue}
    client = redis.Redis.from_url(TEST_BROKER_URL)
    try:
        # when
        with app.connection_for_write(TEST_BROKER_URL) as connection:
            scheduler.apply_async(entry, producer=app.amqp.Producer(connection))
        # then the message carries an expiry one interval from now
        raw = client.lpop(queue)
        assert raw is not None
        headers = json.loads(raw)["headers"]
        assert headers["task"] == "jobs.dispatch_due_jobs"
        assert headers["expires"] is not None
    finally:
        delete_run_keys(client, queue)  # the queue and kombu's bindings of it
        client.close()


def test_a_worker_started_without_a_queue_option_consumes_every_queue():
    # when
    queues = {queue.name for queue in app.conf.task_queues}
    routing_keys = {queue.name: queue.routing_key for queue in app.conf.task_queues}
    # then (the settings' names; the suite publishes to a queue of its own)
    steps = "serenity"
    assert queues == {steps, f"{steps}.periodic", f"{steps}.webhooks"}
    # each bound by its own name: a step is never copied into beat's queue
    assert routing_keys == {name: name for name in queues}
    assert f"{steps}.periodic" == settings.CELERY_PERIODIC_QUEUE


def test_the_documented_worker_commands_consume_the_periodic_queue():
    # The Procfile's, the README's and scripts/run's workers take no -Q (so they consume
    # every queue of the settings); the harness names both.
    procfile = (ROOT / "deploy" / "Procfile").read_text()
    readme = (ROOT / "README.md").read_text()
    devserver = (ROOT / "scripts" / "devserver.py").read_text()
    harness = (ROOT / "tests" / "harness.py").read_text()
    worker_lines = [
        line for line in (procfile + readme).splitlines() if "celery -A config worker" in line
    ]
    assert worker_lines
    # the provisioning worker consumes every queue but the deliveries' (its own worker's)
    for line in worker_lines:
        if "webhooks@%h" in line:
            assert " -Q serenity.webhooks " in line, line
        else:
            assert not re.search(r"\s-Q\s", line), line
    assert '"-Q"' not in devserver
    assert 'f"{self.queue},{self.queue}.periodic"' in harness


def test_no_task_time_limit_is_configured():
    # The thread pool the README documents does not enforce them.
    assert app.conf.task_time_limit is None
    assert app.conf.task_soft_time_limit is None
    assert not hasattr(settings, "CELERY_TASK_TIME_LIMIT")
    assert not hasattr(settings, "CELERY_TASK_SOFT_TIME_LIMIT")


def test_atomic_requests_is_set_where_django_reads_it():
    assert settings.DATABASES["default"]["ATOMIC_REQUESTS"] is False
    assert not hasattr(settings, "ATOMIC_REQUESTS")


@pytest.mark.django_db(transaction=True)
def test_a_sync_attempt_cannot_begin_inside_a_callers_transaction():
    # given
    brand = BrandFactory()
    # when / then: its attempt must be committed before the upstream calls that follow
    with (
        pytest.raises(RuntimeError, match="durable"),
        transaction.atomic(),
        guard.attempt_held(brand_id=brand.pk, started_by=AttemptStartedBy.DEACTIVATE),
    ):
        pass


@pytest.mark.django_db(transaction=True)
def test_a_step_ending_cannot_be_folded_into_a_callers_transaction():
    # when / then (it refuses before touching the run)
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        step_commit(None, Finish("COMPLETED"))  # type: ignore[arg-type]
