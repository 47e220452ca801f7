"""Helpers for chain tests: create brands through the API, compare sync and async answers."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import Caller

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def brands_path(caller: Caller) -> str:
    return f"/v2/orgs/{caller.org.id}/brands"


def serenity_path(caller: Caller, brand_id: str) -> str:
    return f"{brands_path(caller)}/{brand_id}/serenity"


def create_brand(caller: Caller, name: str, **extra: Any) -> dict[str, Any]:
    body = {"name": name, "baseUrl": f"https://{name.lower().replace(' ', '-')}.example", **extra}
    response = caller.post(brands_path(caller), body)
    assert response.status_code in (201, 202), response.json()
    return response.json()


def start_async_brand_with_market(caller: Caller, **extra: Any) -> dict[str, Any]:
    """POST an async brand create with a US/en market ("Alpha"); assert the 202; its body."""
    response = caller.post(
        brands_path(caller),
        {
            "name": "Alpha",
            "baseUrl": "https://a.example",
            "async": True,
            "semrushMarket": {"market": "US", "languageCode": "en"},
            **extra,
        },
    )
    assert response.status_code == 202, response.json()
    return dict(response.json())


def without_ids(value: Any) -> Any:
    """Replace UUIDs (and upstream ids) so that two runs on different brands compare equal."""
    if isinstance(value, dict):
        return {
            k: ("<id>" if k in {"brandId", "workspaceId", "projectId", "id"} else without_ids(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    if isinstance(value, str):
        return UUID_RE.sub("<id>", value)
    return value
