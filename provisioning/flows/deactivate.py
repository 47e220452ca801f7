"""Deactivate (SPEC §4.4) and market delete: decommission the brand's Semrush objects."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from jobs.models import JobMode, JobStep
from jobs.runner import StepRun
from kernel.errors import DomainError
from provisioning import chain, guard, services
from provisioning.flows.begin import Work, work_begin, work_run
from provisioning.flows.common import require_parent
from provisioning.models import AttemptReason, AttemptStartedBy, AttemptStatus
from provisioning.outcome import Outcome
from provisioning.semrush import SemrushError
from provisioning.upstream import client_for_org, translate_upstream
from provisioning.workspace import brand_pointer, workspace_empty
from serenity.exceptions import MarketBusyError
from serenity.models import Brand, BrandStatus, Market, MarketStatus, WorkspaceMode


def deactivate(*, brand: Brand) -> Outcome:
    """Cancel first, then begin (guard, attempt, a `deactivateBrand` chain), then run it at
    once (`deactivate_step`): re-read the pointer, decommission, clear, tombstone.

    The brand's async chain in flight is cancelled (a running step sees it at its next write
    and deletes what it created); a live *sync* attempt (a request in flight) is not: 409. A
    decommission failure → 502 with pointer and status untouched, the attempt `failed`
    (`upstream`)."""
    pending = guard.pending_attempt_for(brand.pk)
    if pending is not None and guard.attempt_driven_async(pending):
        services.attempt_cancel(attempt_id=pending.id)
    work = Work(
        brand=brand,
        started_by=AttemptStartedBy.DEACTIVATE,
        chained=[(JobStep.DEACTIVATE_BRAND, {})],
        settles=False,
    )
    return work_run(work_begin(work, mode=JobMode.SYNC))


def deactivate_step(run: StepRun) -> chain.Ending:
    """The `deactivateBrand` step: the brand's Semrush objects decommissioned, then forgotten
    (`_forget_decommissioned`); a failure fails the attempt (`upstream`)."""
    attempt = chain.attempt_of(run)
    if attempt is None or attempt.status != AttemptStatus.PENDING:
        return chain.Ending(attempt, chain.StoodDown(attempt))
    brand = attempt.brand
    try:
        _decommission(brand)
    except DomainError as error:
        return chain.Ending(attempt, chain.Failed(error, reason=AttemptReason.UPSTREAM))
    outcome = Outcome(200, {"brandId": str(brand.pk), "status": "pending"})
    return chain.Ending(attempt, chain.Finished(outcome))


def _decommission(brand: Brand) -> None:
    # A worker may have promoted a workspace after the brand was loaded: the fresh value wins.
    pointer = brand_pointer(brand.pk)
    organization = brand.organization
    if pointer is not None:
        client = client_for_org(organization, brand_id=str(brand.pk))
        workspace_empty(
            client=client,
            workspace_id=pointer,
            parent_id=organization.semrush_parent_workspace_id,
        )
    elif brand.workspace_mode == WorkspaceMode.FLAT:
        _delete_flat_projects(brand=brand)
    _forget_decommissioned(brand=brand, pointer=pointer)


def _forget_decommissioned(*, brand: Brand, pointer: str | None) -> None:
    """After the decommission, in one transaction: the pointer cleared (only while it is still
    `pointer`), the markets tombstoned, the brand `pending` again (unless deleted)."""
    now = timezone.now()
    with transaction.atomic():
        if pointer is not None:
            Brand.objects.filter(pk=brand.pk, semrush_sub_workspace_id=pointer).update(
                semrush_sub_workspace_id=None
            )
        Market.objects.filter(brand=brand, deleted_at__isnull=True).update(
            deleted_at=now, reserved_by=None, updated_at=now
        )
        Brand.objects.filter(pk=brand.pk).exclude(status=BrandStatus.DELETED).update(
            status=BrandStatus.PENDING, updated_at=now
        )


def _delete_flat_projects(*, brand: Brand) -> None:
    parent_id = require_parent(brand.organization)
    client = client_for_org(brand.organization, brand_id=str(brand.pk))
    for market in Market.objects.filter(
        brand=brand, deleted_at__isnull=True, semrush_project_id__isnull=False
    ):
        try:
            client.delete_project(workspace_id=parent_id, project_id=str(market.semrush_project_id))
        except SemrushError as exc:
            raise translate_upstream(exc) from exc


def market_delete(*, brand: Brand, geo_target_id: int, language_code: str) -> None:
    """Idempotent: no market → done; `creating` → 409 marketBusy; delete the upstream project
    (404 counts as success), then tombstone. Any other upstream failure → 502, market kept."""
    market = Market.objects.filter(
        brand=brand,
        geo_target_id=geo_target_id,
        language_code=language_code.lower(),
        deleted_at__isnull=True,
    ).first()
    if market is None:
        return
    if market.status == MarketStatus.CREATING:
        raise MarketBusyError()
    if market.semrush_project_id and market.workspace_id:
        client = client_for_org(brand.organization, brand_id=str(brand.pk))
        owned = market.workspace_id != brand.organization.semrush_parent_workspace_id
        try:
            client.delete_project(
                workspace_id=market.workspace_id, project_id=market.semrush_project_id, owned=owned
            )
        except SemrushError as exc:
            error = translate_upstream(exc)
            if error.code != "subworkspaceGone":
                raise error from exc
    Market.objects.filter(pk=market.pk, deleted_at__isnull=True).update(
        deleted_at=timezone.now(), updated_at=timezone.now()
    )
