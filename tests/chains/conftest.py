"""Fixtures of the chain tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest


@pytest.fixture
def published() -> Iterator[list[str]]:
    """Record publishes instead of sending them (the job ids, in order): the test runs each
    step itself."""
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
