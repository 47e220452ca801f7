"""Fixtures of the webhook tests: a real receiver on the loopback, private addresses allowed
(the receiver is on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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
