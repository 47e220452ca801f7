"""Reconciliations' writes (SPEC §13.1): begin one, record what a brand's comparison found
(items, the brand's and markets' current drift, `drift.detected`), record how a repair ended
(`drift.repaired`), and end the reconciliation.

Counts are kept as things happen, never recounted: `checked` and `drifted` move with each
brand's findings, `repaired` and `failed` with each repair chain's end (its items, once: the
write that moves an item off `planned` is what counts it). A reconciliation ends COMPLETED once
its plan has read every brand and no item is waiting on a repair chain.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from kernel import context
from kernel.errors import DomainError, InvalidRequestError
from provisioning.reconcile.exceptions import ReconciliationInProgressError
from provisioning.reconcile.models import (
    Drift,
    DriftKind,
    ItemStatus,
    Reconciliation,
    ReconciliationItem,
    ReconciliationStatus,
)
from provisioning.reconcile.plan import Found
from provisioning.reconcile.signals import drift_detected, drift_repaired
from serenity.exceptions import SerenityNotEnabledError
from serenity.models import Brand, BrandStatus, Organization, WorkspaceMode

PLAN_TASK = "reconcile.plan"
_CONSTRAINT = "one_reconciliation_in_progress_per_org"


def reconciliation_begin(
    *,
    organization: Organization,
    brand_ids: Sequence[uuid.UUID] | None = None,
    repair: bool = False,
    swept: bool = False,
) -> Reconciliation:
    """Accept a reconciliation (its plan runs as Celery work, sent after commit). Raises
    `SerenityNotEnabledError` (not a Serenity org in sub-workspace mode),
    `InvalidRequestError` (a brand id that is not one of the org's), and
    `ReconciliationInProgressError` while another of the org's is in progress (the database
    refuses the second: a partial unique constraint)."""
    _serenity_check(organization)
    ids = _brand_ids_check(organization, brand_ids)
    try:
        with transaction.atomic():
            reconciliation = Reconciliation.objects.create(
                organization=organization,
                repair=repair,
                brand_ids=ids,
                swept=swept,
                **context.actor_fields("started"),
            )
            transaction.on_commit(lambda: plan_send(reconciliation.pk))
    except IntegrityError as exc:
        if _CONSTRAINT not in str(exc):
            raise
        running = Reconciliation.objects.filter(
            organization=organization, status=ReconciliationStatus.IN_PROGRESS
        ).first()
        raise ReconciliationInProgressError(
            reconciliation_id=running.pk if running is not None else uuid.UUID(int=0)
        ) from None
    return reconciliation


def _serenity_check(organization: Organization) -> None:
    if (
        not organization.is_serenity_org
        or organization.workspace_mode != WorkspaceMode.SUBWORKSPACE
    ):
        raise SerenityNotEnabledError(
            "Reconciliations need a Serenity organization with a parent workspace in "
            "sub-workspace mode."
        )


def _brand_ids_check(
    organization: Organization, brand_ids: Sequence[uuid.UUID] | None
) -> list[str] | None:
    """The brand ids as stored (sorted, distinct); 400 naming one that is not the org's."""
    ids = sorted({str(b) for b in brand_ids}) if brand_ids is not None else None
    if ids:
        known = set(
            Brand.objects.filter(organization=organization, pk__in=ids)
            .exclude(status=BrandStatus.DELETED)
            .values_list("pk", flat=True)
        )
        unknown = [i for i in ids if uuid.UUID(i) not in known]
        if unknown:
            raise InvalidRequestError(
                f"brandIds: {unknown[0]} is not a brand of this organization.", field="brandIds"
            )
    return ids


def plan_send(reconciliation_id: uuid.UUID, *, countdown: float = 0.0) -> None:
    """Send the plan's next batch to a worker (by the task's name: services never import
    tasks). A lost message is found by the sweep (`reconciliations_stalled`)."""
    current_app.send_task(
        PLAN_TASK,
        args=[str(reconciliation_id)],
        countdown=countdown,
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
    )


def brand_findings_record(
    *, reconciliation: Reconciliation, brand: Brand, found: Sequence[Found]
) -> list[ReconciliationItem]:
    """In one transaction: the brand's items, its and its markets' current drift (rows of
    kinds no longer found deleted; a kind found again keeps when it was first detected), the
    counts, and `drift.detected` when the brand has a kind it did not have."""
    now = timezone.now()
    with transaction.atomic():
        items = ReconciliationItem.objects.bulk_create(
            [
                ReconciliationItem(
                    reconciliation=reconciliation,
                    brand=brand,
                    market=f.market,
                    # `adoptable` rides with the slice: the repair reads it, the API does not.
                    slice={**(f.slice or {}), "adoptable": True} if f.adoptable else f.slice,
                    project_id=f.project_id,
                    kind=f.kind,
                    action=f.action,
                    planned_calls=f.planned_calls,
                    status=(
                        ItemStatus.SKIPPED
                        if f.kind == DriftKind.UNEXPECTED_PROJECT
                        else ItemStatus.PLANNED
                    ),
                )
                for f in found
            ]
        )
        new_kinds = _drift_keep(brand=brand, found=found, now=now)
        Reconciliation.objects.filter(pk=reconciliation.pk).update(
            checked=F("checked") + 1, drifted=F("drifted") + len(found), updated_at=now
        )
        if new_kinds:
            drift_detected.send(
                sender=Drift,
                organization_id=brand.organization_id,
                brand_id=brand.pk,
                kinds=sorted({str(f.kind) for f in found}),
                reconciliation_id=reconciliation.pk,
            )
    return items


def _drift_keep(*, brand: Brand, found: Sequence[Found], now: Any) -> set[str]:
    """Make the brand's Drift rows what `found` says; the kinds that are new."""
    wanted: dict[Any, str] = {}
    for f in found:
        if f.kind == DriftKind.UNEXPECTED_PROJECT:
            continue  # listed on the reconciliation, not on the brand or a market
        key = f.market.pk if f.market is not None else None
        wanted.setdefault(key, str(f.kind))
    held = {(d.market_id, d.kind): d for d in Drift.objects.filter(brand=brand)}
    stale = [d.pk for (market_id, kind), d in held.items() if wanted.get(market_id) != kind]
    Drift.objects.filter(pk__in=stale).delete()
    fresh = [(m, k) for m, k in wanted.items() if (m, k) not in held]
    Drift.objects.bulk_create(
        [Drift(brand=brand, market_id=m, kind=k, detected_at=now) for m, k in fresh]
    )
    return {k for _, k in fresh}


def brand_drift_clear(*, brand: Brand) -> None:
    """A brand compared and found as the record says: its drift rows go."""
    Drift.objects.filter(brand=brand).delete()


def items_refused(*, items: Sequence[ReconciliationItem], error: DomainError) -> None:
    """A repair that could not begin (the brand's guard, a brand that changed): its items are
    `skipped` with the refusal's code and message."""
    ReconciliationItem.objects.filter(
        pk__in=[i.pk for i in items], status=ItemStatus.PLANNED
    ).update(status=ItemStatus.SKIPPED, error={"code": error.code, "message": error.message})


def repair_ended(
    *, root_id: uuid.UUID, mended: set[uuid.UUID | None], errors: dict[Any, dict[str, str]]
) -> None:
    """A `repairBrand` chain ended (inside its ending's transaction): each of its items still
    `planned` is `repaired` (its market, or the brand's workspace (None), is in `mended`) or
    `failed` with its error; the reconciliation's counts move by as many, the mended drift
    rows go, `drift.repaired` is sent for the brand, and the reconciliation ends if it was
    the last thing it waited for. Idempotent: an item is counted by the write that moves it."""
    items = list(ReconciliationItem.objects.filter(job_id=root_id, status=ItemStatus.PLANNED))
    if not items:
        return
    repaired = [i for i in items if i.market_id in mended]
    failed = [i for i in items if i.market_id not in mended]
    now = timezone.now()
    moved_up = ReconciliationItem.objects.filter(
        pk__in=[i.pk for i in repaired], status=ItemStatus.PLANNED
    ).update(status=ItemStatus.REPAIRED, error=None)
    moved_down = 0
    for item in failed:
        error = errors.get(item.market_id) or {"code": "repairFailed", "message": "Not repaired."}
        moved_down += ReconciliationItem.objects.filter(
            pk=item.pk, status=ItemStatus.PLANNED
        ).update(status=ItemStatus.FAILED, error=error)
    reconciliation_id = items[0].reconciliation_id
    Reconciliation.objects.filter(pk=reconciliation_id).update(
        repaired=F("repaired") + moved_up, failed=F("failed") + moved_down, updated_at=now
    )
    if repaired:
        brand = items[0].brand
        markets = [i.market_id for i in repaired if i.market_id is not None]
        Drift.objects.filter(brand=brand, market_id__in=markets).delete()
        if None in mended:
            Drift.objects.filter(brand=brand, market__isnull=True).delete()
        drift_repaired.send(
            sender=Drift,
            organization_id=brand.organization_id,
            brand_id=brand.pk,
            kinds=sorted({i.kind for i in repaired}),
            reconciliation_id=reconciliation_id,
        )
    reconciliation_complete_if_ended(reconciliation_id=reconciliation_id)


def reconciliation_planned(*, reconciliation: Reconciliation) -> None:
    """The plan has read every brand: the reconciliation ends unless repairs are running. A
    whole-org plan also drops the drift of what it no longer compares (a brand no longer
    active, a market deleted): nothing would ever clear it."""
    if reconciliation.brand_ids is None:
        Drift.objects.filter(brand__organization_id=reconciliation.organization_id).filter(
            ~Q(brand__status=BrandStatus.ACTIVE) | Q(market__deleted_at__isnull=False)
        ).delete()
    reconciliation_complete_if_ended(reconciliation_id=reconciliation.pk, planned=True)


def reconciliation_complete_if_ended(
    *, reconciliation_id: uuid.UUID, planned: bool = False
) -> bool:
    """COMPLETED (once) when the plan is done (`planned` now, or recorded by an earlier call)
    and no item waits on a repair chain."""
    if planned:
        Reconciliation.objects.filter(pk=reconciliation_id).update(plan_done=True)
    waiting = ReconciliationItem.objects.filter(
        reconciliation_id=reconciliation_id, status=ItemStatus.PLANNED, job_id__isnull=False
    ).exists()
    if waiting:
        return False
    now = timezone.now()
    return bool(
        Reconciliation.objects.filter(
            pk=reconciliation_id, status=ReconciliationStatus.IN_PROGRESS, plan_done=True
        ).update(status=ReconciliationStatus.COMPLETED, finished_at=now, updated_at=now)
    )


def reconciliation_fail(*, reconciliation: Reconciliation, error: DomainError) -> None:
    """It could not read the org's Semrush at all: FAILED with the error (no upstream text)."""
    now = timezone.now()
    Reconciliation.objects.filter(
        pk=reconciliation.pk, status=ReconciliationStatus.IN_PROGRESS
    ).update(
        status=ReconciliationStatus.FAILED,
        error={"code": error.code, "message": error.message},
        finished_at=now,
        updated_at=now,
    )
