"""What a flow answers: `Outcome`, the `{status, body}` the HTTP layer renders and a chained job
stores as its result; or `Accepted`, the job an async request started."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from jobs.models import AsyncJob
from kernel.errors import DomainError


@dataclass(frozen=True)
class Outcome:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] | None = None

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
