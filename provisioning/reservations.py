"""Market reservations (SPEC §3): a market create reserves its slice with a `creating` row,
under the constraint that a brand's live markets have distinct slices, before any upstream
call, so that concurrent creates of one slice make one project (the loser answers 409
`sliceExists`). The reservation records its owner (an attempt, a job, or a sync request); a
create on a slice whose market is `draft`, `publish_failed`, or `creating` with a finished
owner resumes that market. Its final write is `provisioning.markets`'.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from provisioning.models import AttemptStatus, ProvisioningAttempt
from serenity.exceptions import SliceExistsError
from serenity.models import Brand, Market, MarketStatus
from serenity.slices import Slice

RESUMABLE = (MarketStatus.DRAFT, MarketStatus.PUBLISH_FAILED)


def _owner_is_live(market: Market) -> bool:
    """A `creating` reservation is live while its owner (an attempt or a job) is unfinished;
    a request-owned one (flat sync) while it is younger than the stale threshold."""
    owner = market.reserved_by
    if owner is None:
        return False
    if ProvisioningAttempt.objects.filter(pk=owner, status=AttemptStatus.PENDING).exists():
        return True
    if AsyncJob.objects.filter(pk=owner, status=JobStatus.IN_PROGRESS).exists():
        return True
    if (
        ProvisioningAttempt.objects.filter(pk=owner).exists()
        or AsyncJob.objects.filter(pk=owner).exists()
    ):
        return False
    age = timezone.now() - market.updated_at
    return age < timedelta(seconds=settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS)


def _live_slice_market(*, brand: Brand, slice_: Slice) -> Market | None:
    return Market.objects.filter(
        brand=brand,
        geo_target_id=slice_.geo_target_id,
        language_code=slice_.language_code,
        deleted_at__isnull=True,
    ).first()


def slice_market_in(markets: list[Market], slice_: Slice) -> Market | None:
    for market in markets:
        if (market.geo_target_id, market.language_code) == (
            slice_.geo_target_id,
            slice_.language_code,
        ):
            return market
    return None


def slice_taken(market: Market | None) -> bool:
    """The slice has a live market or a live reservation (a create must answer 409)."""
    return market is not None and not _resumable(market)


# A reservation's states while its owner works: `creating`, then `publishing` from Semrush's
# 202 until the publish is confirmed (SPEC §12.1).
HELD = (MarketStatus.CREATING, MarketStatus.PUBLISHING)


def _resumable(market: Market) -> bool:
    return market.status in RESUMABLE or (market.status in HELD and not _owner_is_live(market))


def reservation_row(*, brand: Brand, slice_: Slice, owner: uuid.UUID, name: str | None) -> Market:
    """A new reservation of the slice for `owner` (not saved)."""
    return Market(
        id=uuid.uuid4(),
        brand=brand,
        geo_target_id=slice_.geo_target_id,
        language_code=slice_.language_code,
        name=name or slice_.default_name,
        status=MarketStatus.CREATING,
        reserved_by=owner,
    )


def market_reserve(
    *,
    brand: Brand,
    slice_: Slice,
    owner: uuid.UUID,
    name: str | None,
    live_markets: list[Market] | None = None,
    savepoint: bool = True,
) -> Market:
    """Reserve the slice for `owner`, or take over a resumable market of it
    (`_slice_market_take`). Raises `SliceExistsError` when the slice has a live market or
    another owner's live reservation.

    `live_markets`: the brand's live markets, already read under the brand's lock (saves a
    query). `savepoint=False`: the caller holds the brand's lock, so no concurrent insert of
    the slice can conflict; an IntegrityError then aborts the caller's transaction.
    """
    existing = (
        _live_slice_market(brand=brand, slice_=slice_)
        if live_markets is None
        else slice_market_in(live_markets, slice_)
    )
    if existing is not None:
        return _slice_market_take(existing, owner)
    reservation = reservation_row(brand=brand, slice_=slice_, owner=owner, name=name)
    if not savepoint:
        reservation.save(force_insert=True)
        return reservation
    try:
        with transaction.atomic():
            reservation.save(force_insert=True)
    except IntegrityError:
        raise SliceExistsError() from None
    return reservation


def _slice_market_take(market: Market, owner: uuid.UUID) -> Market:
    """The slice's market as `owner`'s reservation, if it is resumable: `draft`,
    `publish_failed`, or `creating`/`publishing` whose owner has finished (taking it over makes
    it `creating`: its project is published again, which is harmless). A reservation of
    `owner` itself is returned as it is: an earlier run of the owner's step reserved it and was
    interrupted (a worker lost, or re-scheduled for the upstream quota, SPEC §10.6) before its
    end; the re-run resumes it (with its project, if one was recorded). Raises
    `SliceExistsError` otherwise, or when another take-over won."""
    if market.status in HELD and market.reserved_by == owner:
        return market
    if not _resumable(market):
        raise SliceExistsError()
    taken = Market.objects.filter(
        pk=market.pk, status=market.status, reserved_by=market.reserved_by
    ).update(reserved_by=owner, status=MarketStatus.CREATING, updated_at=timezone.now())
    if taken != 1:
        raise SliceExistsError()
    market.refresh_from_db()
    return market


def market_release(*, market_id: uuid.UUID, owner: uuid.UUID) -> None:
    """Drop a reservation that created nothing upstream (no project id)."""
    Market.objects.filter(
        pk=market_id, reserved_by=owner, status=MarketStatus.CREATING, semrush_project_id=None
    ).delete()
