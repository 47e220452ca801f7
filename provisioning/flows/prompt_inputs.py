"""What a prompts request names (SPEC §4.5): the brand's markets a prompt may name, the
request's prompts validated against them (no upstream call), and the names that count as naming
the brand (for the intent classifier)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings

from kernel.errors import InvalidRequestError
from provisioning.flows.common import default_brand_domain
from provisioning.prompt_plan import PromptInput, SliceKey
from serenity.models import Brand, Market, MarketStatus
from serenity.slices import normalize_language


def brand_names_for(brand: Brand) -> list[str]:
    """What counts as naming the brand: its name, aliases and domain."""
    names = [brand.name, *(brand.aliases or [])]
    domain = default_brand_domain(brand.base_url)
    if domain:
        names.append(domain)
    return [name for name in names if name and name.strip()]


def prompt_markets(brand: Brand) -> dict[SliceKey, Market]:
    """The brand's markets a prompt may name: not deleted, not a `creating` reservation, and
    with a project (and the workspace it lives in)."""
    markets = (
        Market.objects.filter(
            brand=brand,
            deleted_at__isnull=True,
            semrush_project_id__isnull=False,
            workspace_id__isnull=False,
        )
        .exclude(status=MarketStatus.CREATING)
        .exclude(semrush_project_id="")
    )
    return {(m.geo_target_id, m.language_code): m for m in markets}


def prompts_validate(*, brand: Brand, prompts: Sequence[Mapping[str, Any]]) -> list[PromptInput]:
    """Every cheap check, no upstream call. `prompts` are shape-checked items
    `{text, geoTargetId, languageCode, tags?}`. Raises `InvalidRequestError` naming the field
    (`prompts[3]: no market with a project for geoTargetId 2840 / en`)."""
    limit = settings.SERENITY_MAX_PROMPTS
    if not 1 <= len(prompts) <= limit:
        raise InvalidRequestError(
            f"prompts: between 1 and {limit} prompts per request.", details={"field": "prompts"}
        )
    markets = prompt_markets(brand)
    out = []
    for index, item in enumerate(prompts):
        where = f"prompts[{index}]"
        text = str(item["text"]).strip()
        if not text:
            raise InvalidRequestError(
                f"{where}.text: must not be blank.", details={"field": f"{where}.text"}
            )
        language = normalize_language(item["languageCode"], field=f"{where}.languageCode")
        geo = int(item["geoTargetId"])
        if (geo, language) not in markets:
            raise InvalidRequestError(
                f"{where}: no market with a project for geoTargetId {geo} / {language}",
                details={"field": where},
            )
        tags = tuple(dict.fromkeys(tag.strip() for tag in item.get("tags") or () if tag.strip()))
        out.append(PromptInput(text=text, geo_target_id=geo, language_code=language, tags=tags))
    return out
