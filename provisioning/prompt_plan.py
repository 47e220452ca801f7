"""Prompts, the DB-free part: the validated input, the plan that cuts a request into units, the
progress a job checkpoints, and reading Semrush's answer to a push (`provisioning.flows.prompts`
does the work)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


def text_key(text: str) -> str:
    """Duplicate detection key: the text trimmed and case-folded (stored as `Prompt.text_key`)."""
    return text.strip().casefold()


SliceKey = tuple[int, str]


@dataclass(frozen=True)
class PromptInput:
    text: str  # trimmed
    geo_target_id: int
    language_code: str  # lower case
    tags: tuple[str, ...] = ()

    @property
    def slice_key(self) -> SliceKey:
        return (self.geo_target_id, self.language_code)

    @property
    def key(self) -> str:
        return text_key(self.text)

    def as_metadata(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "geoTargetId": self.geo_target_id,
            "languageCode": self.language_code,
            "tags": list(self.tags),
        }

    @classmethod
    def from_metadata(cls, data: Mapping[str, Any]) -> PromptInput:
        return cls(
            text=data["text"],
            geo_target_id=int(data["geoTargetId"]),
            language_code=data["languageCode"],
            tags=tuple(data.get("tags") or ()),
        )


# --- Plan -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One push: the prompts of one batch that go to one market."""

    slice_key: SliceKey
    prompts: tuple[PromptInput, ...]


@dataclass(frozen=True)
class Plan:
    units: tuple[Unit, ...]
    duplicates_in_request: int
    slices: tuple[SliceKey, ...]  # every market the request names, in first-appearance order


def plan_units(prompts: Sequence[PromptInput], *, batch_size: int | None) -> Plan:
    """Deterministic: the same prompts always give the same units, so a re-run can resume at a
    unit index. Duplicates within the request (the later occurrences) are left out."""
    seen: set[tuple[SliceKey, str]] = set()
    fresh: list[PromptInput] = []
    for prompt in prompts:
        identity = (prompt.slice_key, prompt.key)
        if identity not in seen:
            seen.add(identity)
            fresh.append(prompt)
    size = batch_size or max(len(fresh), 1)
    units: list[Unit] = []
    for start in range(0, len(fresh), size):
        by_market: dict[SliceKey, list[PromptInput]] = {}
        for prompt in fresh[start : start + size]:
            by_market.setdefault(prompt.slice_key, []).append(prompt)
        units.extend(Unit(slice_key=k, prompts=tuple(v)) for k, v in by_market.items())
    slices = tuple(dict.fromkeys(p.slice_key for p in prompts))
    return Plan(units=tuple(units), duplicates_in_request=len(prompts) - len(fresh), slices=slices)


# --- Progress -------------------------------------------------------------------------------


@dataclass
class Progress:
    """Where a run stands. The job persists it (`metadata.progress`) after every unit and
    publish; duplicates within the request are not in it (the plan recomputes them)."""

    units_done: int = 0
    created: int = 0
    skipped: int = 0
    failed: int = 0
    touched: list[str] = field(default_factory=list)  # market ids pushed to, in order
    published: list[str] = field(default_factory=list)  # market ids whose publish was tried

    def as_metadata(self) -> dict[str, Any]:
        return {
            "unitsDone": self.units_done,
            "created": self.created,
            "skipped": self.skipped,
            "failed": self.failed,
            "touched": list(self.touched),
            "published": list(self.published),
        }

    @classmethod
    def from_metadata(cls, data: Mapping[str, Any] | None) -> Progress:
        data = data or {}
        return cls(
            units_done=int(data.get("unitsDone", 0)),
            created=int(data.get("created", 0)),
            skipped=int(data.get("skipped", 0)),
            failed=int(data.get("failed", 0)),
            touched=list(data.get("touched") or []),
            published=list(data.get("published") or []),
        )

    def counts(self, plan: Plan) -> dict[str, int]:
        return {
            "created": self.created,
            "skipped": self.skipped + plan.duplicates_in_request,
            "failed": self.failed,
        }


# --- Upstream answers -----------------------------------------------------------------------


def upstream_results(
    items: Sequence[Mapping[str, Any]], sent: Sequence[PromptInput]
) -> list[tuple[str | None, bool]]:
    """Each sent prompt's `(upstream id, is_new)`, mapped back by `name` from the v3 tagged
    route's `items[].{id, name, is_new}` (SPEC §12.1). A prompt the answer does not name is
    taken as added without a known id (`(None, True)`): the push was accepted."""
    by_name: dict[str, tuple[str | None, bool]] = {}
    for item in items:
        name = item.get("name")
        if not isinstance(name, str) or name in by_name:
            continue
        value = item.get("id")
        upstream_id = str(value)[:100] if value not in (None, "") else None
        by_name[name] = (upstream_id, item.get("is_new") is not False)
    return [by_name.get(prompt.text, (None, True)) for prompt in sent]
