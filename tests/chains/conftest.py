"""Fixtures of the chain tests."""

from __future__ import annotations

from collections.abc import Iterator
from unittest import mock

import pytest


@pytest.fixture
def published() -> Iterator[list[str]]:
    """Record publishes instead of sending them (the job ids, in order): the test runs each
    step itself."""
    sent: list[str] = []
    with mock.patch(
        "jobs.services.publish_job", side_effect=lambda **kw: sent.append(str(kw["job_id"])) or True
    ):
        yield sent
