"""The market rows' final writes (SPEC §11.5): what `markets.market_provision` answered for each
row (`outcome.MarketWrite`: `live`, `publish_failed`, `publishing` handed to a background
confirmation, or dropped), committed with the end of the work, in the caller's transaction (a
chained step's ending, with its job and its attempt); and what stands instead when that write
is refused (a deactivate or cancel won): the projects deleted upstream, their rows dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from django.db.models import QuerySet
from django.utils import timezone

from jobs.outbox import outbox_jobs_create
from provisioning.markets import project_discard
from provisioning.outcome import MarketEnd, MarketWrite
from provisioning.semrush import SemrushClient
from serenity.models import Market, MarketStatus


def market_writes_commit(
    writes: tuple[MarketWrite, ...], *, still_valid: Callable[[], bool] | None = None
) -> bool:
    """Apply the market rows' final writes, in the caller's transaction (each only while its
    owner still holds the reservation). False — nothing of the transaction may stand, the
    caller rolls it back — when a row may not go public: `still_valid()` says the work lost
    the brand (a chain's attempt ended, or the brand points elsewhere), or the reservation is
    no longer the owner's (a heal or a deactivate tombstoned it). Other writes are never
    refused: what failed is recorded whoever won."""
    if still_valid is not None and any(write.goes_public for write in writes) and not still_valid():
        return False
    changed = [(write, _market_write(write)) for write in writes]
    return all(rows == 1 for write, rows in changed if write.goes_public)


def _market_write(write: MarketWrite) -> int:
    """One row's final write; the number of rows it changed."""
    owned = Market.objects.filter(pk=write.market_id, reserved_by=write.owner)
    now = timezone.now()
    if write.end is MarketEnd.LIVE:
        return owned.filter(deleted_at__isnull=True).update(
            status=write.live_status,
            reserved_by=None,
            semrush_project_id=write.project_id,
            workspace_id=write.workspace_id,
            publish_seconds=write.publish_seconds,
            publish_error=None,
            updated_at=now,
        )
    if write.end is MarketEnd.PUBLISHING:
        return _confirmation_hand_over(owned, now)
    if write.end is MarketEnd.PUBLISH_FAILED:
        return owned.update(
            status=MarketStatus.PUBLISH_FAILED,
            reserved_by=None,
            publish_error=write.publish_error,
            updated_at=now,
        )
    deleted, _ = owned.filter(status__in=(MarketStatus.CREATING, MarketStatus.PUBLISHING)).delete()
    return deleted


# The background confirmation of a publish that a sync request could not wait for (SPEC §12.1):
# a one-step job that owns the `publishing` row and holds no brand lease (a deactivate meanwhile
# tombstones the row, and the job's conditional final write then changes nothing).
CONFIRM_JOB_TYPE = "publishConfirm"
CONFIRM_STEP = "confirmPublish"
CONFIRM_MARKET_KEY = "marketId"


def _confirmation_hand_over(owned: QuerySet[Market], now: datetime) -> int:
    """The row stays `publishing`, owned by a new confirmation job (created here, in the
    caller's transaction, published after its commit)."""
    live = owned.filter(deleted_at__isnull=True)
    row = live.values("pk", "brand__organization_id").first()
    if row is None:
        return 0
    job_id = uuid.uuid4()
    changed = live.update(status=MarketStatus.PUBLISHING, reserved_by=job_id, updated_at=now)
    outbox_jobs_create(
        organization_id=row["brand__organization_id"],
        job_type=CONFIRM_JOB_TYPE,
        step=CONFIRM_STEP,
        jobs={job_id: {CONFIRM_MARKET_KEY: str(row["pk"])}},
    )
    return changed


def market_writes_refused(
    *, client: SemrushClient, writes: tuple[MarketWrite, ...]
) -> tuple[MarketWrite, ...]:
    """What to commit instead of writes that were refused (a deactivate or cancel won before
    the final write, SPEC §6.3): each project that was to go public is deleted upstream and its
    row dropped; the other writes stand. Never raises (a project left is listed by
    provisioning_audit)."""
    instead = []
    for write in writes:
        if write.goes_public:
            if write.project_id is not None:
                project_discard(
                    client=client,
                    workspace_id=write.workspace_id,
                    project_id=write.project_id,
                    owned_workspace=write.owned_workspace,
                )
            write = replace(write, end=MarketEnd.RELEASED)
        instead.append(write)
    return tuple(instead)
