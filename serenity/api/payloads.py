"""Response bodies (camelCase payloads of SPEC §3)."""

from __future__ import annotations

from typing import Any

from provisioning.selectors import brand_provisioning_state
from serenity.models import Brand, Market
from serenity.slices import country_for_geo_target_id


def _iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def brand_payload(brand: Brand) -> dict[str, Any]:
    state = brand_provisioning_state(brand)
    return {
        "id": str(brand.id),
        "organizationId": str(brand.organization_id),
        "name": brand.name,
        "status": brand.status,
        "baseUrl": brand.base_url,
        "urls": list(brand.urls or []),
        "aliases": list(brand.aliases or []),
        "serenityEnabled": brand.serenity_enabled,
        "semrushSubWorkspaceId": brand.semrush_sub_workspace_id,
        "semrushProvisioningStatus": state.status,
        "semrushProvisioningError": state.error,
        "createdAt": _iso(brand.created_at),
        "updatedAt": _iso(brand.updated_at),
    }


def market_payload(market: Market) -> dict[str, Any]:
    return {
        "brandId": str(market.brand_id),
        "market": country_for_geo_target_id(market.geo_target_id),
        "geoTargetId": market.geo_target_id,
        "languageCode": market.language_code,
        "name": market.name,
        "status": market.status,
        "semrushProjectId": market.semrush_project_id,
        "workspaceId": market.workspace_id,
        "createdAt": _iso(market.created_at),
        "updatedAt": _iso(market.updated_at),
    }
