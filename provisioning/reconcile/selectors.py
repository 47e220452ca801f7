"""Reconciliations' reads (SPEC §13.1): one of an org's (another org's is not found), a page of
an org's newest first, a page of one's items; and the current drift of brands and markets as
their reads show it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from kernel.pagination import Page, keyset_page
from provisioning.reconcile.exceptions import ReconciliationNotFoundError
from provisioning.reconcile.models import Drift, Reconciliation, ReconciliationItem
from serenity.models import Brand, Organization


def reconciliation_get(
    *, organization: Organization, reconciliation_id: uuid.UUID
) -> Reconciliation:
    """Raises `ReconciliationNotFoundError` for an unknown id or another org's (the same
    answer)."""
    try:
        return Reconciliation.objects.get(pk=reconciliation_id, organization=organization)
    except Reconciliation.DoesNotExist:
        raise ReconciliationNotFoundError() from None


def reconciliation_list(
    *, organization: Organization, status: str | None = None, cursor: str | None, limit: int
) -> Page[Reconciliation]:
    rows = Reconciliation.objects.filter(organization=organization)
    if status:
        rows = rows.filter(status=status)
    return keyset_page(
        rows,
        kind="reconciliations",
        ordering=("-created_at", "-id"),
        sort_key=lambda r: [r.created_at.isoformat(), str(r.pk)],
        cursor=cursor,
        limit=limit,
    )


@dataclass(frozen=True)
class ReconciliationDocument:
    reconciliation: Reconciliation
    items: list[ReconciliationItem]
    next_cursor: str | None


def reconciliation_document(
    *,
    reconciliation: Reconciliation,
    status: str | None = None,
    kind: str | None = None,
    cursor: str | None,
    limit: int,
) -> ReconciliationDocument:
    """The reconciliation (its counts read first) with a page of its items in the order they
    were found. Raises `InvalidRequestError` for a cursor that is not one of this list's."""
    reconciliation.refresh_from_db()
    items = ReconciliationItem.objects.filter(reconciliation=reconciliation)
    if status:
        items = items.filter(status=status)
    if kind:
        items = items.filter(kind=kind)
    page = keyset_page(
        items,
        kind="reconciliation-items",
        ordering=("id",),
        sort_key=lambda item: [item.pk],
        cursor=cursor,
        limit=limit,
    )
    return ReconciliationDocument(reconciliation, list(page.items), page.next_cursor)


def drift_of(rows: Any, *, market_level: bool) -> dict[str, Any] | None:
    """`{kind, detectedAt}` of a brand (its workspace's: the row with no market) or a market,
    from its prefetched `drifts`; None when it has none."""
    for drift in rows.all():
        if (drift.market_id is not None) == market_level:
            return {"kind": drift.kind, "detectedAt": drift.detected_at}
    return None


def brands_drifted(brands: QuerySet[Brand]) -> QuerySet[Brand]:
    """Of `brands`, those with drift at either level (the brand's or one of its markets')."""
    return brands.filter(pk__in=Drift.objects.values("brand_id"))


def drifted_brands_per_kind(
    *, organization_id: uuid.UUID | None = None
) -> dict[tuple[str, str], int]:
    """Brands with drift per (org id or "", kind), for `/metrics` (one query)."""
    from django.db.models import Count

    rows = Drift.objects.values("brand__organization_id", "kind").annotate(
        n=Count("brand_id", distinct=True)
    )
    if organization_id is not None:
        rows = rows.filter(brand__organization_id=organization_id)
    return {(str(r["brand__organization_id"]), r["kind"]): r["n"] for r in rows}
