"""Reads for organizations and brands, including the caller's tenancy scope (SPEC §4)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, Subquery

from kernel.errors import InvalidRequestError
from kernel.pagination import Page, keyset_page
from serenity.exceptions import (
    BrandNotFoundError,
    NotAMemberError,
    OrganizationNotFoundError,
    SerenityNotActiveError,
)
from serenity.models import Brand, BrandStatus, Market, Membership, Organization, Role

# The `{geoTargetId}` of a path; the OpenAPI document states this pattern.
GEO_TARGET_ID_PATTERN = "^[0-9]{1,10}$"
_DIGITS = re.compile(GEO_TARGET_ID_PATTERN)


def _organization_with_caller_role(org_id: uuid.UUID, *, user_id: Any) -> Organization | None:
    """The organization, or None, annotated with the caller's role in it as `caller_role`
    (None: not a member). One query: every request makes this read before anything else."""
    caller_role = Membership.objects.filter(organization=OuterRef("pk"), user=user_id).values(
        "role"
    )[:1]
    try:
        # `get()`, not `first()`: a primary key needs no ORDER BY (the model orders by name).
        return Organization.objects.annotate(caller_role=Subquery(caller_role)).get(pk=org_id)
    except Organization.DoesNotExist:
        return None


@dataclass(frozen=True)
class CallerScope:
    organization: Organization
    brand: Brand | None
    role: str


def parse_uuid(value: str, *, field: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        raise InvalidRequestError(f"{field} must be a UUID.", field=field) from None


def parse_geo_target_id(value: str) -> int:
    if not _DIGITS.match(str(value)):
        raise InvalidRequestError("geoTargetId must be digits.", field="geoTargetId")
    return int(value)


def caller_scope_resolve(
    *,
    user: Any,
    org_id: str,
    brand_id: str | None = None,
    extra_uuids: dict[str, str] | None = None,
    geo_target_id: str | None = None,
    write: bool,
    serenity_route: bool = False,
    require_serenity_active: bool = False,
) -> CallerScope:
    """Apply SPEC §4's request checks, in order, after authentication.

    400 (malformed ids) → 404 notFound (org) → 403 forbidden (not a member, or a reader on a
    mutating route) → 404 brandNotFound → 404 serenityNotActive (serenity routes only).
    """
    org_uuid = parse_uuid(org_id, field="orgId")
    brand_uuid = parse_uuid(brand_id, field="brandId") if brand_id is not None else None
    for field, value in (extra_uuids or {}).items():
        parse_uuid(value, field=field)
    if geo_target_id is not None:
        parse_geo_target_id(geo_target_id)

    organization = _organization_with_caller_role(org_uuid, user_id=user.pk)
    if organization is None:
        raise OrganizationNotFoundError()

    if getattr(user, "is_staff", False):
        role = Role.WRITER
    else:
        caller_role = getattr(organization, "caller_role", None)
        if caller_role is None:
            raise NotAMemberError()
        role = Role(caller_role)
    if write and role != Role.WRITER:
        raise NotAMemberError("Your role does not allow changes in this organization.")

    brand = None
    if brand_uuid is not None:
        brands = Brand.objects.filter(pk=brand_uuid, organization=organization)
        if serenity_route:
            brands = brands.exclude(status=BrandStatus.DELETED)
        try:
            brand = brands.get()
        except Brand.DoesNotExist:
            raise BrandNotFoundError() from None
        brand.organization = organization
        if require_serenity_active and not brand.is_serenity_active:
            raise SerenityNotActiveError()
    return CallerScope(organization=organization, brand=brand, role=role)


MARKET_ORDER = ("geo_target_id", "language_code")


def market_list(*, brand: Brand, cursor: str | None, limit: int) -> Page[Market]:
    """One page of the brand's live markets by geoTargetId then languageCode (unique among live
    markets). Raises `InvalidRequestError` for a cursor that is not one of this list's."""
    return keyset_page(
        # Each with its current drift (SPEC §13.1; one more query whatever the page size).
        Market.objects.filter(brand=brand, deleted_at__isnull=True).prefetch_related("drifts"),
        kind="markets",
        ordering=MARKET_ORDER,
        sort_key=lambda market: [market.geo_target_id, market.language_code],
        cursor=cursor,
        limit=limit,
    )
