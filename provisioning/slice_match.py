"""Which market slice an upstream project is on, matched by identities (SPEC §12.1).

A project's slice is its location and its language, as ``settings.ai`` of a project answer
carries them (``provisioning.semrush.contract``: ``location {id, name}``, ``language {id,
name}``, ``country {code, name}``). Matching goes by identity first:

- **language**: the catalogue id (``settings.ai.language.id``) equal to the slice's language
  catalogue id; only when either is unknown, the name: the slice's ISO code, its base language's
  code, or its ISO 639 English name (live, Semrush reads names back as ISO codes; the contract
  says a display name), case-insensitive;
- **location**: ``settings.ai.location.id`` equal to the slice's geo target id; only when the
  project has no location id, the country code (``settings.ai.country.code``).

A display name never overrides an identity: a project whose language id differs from the
slice's is not on the slice, whatever its name says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from serenity.slices import Slice


@dataclass(frozen=True)
class ProjectSlice:
    """What a project answer says of its slice (None: not said)."""

    location_id: int | None
    country_code: str | None
    language_id: str | None
    language_name: str | None


def _member(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def project_slice(project: Mapping[str, Any]) -> ProjectSlice:
    """The slice a project answer states, read defensively (any member may be missing)."""
    ai = _member(_member(project, "settings"), "ai")
    location = _member(ai, "location").get("id", project.get("location_id"))
    language = _member(ai, "language")
    return ProjectSlice(
        location_id=int(location)
        if isinstance(location, int | str) and str(location).isdigit()
        else None,
        country_code=_text(_member(ai, "country").get("code")),
        language_id=_text(language.get("id")),
        language_name=_text(language.get("name")),
    )


def location_matches(stated: ProjectSlice, slice_: Slice) -> bool:
    """By location id; by country code only when the project states no location id."""
    if stated.location_id is not None:
        return stated.location_id == slice_.geo_target_id
    return stated.country_code is not None and stated.country_code.upper() == slice_.country


def language_matches(stated: ProjectSlice, slice_: Slice, language_id: str | None) -> bool:
    """By catalogue id when both are known; else by name (ISO code or English name)."""
    if stated.language_id is not None and language_id is not None:
        return stated.language_id == language_id
    if stated.language_name is None:
        return False
    names = {slice_.language_code, slice_.base_language, (slice_.language_name or "").lower()}
    return stated.language_name.lower() in names


def project_on_slice(project: Mapping[str, Any], slice_: Slice, *, language_id: str | None) -> bool:
    """Whether the project answer is on `slice_`, whose language's catalogue id is
    `language_id` (None: not known, the name decides)."""
    stated = project_slice(project)
    return location_matches(stated, slice_) and language_matches(stated, slice_, language_id)
