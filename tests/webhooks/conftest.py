"""Fixtures of the webhook tests: a real receiver on the loopback, private addresses allowed
(the receiver is on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

from tests.webhooks.receiver import Receiver, receiver_start


@pytest.fixture
def allow_private(settings: Any) -> None:
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = receiver_start()
    yield started
    started.stop()


@pytest.fixture
def published() -> Iterator[list[str]]:
    """Record publishes instead of sending them (the job ids, in order): the test runs each
    step itself (as tests/chains/conftest.py)."""
    sent: list[str] = []

    def record(**kw: Any) -> bool:
        sent.append(str(kw["job_id"]))
        return True

    # Where jobs are created and handed over, and where the dispatcher sends them again.
    with (
        mock.patch("jobs.services.publish_job", side_effect=record),
        mock.patch("jobs.dispatch.publish_job", side_effect=record),
    ):
        yield sent


@pytest.fixture
def published_jobs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Publishes recorded (job id, countdown) instead of sent: the test runs each attempt."""
    sent: list[tuple[str, float]] = []

    def record(**kw: Any) -> None:
        sent.append((str(kw["job_id"]), kw.get("countdown", 0.0)))

    monkeypatch.setattr("jobs.services.publish_on_commit", record)
    monkeypatch.setattr("jobs.outbox.publish_on_commit", record)
    return sent
