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

    LIVE = "live"  # published and confirmed: `live` (or with unpublished updates), released
    # published, not confirmed yet: `publishing`, handed to a background confirmation job
    PUBLISHING = "publishing"
    PUBLISH_FAILED = "publishFailed"  # its project exists but is not live: kept for a resume
    RELEASED = "released"  # nothing is kept: the reservation is deleted


@dataclass(frozen=True)
class MarketWrite:
    """The final write of one market row, decided by `markets.market_provision` and committed
    by `market_writes.market_writes_commit` with the end of the work (a chained step's ending, SPEC
    §11.5; a sync request's own transaction). It applies only while `owner` still holds the
    reservation; `workspace_id`/`owned_workspace` say where `project_id` lives upstream."""

    market_id: uuid.UUID
    owner: uuid.UUID
    end: MarketEnd
    project_id: str | None
    workspace_id: str
    owned_workspace: bool
    # LIVE: the status Semrush confirmed and how long the publish took (`publishing`'s sample).
    live_status: str = "live"
    publish_seconds: float | None = None
    # PUBLISH_FAILED after a publish: `{code, message, reason}` (`publishError`).
    publish_error: dict[str, Any] | None = None

    @property
    def goes_public(self) -> bool:
        """The row ends with a published project: refused when the work lost the brand."""
        return self.end in (MarketEnd.LIVE, MarketEnd.PUBLISHING)


@dataclass(frozen=True)
class Outcome:
    """The answer, and the market rows' final writes that go with it (not rendered)."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] | None = None
    market_writes: tuple[MarketWrite, ...] = ()
    # A chained step reads its publish again in this many seconds (no answer yet).
    confirm_in: float | None = None
    # A single market's chain ends FAILED with this error (its publish failed), not COMPLETED.
    job_failure: DomainError | None = None

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
