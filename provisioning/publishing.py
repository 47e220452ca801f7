"""Publishing confirmed (SPEC §12.1): a publish answers 202 and runs in the background upstream,
so a market is `publishing` until a read of its project says how the publish ended.

    project `publish_status`           the market
    live                               live
    live_with_unpublished_updates      live_with_unpublished_updates
    initial_publish_failed             publish_failed (`publishError.code` publishFailed)
    anything else                      still publishing; past the publish timeout:
                                       publish_failed (`publishError.code` publishTimeout)

When to read: the first read waits the learned publish time (the median of the parent's last
`SERENITY_SETTLE_HISTORY` confirmed publishes, `publish_seconds_learned`; no history: at once);
each later read waits as long again as the publish has been running (2, 4, 8 … s, at least
`SERENITY_PUBLISH_BACKOFF_SECONDS`, at most a minute). A read is spent quota: reading earlier
than Semrush publishes buys nothing.

How long a caller waits is its `Patience`: a sync request reads at most 3 times within its
budget, sleeping in between, then leaves the confirmation to a background job; a chained step
sleeps in place at most a second and otherwise re-schedules itself for the next read (a worker
slot is never held through a wait).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from provisioning import quota
from provisioning.selectors import learned_median
from provisioning.semrush import (
    SemrushClient,
    SemrushNetworkError,
    SemrushRateLimitedError,
    SemrushServerError,
)
from serenity.models import Market, MarketStatus

LIVE_STATUSES = {
    "live": MarketStatus.LIVE,
    "live_with_unpublished_updates": MarketStatus.LIVE_WITH_UNPUBLISHED_UPDATES,
}
FAILED_STATUS = "initial_publish_failed"
# The longest wait between two reads of one publish.
MAX_READ_INTERVAL_SECONDS = 60.0


@dataclass(frozen=True)
class Patience:
    """How a caller waits for a publish: at most `reads` reads now (None: no limit), sleeping in
    place at most `in_place_seconds` for one read and `budget_seconds` in all."""

    reads: int | None
    in_place_seconds: float
    budget_seconds: float

    @classmethod
    def current(cls) -> Patience:
        """A chained step's (`quota.in_step`), else a sync request's."""
        if quota.in_step():
            return cls(reads=None, in_place_seconds=1.0, budget_seconds=1.0)
        budget = float(settings.SERENITY_PUBLISH_SYNC_WAIT_SECONDS)
        return cls(reads=3, in_place_seconds=budget, budget_seconds=budget)

    @property
    def hands_over(self) -> bool:
        """Still publishing after this patience: a background job confirms (a sync request),
        rather than the caller running again later (a chained step)."""
        return self.reads is not None


@dataclass(frozen=True)
class Live:
    """Semrush says the project is published: the market's `status`, and how long the publish
    took (the learned time's sample, `_publish_took`)."""

    status: str
    seconds: float


@dataclass(frozen=True)
class NotPublished:
    """The publish failed upstream (`publishFailed`, with Semrush's reason, for operators) or
    was still running at the publish timeout (`publishTimeout`)."""

    code: str
    reason: str | None = None


@dataclass(frozen=True)
class Unconfirmed:
    """Still publishing as far as anyone knows: read again in `retry_in` seconds."""

    retry_in: float


Confirmation = Live | NotPublished | Unconfirmed


def publish_confirm(
    *,
    client: SemrushClient,
    workspace_id: str,
    project_id: str,
    owned: bool,
    started_at: datetime,
    parent_id: str,
    sleep: Callable[[float], None] = time.sleep,
) -> Confirmation:
    """Read the project's `publish_status` as the caller's `Patience` allows (module
    docstring). A read that fails for a reason that may pass (5xx, timeout, 429, no permit in
    a sync request's patience) counts as "still publishing"; any other Semrush error is raised
    (a workspace gone upstream, a refused credential), as is a chained step's deferred
    permit."""
    patience = Patience.current()
    learned = publish_seconds_learned(parent_id=parent_id) or 0.0
    reads = 0
    waited = 0.0
    while True:
        elapsed = _seconds_since(started_at)
        due_in = max(learned - elapsed, 0.0) if reads == 0 else _interval(elapsed)
        if patience.reads is not None and reads >= patience.reads:
            return Unconfirmed(retry_in=due_in)
        if due_in > patience.in_place_seconds or waited + due_in > patience.budget_seconds:
            return Unconfirmed(retry_in=due_in)
        if due_in > 0:
            sleep(due_in)
            waited += due_in
        reads += 1
        confirmation = _read(client, workspace_id, project_id, owned, started_at)
        if confirmation is not None:
            return confirmation


def _read(
    client: SemrushClient, workspace_id: str, project_id: str, owned: bool, started_at: datetime
) -> Confirmation | None:
    """One read: what it confirms, or None (still publishing, within the timeout)."""
    elapsed = _seconds_since(started_at)
    try:
        project = client.get_project(workspace_id=workspace_id, project_id=project_id, owned=owned)
    except (SemrushServerError, SemrushNetworkError, SemrushRateLimitedError):
        project = {}
    status = str(project.get("publish_status") or "").strip().lower()
    if status in LIVE_STATUSES:
        return Live(
            status=LIVE_STATUSES[status], seconds=_publish_took(project, started_at, elapsed)
        )
    if status == FAILED_STATUS:
        reason = project.get("publishing_failed_reason")
        return NotPublished(code="publishFailed", reason=str(reason) if reason else None)
    if elapsed >= float(settings.SERENITY_PUBLISH_TIMEOUT_SECONDS):
        return NotPublished(code="publishTimeout")
    return None


def _publish_took(project: dict, started_at: datetime, elapsed: float) -> float:
    """How long the publish took, the learned time's sample: until the project's
    `published_at` when Semrush gives one, never more than until the read that found it live
    (`elapsed`). A read the quota held back found it live late; that says nothing of Semrush,
    and a learned time grown by it would hold every later first read back as long."""
    try:
        published_at = parse_datetime(str(project.get("published_at") or ""))
    except ValueError:  # well formed, but not a date (a 13th month)
        published_at = None
    if published_at is None or published_at.tzinfo is None:
        return elapsed
    return min(max((published_at - started_at).total_seconds(), 0.0), elapsed)


def _interval(elapsed: float) -> float:
    """The wait before the next read: as long as the publish has run (a doubling back-off)."""
    floor = float(settings.SERENITY_PUBLISH_BACKOFF_SECONDS)
    return min(max(elapsed, floor), MAX_READ_INTERVAL_SECONDS)


def _seconds_since(started_at: datetime) -> float:
    return max((timezone.now() - started_at).total_seconds(), 0.0)


# --- the learned publish time -----------------------------------------------------------------


def publish_seconds_learned(*, parent_id: str) -> float | None:
    """How long publishes of projects under `parent_id` take: the median of the last
    `SERENITY_SETTLE_HISTORY` confirmed ones (`Market.publish_seconds`, the publish's age at
    the read that found it live), or None with no history; learned as settle times are
    (`selectors.learned_median`). An upper bound (the project may have gone live before the
    read), so a first read at this time rarely finds it still publishing."""
    return learned_median(
        kind="publish",
        parent_id=parent_id,
        samples=lambda n: (
            Market.objects.filter(
                brand__organization__semrush_parent_workspace_id=parent_id,
                publish_seconds__isnull=False,
            )
            .order_by("-publish_started_at")
            .values_list("publish_seconds", flat=True)[:n]
        ),
    )
