"""The upstream language catalogue, cached (SPEC §4 languages route, §3 language validation)."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache

from provisioning.semrush import SemrushClient, SemrushError
from provisioning.upstream import client_for_org, translate_upstream
from serenity.models import Organization
from serenity.slices import language_name

_CACHE_KEY = "serenity:semrush:languages:v1"


def languages_catalogue(*, client: SemrushClient) -> list[dict[str, str]]:
    """`[{id, name}]` from upstream, cached for SEMRUSH_LANGUAGES_CACHE_SECONDS."""
    cached = cache.get(_CACHE_KEY)
    if cached is not None:
        return list(cached)
    try:
        items = client.list_languages()
    except SemrushError as exc:
        raise translate_upstream(exc) from exc
    catalogue = [{"id": str(i["id"]), "name": str(i["name"])} for i in items if "id" in i]
    cache.set(_CACHE_KEY, catalogue, timeout=settings.SEMRUSH_LANGUAGES_CACHE_SECONDS)
    return catalogue


def catalogue_language_id(catalogue: list[dict[str, str]], language_code: str) -> str | None:
    """Match an ISO code to a catalogue entry by its ISO 639 English name."""
    name = language_name(language_code)
    if name is None:
        return None
    for item in catalogue:
        if item["name"].strip().lower() == name.lower():
            return item["id"]
    return None


def catalogue_code(name: str) -> str | None:
    import pycountry

    record = pycountry.languages.get(name=name)
    if record is None:
        return None
    return getattr(record, "alpha_2", None) or getattr(record, "alpha_3", None)


def languages_list(*, organization: Organization) -> list[dict[str, str]]:
    """The languages route: `[{id, code}]` of the catalogue entries with an ISO code."""
    client = client_for_org(organization)
    items = []
    for entry in languages_catalogue(client=client):
        code = catalogue_code(entry["name"])
        if code:
            items.append({"id": entry["id"], "code": code})
    return items
