"""Reads over provisioning attempts, including the derived brand provisioning state (§3, §6.5)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import OuterRef, QuerySet, Subquery

from kernel.pagination import Page, keyset_page
from provisioning.models import AttemptStatus, ProvisioningAttempt
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
    *, organization: Organization, status: str | None = None, cursor: str | None, limit: int
) -> Page[Brand]:
    """One page of an org's brands by name then id, with their provisioning state; `deleted`
    ones only when asked for. One query whatever the page size. Raises `InvalidRequestError`
    for a cursor that is not one of this list's."""
    brands = Brand.objects.filter(organization=organization)
    brands = brands.filter(status=status) if status else brands.exclude(status=BrandStatus.DELETED)
    return keyset_page(
        brands_with_provisioning_state(brands),
        kind="brands",
        ordering=BRAND_ORDER,
        sort_key=lambda brand: [brand.name, str(brand.pk)],
        cursor=cursor,
        limit=limit,
    )


def brand_get(*, brand_id: uuid.UUID) -> Brand:
    return brands_with_provisioning_state(Brand.objects.filter(pk=brand_id)).get()
