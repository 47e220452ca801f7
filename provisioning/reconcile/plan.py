"""The plan (SPEC §13.1): read Semrush's listings and compare them with the record, with no
upstream write.

What is compared: a brand `active` with its workspace (sub-workspace mode, no provisioning work
in flight on it), against the parent's family (listed once per reconciliation: the workspace is
there, its status is not terminal); and each of its markets that is `live`,
`live_with_unpublished_updates` or `publish_failed` with a project, against its workspace's
project list (one listing per brand, which carries `publish_status`, `domain` and
`settings.ai.primary_url`: never a read per project).

A workspace absent from the family is confirmed by its own listing (Semrush answers 403 for a
workspace it lost): the family was read when the reconciliation began, and a brand promoted
since is absent from it without being gone. A terminal workspace is not listed (its projects
cannot be used).

`brand_compare` is the comparison alone (no I/O), `brand_read` the reads of one brand.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provisioning.family import Readiness, classify_status
from provisioning.flows.common import default_brand_domain
from provisioning.reconcile.models import DriftAction, DriftKind
from provisioning.semrush import SemrushClient
from provisioning.semrush.errors import SemrushGoneError
from provisioning.slice_match import project_on_slice
from serenity.models import Brand, Market, MarketStatus
from serenity.slices import Slice, slice_from_ids

# The record's statuses whose project is compared; of those, the ones that say "live".
COMPARED = frozenset(
    {
        MarketStatus.LIVE,
        MarketStatus.LIVE_WITH_UNPUBLISHED_UPDATES,
        MarketStatus.PUBLISH_FAILED,
    }
)
SAID_LIVE = frozenset({MarketStatus.LIVE, MarketStatus.LIVE_WITH_UNPUBLISHED_UPDATES})
UPSTREAM_LIVE = frozenset({"live", "live_with_unpublished_updates"})

# A repair's own calls (SPEC §13.1; confirm reads come on top). A workspace: the family listing
# to adopt, the create, the first status read; its markets are then each a project's.
WORKSPACE_CALLS = 3
PROJECT_CALLS = 4  # one listing to adopt, create, tracked URL, publish
PUBLISH_CALLS = 1
TRACKED_URL_CALLS = 2
# Prompts go back to Semrush in batches of this many (the v3 tagged route).
PROMPT_BATCH = 100


@dataclass(frozen=True)
class Found:
    """One drift: its kind, the action that would mend it and that action's upstream calls.
    `market`: the market it is on (None: the brand's workspace, or an unexpected project);
    `slice`: the market's, or the unexpected project's as upstream lists it; `adoptable`: a
    project on the market's slice is in the workspace (its repair adopts it, so the prompts
    Semrush may hold keep their tags)."""

    kind: DriftKind
    action: DriftAction
    planned_calls: int
    market: Market | None = None
    project_id: str | None = None
    slice: dict[str, Any] | None = None
    adoptable: bool = False


@dataclass(frozen=True)
class Upstream:
    """What Semrush showed of one brand: its workspace's status (None: gone) and its project
    list (None: not listed, the workspace being gone or terminal)."""

    workspace_status: str | None
    projects: list[dict[str, Any]] | None


def brand_read(
    *, client: SemrushClient, brand: Brand, family: Mapping[str, str | None]
) -> Upstream:
    """One brand's reads: none beyond the family for a terminal workspace, else its project
    list (one call; pages past 100 projects follow). Raises SemrushError other than the
    workspace gone."""
    workspace_id = str(brand.semrush_sub_workspace_id)
    status = family.get(workspace_id)
    if status is not None and classify_status(status) is Readiness.TERMINAL:
        return Upstream(workspace_status=status, projects=None)
    try:
        projects = client.list_projects(workspace_id=workspace_id, owned=True)
    except SemrushGoneError:
        return Upstream(workspace_status=None, projects=None)
    return Upstream(workspace_status=status or "created", projects=projects)


def brand_compare(
    *,
    brand: Brand,
    markets: Sequence[Market],
    upstream: Upstream,
    prompts: Mapping[Any, int],
    language_ids: Mapping[str, str | None] | None = None,
) -> list[Found]:
    """The drift of one brand (`markets`: its markets that are not deleted; `prompts`: the
    stored prompts per market id, for the re-push's batches)."""
    compared = [m for m in markets if m.status in COMPARED and m.semrush_project_id]
    if upstream.workspace_status is None or upstream.projects is None:
        kind = (
            DriftKind.WORKSPACE_GONE
            if upstream.workspace_status is None
            else DriftKind.WORKSPACE_FAILED
        )
        found = [Found(kind, DriftAction.REPROVISION_WORKSPACE, WORKSPACE_CALLS)]
        # Its markets' projects are lost with it: each is made again, as a project gone.
        found += [_project_gone(m, prompts, adoptable=False) for m in compared]
        return found
    by_id = {str(p.get("id")): p for p in upstream.projects}
    found = []
    for market in compared:
        project = by_id.get(str(market.semrush_project_id))
        if project is None:
            found.append(
                _project_gone(
                    market,
                    prompts,
                    adoptable=_slice_taken(market, upstream.projects, language_ids or {}),
                )
            )
            continue
        drift = _project_drift(brand, market, project)
        if drift is not None:
            found.append(drift)
    recorded = {str(m.semrush_project_id) for m in markets if m.semrush_project_id}
    for project_id, project in by_id.items():
        if project_id not in recorded:
            found.append(
                Found(
                    DriftKind.UNEXPECTED_PROJECT,
                    DriftAction.REPORT_ONLY,
                    0,
                    project_id=project_id,
                    slice=_listed_slice(project),
                )
            )
    return found


def market_slice(market: Market) -> dict[str, Any]:
    """A market's `{market, languageCode}` as the API names it."""
    slice_ = _slice_of(market)
    country = slice_.country if slice_ is not None else str(market.geo_target_id)
    return {"market": country, "languageCode": market.language_code}


def _slice_of(market: Market) -> Slice | None:
    return slice_from_ids(geo_target_id=market.geo_target_id, language_code=market.language_code)


def _project_gone(market: Market, prompts: Mapping[Any, int], *, adoptable: bool) -> Found:
    batches = math.ceil(prompts.get(market.pk, 0) / PROMPT_BATCH)
    return Found(
        DriftKind.PROJECT_GONE,
        DriftAction.RECREATE_PROJECT,
        PROJECT_CALLS + batches,
        market=market,
        project_id=market.semrush_project_id,
        slice=market_slice(market),
        adoptable=adoptable,
    )


def _project_drift(brand: Brand, market: Market, project: Mapping[str, Any]) -> Found | None:
    """A listed project's drift: its tracked URL or domain first (its repair publishes too),
    then its publish status while the record says live."""
    if _tracked_url_changed(brand, project):
        return Found(
            DriftKind.TRACKED_URL_CHANGED,
            DriftAction.SET_TRACKED_URL,
            TRACKED_URL_CALLS,
            market=market,
            project_id=market.semrush_project_id,
            slice=market_slice(market),
        )
    status = str(project.get("publish_status") or "").strip().lower()
    if market.status in SAID_LIVE and status not in UPSTREAM_LIVE and status != "publishing":
        return Found(
            DriftKind.PROJECT_NOT_LIVE,
            DriftAction.PUBLISH,
            PUBLISH_CALLS,
            market=market,
            project_id=market.semrush_project_id,
            slice=market_slice(market),
        )
    return None


def _tracked_url_changed(brand: Brand, project: Mapping[str, Any]) -> bool:
    """The project's `settings.ai.primary_url` is not the brand's `baseUrl` (the service sets
    it), or its `domain` is not the `baseUrl`'s host (a market made with a `brandDomain` of its
    own is compared with that host too: the record keeps no other)."""
    if not brand.base_url:
        return False
    settings_ai = (project.get("settings") or {}).get("ai") or {}
    primary_url = settings_ai.get("primary_url")
    if primary_url is not None and _url_key(str(primary_url)) != _url_key(brand.base_url):
        return True
    domain = project.get("domain")
    expected = default_brand_domain(brand.base_url)
    return bool(domain) and bool(expected) and str(domain).lower().removeprefix("www.") != expected


def _url_key(url: str) -> str:
    return url.strip().rstrip("/").lower()


def _slice_taken(
    market: Market, projects: Sequence[Mapping[str, Any]], language_ids: Mapping[str, str | None]
) -> bool:
    slice_ = _slice_of(market)
    if slice_ is None:
        return False
    language_id = language_ids.get(market.language_code)
    return any(project_on_slice(p, slice_, language_id=language_id) for p in projects)


def _listed_slice(project: Mapping[str, Any]) -> dict[str, Any] | None:
    """An unexpected project's country and language as upstream lists them (or None)."""
    ai = (project.get("settings") or {}).get("ai") or {}
    country = (ai.get("country") or {}).get("code")
    language = (ai.get("language") or {}).get("name")
    if not country and not language:
        return None
    return {"market": str(country or "").upper() or None, "languageCode": language}
