"""One batch of a reconciliation's plan (SPEC §13.1), run by a Celery task: the family once (the
first batch), then up to `SERENITY_DRIFT_PLAN_BATCH` brands, each read (`plan.brand_read`),
compared (`plan.brand_compare`) and recorded (`services.brand_findings_record`), its repair
begun when the reconciliation repairs (`repair.repair_begin`). Then the next batch is sent, or
the plan is done.

Pace: every call is taken inside `quota.patient_permits` at `SERENITY_AUDIT_RATE_SHARE` of the
credential's rate (the audit's share, §12.4): the plan never takes more than that share, and
another org's work on the credential gets the rest. A batch frees the worker when it ends, so
an org's plan of a thousand brands never holds a worker for long. A batch re-delivered after a
crash starts after the last brand it recorded (`after_brand_id`).
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from kernel.errors import DomainError
from provisioning import quota
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.reconcile import repair, services
from provisioning.reconcile.models import (
    DriftAction,
    Reconciliation,
    ReconciliationItem,
    ReconciliationStatus,
)
from provisioning.reconcile.plan import Upstream, brand_compare, brand_read
from provisioning.semrush import SemrushClient, SemrushError
from provisioning.upstream import client_for_org, translate_upstream
from serenity.models import Brand, BrandStatus, Market, Prompt, WorkspaceMode

logger = logging.getLogger("serenity.reconcile")


def reconciliation_run_batch(*, reconciliation_id: uuid.UUID) -> None:
    """Run the plan's next batch (nothing for a reconciliation that has ended or whose plan
    is done). Raises nothing of Semrush's: an unreadable family fails the reconciliation, an
    unreadable brand is left out (not counted as checked)."""
    reconciliation = (
        Reconciliation.objects.select_related("organization")
        .filter(pk=reconciliation_id, status=ReconciliationStatus.IN_PROGRESS, plan_done=False)
        .first()
    )
    if reconciliation is None:
        return
    with quota.patient_permits(share=float(settings.SERENITY_AUDIT_RATE_SHARE)):
        try:
            client = client_for_org(reconciliation.organization)
            family = reconciliation.family
            if family is None:
                family = _family_read(client, reconciliation)
        except DomainError as error:
            services.reconciliation_fail(reconciliation=reconciliation, error=error)
            return
        except SemrushError as exc:
            services.reconciliation_fail(
                reconciliation=reconciliation, error=translate_upstream(exc)
            )
            return
        batch = _brands_batch(reconciliation)
        _batch_reconcile(client, reconciliation, batch, family)
    if len(batch) < int(settings.SERENITY_DRIFT_PLAN_BATCH):
        services.reconciliation_planned(reconciliation=reconciliation)
    else:
        services.plan_send(reconciliation.pk)


def _family_read(client: SemrushClient, reconciliation: Reconciliation) -> dict[str, str | None]:
    """The parent's family as {workspace id: status}, kept on the reconciliation (read once)."""
    parent_id = str(reconciliation.organization.semrush_parent_workspace_id)
    listing = client.list_family(parent_id=parent_id)
    family = {str(ws.get("id")): ws.get("status") for ws in listing if ws.get("id")}
    Reconciliation.objects.filter(pk=reconciliation.pk).update(family=family)
    return family


def _brands_batch(reconciliation: Reconciliation) -> list[Brand]:
    """The next brands by id: active, in sub-workspace mode, with a workspace."""
    brands = Brand.objects.filter(
        organization_id=reconciliation.organization_id,
        status=BrandStatus.ACTIVE,
        workspace_mode=WorkspaceMode.SUBWORKSPACE,
        semrush_sub_workspace_id__isnull=False,
    ).select_related("organization")
    if reconciliation.brand_ids is not None:
        brands = brands.filter(pk__in=reconciliation.brand_ids)
    if reconciliation.after_brand_id is not None:
        brands = brands.filter(pk__gt=reconciliation.after_brand_id)
    return list(brands.order_by("pk")[: int(settings.SERENITY_DRIFT_PLAN_BATCH)])


def _batch_reconcile(
    client: SemrushClient,
    reconciliation: Reconciliation,
    batch: list[Brand],
    family: dict[str, str | None],
) -> None:
    """Each brand of the batch, with its markets and prompt counts read in two queries for the
    batch. A brand with provisioning work in flight is left out: its record is moving."""
    ids = [b.pk for b in batch]
    busy = set(
        ProvisioningAttempt.objects.filter(
            brand_id__in=ids, status=AttemptStatus.PENDING
        ).values_list("brand_id", flat=True)
    )
    markets: dict[uuid.UUID, list[Market]] = defaultdict(list)
    for market in Market.objects.filter(brand_id__in=ids, deleted_at__isnull=True):
        markets[market.brand_id].append(market)
    prompts = dict(
        Prompt.objects.filter(market__brand_id__in=ids, market__deleted_at__isnull=True)
        .values("market_id")
        .annotate(n=Count("id"))
        .values_list("market_id", "n")
    )
    for brand in batch:
        if brand.pk not in busy:
            _brand_reconcile(client, reconciliation, brand, markets[brand.pk], prompts, family)
        Reconciliation.objects.filter(pk=reconciliation.pk).update(
            after_brand_id=brand.pk, updated_at=timezone.now()
        )


def _brand_reconcile(
    client: SemrushClient,
    reconciliation: Reconciliation,
    brand: Brand,
    markets: list[Market],
    prompts: dict[uuid.UUID, int],
    family: dict[str, str | None],
) -> None:
    try:
        upstream: Upstream = brand_read(client=client, brand=brand, family=family)
    except SemrushError as exc:
        logger.warning(
            "a brand's listing could not be read; left out of the reconciliation",
            extra={"brand_id": str(brand.pk), "error_class": type(exc).__name__},
        )
        return
    found = brand_compare(brand=brand, markets=markets, upstream=upstream, prompts=prompts)
    items = services.brand_findings_record(reconciliation=reconciliation, brand=brand, found=found)
    mendable = [i for i in items if i.action != DriftAction.REPORT_ONLY]
    if reconciliation.repair and mendable:
        _repair(reconciliation, brand, mendable)


def _repair(reconciliation: Reconciliation, brand: Brand, items: list[ReconciliationItem]) -> None:
    try:
        repair.repair_begin(brand=brand, items=items, reconciliation_id=reconciliation.pk)
    except DomainError as error:
        services.items_refused(items=items, error=error)
