"""What a flow answers: `Outcome`, the `{status, body}` the HTTP layer renders and a chained job
stores as its result, with the final writes of the market rows it provisioned (`MarketWrite`),
which the end of the work commits; or `Accepted`, the job an async request started."""

from __future__ import annotations

import enum
import math
import uuid
from dataclasses import dataclass
from typing import Any

from jobs.models import AsyncJob
from kernel.errors import DomainError


class MarketEnd(enum.Enum):
    """How a market's provisioning ended, as its row must say."""

    LIVE = "live"  # published: `live`, no longer reserved
    PUBLISH_FAILED = "publishFailed"  # its project exists but is not live: kept for a resume
    RELEASED = "released"  # nothing is kept: the reservation is deleted


@dataclass(frozen=True)
class MarketWrite:
    """The final write of one market row, decided by `markets.market_provision` and committed
    by `markets.market_writes_commit` with the end of the work (a chained step's ending, SPEC
    §11.5; a sync request's own transaction). It applies only while `owner` still holds the
    reservation; `workspace_id`/`owned_workspace` say where `project_id` lives upstream."""

    market_id: uuid.UUID
    owner: uuid.UUID
    end: MarketEnd
    project_id: str | None
    workspace_id: str
    owned_workspace: bool


@dataclass(frozen=True)
class Outcome:
    """The answer, and the market rows' final writes that go with it (not rendered)."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] | None = None
    market_writes: tuple[MarketWrite, ...] = ()

    @classmethod
    def from_error(cls, error: DomainError) -> Outcome:
        """The error's answer; one that says when to come back (`retry_after`, seconds) carries
        it as `Retry-After` (whole seconds, at least 1)."""
        retry_after = getattr(error, "retry_after", None)
        headers = (
            {"Retry-After": str(max(1, math.ceil(retry_after)))}
            if isinstance(retry_after, int | float) and retry_after > 0
            else None
        )
        return cls(status=error.http_status, body=error.as_body(), headers=headers)

    @property
    def label(self) -> str:
        """`succeeded` (2xx but 207), `partial` (207), `failed` (4xx/5xx)."""
        if self.status == 207:
            return "partial"
        return "succeeded" if 200 <= self.status < 300 else "failed"

    def as_job_result(self) -> dict[str, Any]:
        return {"status": self.status, "body": self.body, "outcome": self.label}


@dataclass(frozen=True)
class Accepted:
    """An async request's answer: the job the client polls (202)."""

    job: AsyncJob
