"""Reads over provisioning attempts, including the derived brand provisioning state (§3, §6.5)."""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import (
    Case,
    CharField,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from jobs.models import AsyncJob, JobStatus
from kernel.pagination import Page, keyset_page
from provisioning.exceptions import OnboardingNotFoundError
from provisioning.models import (
    AttemptStatus,
    Onboarding,
    OnboardingItem,
    OnboardingStatus,
    ProvisioningAttempt,
)
from serenity.models import Brand, BrandStatus, Organization

_LATEST_ATTEMPT = ProvisioningAttempt.objects.filter(brand_id=OuterRef("pk")).order_by(
    "-created_at", "-id"
)


def brands_with_provisioning_state(queryset: QuerySet[Brand]) -> QuerySet[Brand]:
    """Annotate each brand with its latest attempt's status, reason and error.

    A pending attempt is always the latest (a new attempt can only begin when none is pending),
    so the latest attempt alone decides the derived state, in one query for any number of brands.
    """
    return queryset.annotate(
        latest_attempt_status=Subquery(_LATEST_ATTEMPT.values("status")[:1]),
        latest_attempt_reason=Subquery(_LATEST_ATTEMPT.values("reason")[:1]),
        latest_attempt_error=Subquery(_LATEST_ATTEMPT.values("error")[:1]),
    )


def with_latest_attempt(brand: Brand, attempt: ProvisioningAttempt | None) -> Brand:
    """Annotate a brand in hand as `brands_with_provisioning_state` would, from its latest
    attempt in hand (None: it has none), so that rendering it needs no query."""
    brand.latest_attempt_status = attempt.status if attempt else None  # type: ignore[attr-defined]
    brand.latest_attempt_reason = attempt.reason if attempt else None  # type: ignore[attr-defined]
    brand.latest_attempt_error = attempt.error if attempt else None  # type: ignore[attr-defined]
    return brand


@dataclass(frozen=True)
class ProvisioningState:
    status: str | None
    error: dict[str, str] | None


def brand_provisioning_state(brand: Brand) -> ProvisioningState:
    """`pending` while an attempt is pending; `failed` when the latest attempt failed; `ready`
    when the brand has a pointer; else None. Uses the annotations when present."""
    if hasattr(brand, "latest_attempt_status"):
        status = getattr(brand, "latest_attempt_status", None)
        reason = getattr(brand, "latest_attempt_reason", None)
        error = getattr(brand, "latest_attempt_error", None)
    else:
        latest = (
            ProvisioningAttempt.objects.filter(brand_id=brand.pk)
            .order_by("-created_at", "-id")
            .values("status", "reason", "error")
            .first()
        )
        status, reason, error = (
            (latest["status"], latest["reason"], latest["error"]) if latest else (None, None, None)
        )
    if status == AttemptStatus.PENDING:
        return ProvisioningState("pending", None)
    if status == AttemptStatus.FAILED:
        return ProvisioningState(
            "failed",
            {"code": reason or "unexpected", "message": error or "Provisioning failed."},
        )
    if brand.semrush_sub_workspace_id:
        return ProvisioningState("ready", None)
    return ProvisioningState(None, None)


BRAND_ORDER = ("name", "id")


def brand_list(
    *,
    organization: Organization,
    status: str | None = None,
    drift: bool | None = None,
    cursor: str | None,
    limit: int,
) -> Page[Brand]:
    """One page of an org's brands by name then id, with their provisioning state and their
    drift (SPEC §13.1); `deleted` ones only when asked for; `drift=True`: only those with drift
    (theirs or a market's). Two queries whatever the page size. Raises `InvalidRequestError`
    for a cursor that is not one of this list's."""
    brands = Brand.objects.filter(organization=organization)
    brands = brands.filter(status=status) if status else brands.exclude(status=BrandStatus.DELETED)
    if drift is not None:
        drifted = Q(pk__in=Brand.objects.filter(drifts__isnull=False).values("pk"))
        brands = brands.filter(drifted) if drift else brands.exclude(drifted)
    return keyset_page(
        brands_with_provisioning_state(brands).prefetch_related("drifts"),
        kind="brands",
        ordering=BRAND_ORDER,
        sort_key=lambda brand: [brand.name, str(brand.pk)],
        cursor=cursor,
        limit=limit,
    )


def brand_get(*, brand_id: uuid.UUID) -> Brand:
    return brands_with_provisioning_state(Brand.objects.filter(pk=brand_id)).get()


# Learned times (settle, publish), per kind and parent, for this long in this process (a burst
# of chains asks once); no history yet is asked again soon: the first samples are moments away.
_LEARNED_TTL_SECONDS = 30.0
_UNLEARNED_TTL_SECONDS = 2.0
_learned: dict[tuple[str, str], tuple[float, float | None]] = {}
_learned_lock = threading.Lock()


def learned_median(
    *, kind: str, parent_id: str, samples: Callable[[int], Iterable[float | None]]
) -> float | None:
    """The median of the last `SERENITY_SETTLE_HISTORY` samples (`samples(n)`: the newest n)
    of `kind` under `parent_id`, or None with no history (or history off). Cached per process
    for `_LEARNED_TTL_SECONDS`."""
    history = int(settings.SERENITY_SETTLE_HISTORY)
    if history <= 0 or not parent_id:
        return None
    now = time.monotonic()
    with _learned_lock:
        cached = _learned.get((kind, parent_id))
        if cached is not None and cached[0] > now:
            return cached[1]
    values = [value for value in samples(history) if value is not None]
    learned = max(statistics.median(values), 0.0) if values else None
    ttl = _LEARNED_TTL_SECONDS if learned is not None else _UNLEARNED_TTL_SECONDS
    with _learned_lock:
        _learned[(kind, parent_id)] = (now + ttl, learned)
    return learned


def settle_seconds_learned(*, parent_id: str) -> float | None:
    """How long workspaces created under `parent_id` take to settle: the median of the last
    `SERENITY_SETTLE_HISTORY` freshly created candidates' settle times (SPEC §11.1), or None
    with no history. A chain schedules its first status read then: a read that answers "not
    ready" is spent quota.

    A sample is the candidate's age when the read that found it ready was *scheduled*, not
    when a busy quota let it run: queueing behind the quota says nothing of Semrush. It is an upper
    bound (the workspace may have settled before): the estimate converges to the earliest first
    read time that has worked, so it rarely undershoots into a wasted read."""
    return learned_median(
        kind="settle",
        parent_id=parent_id,
        samples=lambda n: (
            ProvisioningAttempt.objects.filter(
                brand__organization__semrush_parent_workspace_id=parent_id,
                freshly_created=True,
                workspace_promoted=True,
                settle_seconds__isnull=False,
            )
            .order_by("-promoted_at")
            .values_list("settle_seconds", flat=True)[:n]
        ),
    )


def learning_forget() -> None:
    """Drop this process's cached estimates (tests)."""
    with _learned_lock:
        _learned.clear()


# --- bulk onboarding (SPEC §11.2) ---------------------------------------------------------------


@dataclass(frozen=True)
class OnboardingCounts:
    in_progress: int
    completed: int
    failed: int
    cancelled: int

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.cancelled


def _item_status() -> Any:
    """An item's status as a database expression: its chain's effective status (the root's
    current step, SPEC §4.6), or FAILED for an item refused at accept."""
    return Case(
        When(job__isnull=True, then=Value(JobStatus.FAILED)),
        default=Coalesce(F("job__current__status"), F("job__status")),
        output_field=CharField(),
    )


def onboarding_counts(onboarding: Onboarding) -> OnboardingCounts:
    """Every item counted by its status: the counts the onboarding's row keeps as its items
    end (no query; as fresh as the instance)."""
    return OnboardingCounts(
        in_progress=onboarding.in_progress,
        completed=onboarding.completed,
        failed=onboarding.failed,
        cancelled=onboarding.cancelled,
    )


def onboarding_status(onboarding: Onboarding, counts: OnboardingCounts) -> str:
    """IN_PROGRESS until every item has ended; then CANCELLED if it was cancelled, else
    COMPLETED (whatever the items' outcomes: the counts say them)."""
    if counts.in_progress:
        return OnboardingStatus.IN_PROGRESS
    if onboarding.cancelled_at is not None:
        return OnboardingStatus.CANCELLED
    return OnboardingStatus.COMPLETED


def onboarding_get(*, organization: Organization, onboarding_id: uuid.UUID) -> Onboarding:
    """Raises `OnboardingNotFoundError` for an unknown id or another org's (the same answer)."""
    try:
        return Onboarding.objects.get(pk=onboarding_id, organization=organization)
    except Onboarding.DoesNotExist:
        raise OnboardingNotFoundError() from None


def onboarding_items(
    *, onboarding: Onboarding, status: str | None = None, cursor: str | None, limit: int
) -> Page[OnboardingItem]:
    """One page of the items in `index` order (only those in `status`, when given), each with
    its chain's root and current step (one query whatever the page size)."""
    items = OnboardingItem.objects.filter(onboarding=onboarding).select_related(
        "job", "job__current"
    )
    if status:
        items = items.annotate(effective=_item_status()).filter(effective=status)
    return keyset_page(
        items,
        kind="onboarding-items",
        ordering=("index",),
        sort_key=lambda item: [item.index],
        cursor=cursor,
        limit=limit,
    )


def onboarding_items_all(
    *, onboarding: Onboarding, status: str | None = None, chunk: int = 500
) -> Iterator[OnboardingItem]:
    """Every item in `index` order (only those in `status`, when given), as
    `onboarding_items` reads them, `chunk` at a time (by index, so a long export holds no
    cursor or transaction open between reads)."""
    items = OnboardingItem.objects.filter(onboarding=onboarding).select_related(
        "job", "job__current", "brand"
    )
    if status:
        items = items.annotate(effective=_item_status()).filter(effective=status)
    after = -1
    while True:
        batch = list(items.filter(index__gt=after).order_by("index")[:chunk])
        yield from batch
        if len(batch) < chunk:
            return
        after = batch[-1].index


def onboarding_items_to_retry(onboarding: Onboarding) -> list[OnboardingItem]:
    """Every item whose status is FAILED or CANCELLED (SPEC §13.2: its chain's), in `index`
    order, with its brand: what a redrive takes."""
    return list(
        OnboardingItem.objects.filter(onboarding=onboarding)
        .annotate(effective=_item_status())
        .filter(effective__in=(JobStatus.FAILED, JobStatus.CANCELLED))
        .select_related("brand")
        .order_by("index")
    )


def onboarding_item_input(item: OnboardingItem) -> dict[str, Any]:
    """The brand data the item was asked with (`brand_input`). An item accepted before
    revision 7 kept none: its brand's fields and the markets its chain was given stand in
    (none when it has no brand)."""
    if item.brand_input is not None:
        return dict(item.brand_input)
    brand = item.brand
    markets: list[dict[str, Any]] = []
    if item.job_id is not None:
        for metadata in AsyncJob.objects.filter(root_id=item.job_id).values_list(
            "metadata", flat=True
        ):
            if "markets" in (metadata or {}):
                markets = list(metadata["markets"])
            elif "geoTargetId" in (metadata or {}):
                markets = [metadata]
    return {
        "baseUrl": brand.base_url if brand is not None else "",
        "urls": list(brand.urls or []) if brand is not None else [],
        "aliases": list(brand.aliases or []) if brand is not None else [],
        "markets": markets,
    }


# An onboarding's status by its rows: it has ended once `completed_at` is written (in the
# transaction of its last item's end), CANCELLED if a cancel was marked first.
ONBOARDING_STATUS_Q: dict[str, Q] = {
    OnboardingStatus.IN_PROGRESS: Q(completed_at__isnull=True),
    OnboardingStatus.COMPLETED: Q(completed_at__isnull=False, cancelled_at__isnull=True),
    OnboardingStatus.CANCELLED: Q(completed_at__isnull=False, cancelled_at__isnull=False),
}


def onboarding_list(
    *, organization: Organization, status: str | None = None, cursor: str | None, limit: int
) -> Page[Onboarding]:
    """One page of the org's onboardings (only those in `status`, when given), newest
    first."""
    onboardings = Onboarding.objects.filter(organization=organization)
    if status:
        onboardings = onboardings.filter(ONBOARDING_STATUS_Q[status])
    return keyset_page(
        onboardings,
        kind="onboardings",
        ordering=("-created_at", "-id"),
        sort_key=lambda o: [o.created_at.isoformat(), str(o.pk)],
        cursor=cursor,
        limit=limit,
    )


@dataclass(frozen=True)
class OnboardingSummary:
    """An onboarding without its items, as the API renders it (SPEC §11.2) and the
    `onboarding.completed` event carries it (SPEC §11.3)."""

    onboarding_id: uuid.UUID
    status: str
    total: int
    counts: OnboardingCounts
    created_at: datetime
    updated_at: datetime
    # When it ended (COMPLETED or CANCELLED); None while in progress.
    finished_at: datetime | None
    # SPEC §13.2: the onboarding it redrives, its failure threshold, who cancelled it.
    retry_of: uuid.UUID | None
    max_failed_items: int | None
    cancelled_by: str | None


def onboarding_summary(onboarding: Onboarding) -> OnboardingSummary:
    counts = onboarding_counts(onboarding)
    status = onboarding_status(onboarding, counts)
    return OnboardingSummary(
        onboarding_id=onboarding.pk,
        status=status,
        total=onboarding.total,
        counts=counts,
        created_at=onboarding.created_at,
        updated_at=onboarding.updated_at,
        finished_at=None if status == OnboardingStatus.IN_PROGRESS else onboarding.completed_at,
        retry_of=onboarding.retry_of_id,
        max_failed_items=onboarding.max_failed_items,
        cancelled_by=onboarding.cancelled_by if onboarding.cancelled_at is not None else None,
    )


@dataclass(frozen=True)
class OnboardingItemDocument:
    """An item as its chain reports itself (SPEC §4.6: the root's current step decides), or
    FAILED with its own error when it was refused at accept (no chain)."""

    index: int
    name: str
    brand_id: uuid.UUID | None
    job_id: uuid.UUID | None
    status: str
    result: dict[str, Any] | None
    error: dict[str, Any] | None


def onboarding_item_document(item: OnboardingItem) -> OnboardingItemDocument:
    """From an item read by `onboarding_items` (its root and current step joined: no query)."""
    if item.job is None:
        return OnboardingItemDocument(
            index=item.index,
            name=item.name,
            brand_id=item.brand_id,
            job_id=None,
            status=JobStatus.FAILED,
            result=None,
            error=item.error,
        )
    effective = item.job.current or item.job
    status = str(effective.status)
    return OnboardingItemDocument(
        index=item.index,
        name=item.name,
        brand_id=item.brand_id,
        job_id=item.job_id,
        status=status,
        result=effective.result if status == JobStatus.COMPLETED else None,
        error=effective.error if status in (JobStatus.FAILED, JobStatus.CANCELLED) else None,
    )


@dataclass(frozen=True)
class OnboardingDocument(OnboardingSummary):
    """An onboarding with one page of its items (`GET …/onboardings/{id}`)."""

    items: list[OnboardingItemDocument]
    next_cursor: str | None


def onboarding_document(
    *, onboarding: Onboarding, status: str | None = None, cursor: str | None, limit: int
) -> OnboardingDocument:
    """Raises `InvalidRequestError` for a cursor that is not one of this list's.

    The counts are read before the page, never after: an item ends between the two reads, and
    an ended item never starts again, so a COMPLETED document never lists an item still in
    progress (read the other way round, the item read as running, then counted as ended)."""
    summary = onboarding_summary(onboarding)
    page = onboarding_items(onboarding=onboarding, status=status, cursor=cursor, limit=limit)
    return OnboardingDocument(
        **vars(summary),
        items=[onboarding_item_document(item) for item in page.items],
        next_cursor=page.next_cursor,
    )
