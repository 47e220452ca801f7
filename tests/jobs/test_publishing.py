"""Publishing is bounded and never raises (SPEC §2, §6.4): the job row is the source of truth."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator

import pytest

from config.celery import app as celery_app
from jobs import publishing
from jobs.models import AsyncJob
from jobs.publishing import publish_job
from tests.jobs.test_claim import make_job

UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


def _drop_connection_pools() -> None:
    """The app caches its connection and producer pools; drop them so the next publish
    connects to the broker URL configured now."""
    celery_app._pool = None
    amqp = celery_app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@pytest.fixture
def unreachable_broker() -> Iterator[None]:
    # Celery reads the CELERY_BROKER_URL environment variable before its configuration.
    saved_env = os.environ.get("CELERY_BROKER_URL")
    saved_url = celery_app.conf.broker_url
    os.environ["CELERY_BROKER_URL"] = UNREACHABLE_BROKER
    celery_app.conf.broker_url = UNREACHABLE_BROKER
    _drop_connection_pools()
    try:
        yield
    finally:
        if saved_env is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = saved_env
        celery_app.conf.broker_url = saved_url
        _drop_connection_pools()


def test_publish_to_an_unreachable_broker_returns_false_quickly(db, unreachable_broker, caplog):
    # given
    job = make_job(published_at=None)
    caplog.set_level(logging.WARNING, logger="serenity.jobs")
    # when
    started = time.monotonic()
    accepted = publish_job(job_id=job.id, task_name="serenity.step.provisionWorkspace")
    elapsed = time.monotonic() - started
    # then: refused within the publish bound, and the row still says "never published" so the
    # dispatcher picks it up
    assert accepted is False
    assert elapsed < 3.0
    job.refresh_from_db()
    assert job.published_at is None
    assert job.publish_count == 0
    assert [r.getMessage() for r in caplog.records] == [
        "job publish failed; the dispatcher will re-publish"
    ]


def test_publish_swallows_any_error_of_the_broker_client(db, monkeypatch):
    # given
    job = make_job(published_at=None)

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("unexpected kombu failure")

    monkeypatch.setattr(publishing.celery_app, "send_task", explode)
    # when / then
    assert publish_job(job_id=job.id, task_name="serenity.step.provisionWorkspace") is False
    assert AsyncJob.objects.get(pk=job.id).publish_count == 0


def test_publish_records_when_the_message_is_due(db):
    # given: the real test broker (its own Redis database and queue for this run)
    job = make_job(published_at=None)
    # when
    accepted = publish_job(
        job_id=job.id, task_name="serenity.step.provisionWorkspace", countdown=30
    )
    # then: a countdown message counts as published for its due time
    assert accepted is True
    job.refresh_from_db()
    assert job.publish_count == 1
    assert job.published_at > job.created_at


def test_a_database_error_after_a_successful_send_does_not_raise(db, monkeypatch):
    # given: the broker takes the message, then the database refuses the "published" mark
    from django.db import OperationalError

    sent: list[str] = []
    monkeypatch.setattr(publishing.celery_app, "send_task", lambda name, **kw: sent.append(name))

    class RefusingManager:
        def filter(self, **kwargs: object) -> RefusingManager:
            return self

        def update(self, **kwargs: object) -> int:
            raise OperationalError("connection lost")

    monkeypatch.setattr(publishing.AsyncJob, "objects", RefusingManager())
    # when / then: the message is out, so the publish counts as accepted
    assert publish_job(job_id=uuid.uuid4(), task_name="serenity.step.createMarket") is True
    assert sent == ["serenity.step.createMarket"]
