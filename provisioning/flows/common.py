"""What several operations share: the market plan, its resolution against the upstream language
catalogue, a chained step's stand-down, and the checks every flow makes first."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from jobs.runner import StepRun
from kernel import context
from kernel.errors import DomainError, InvalidRequestError
from provisioning import chain
from provisioning.catalogue import catalogue_language_id, languages_catalogue
from provisioning.exceptions import (
    NoParentWorkspaceError,
    SubworkspaceGoneError,
)
from provisioning.markets import MarketRequest, market_discard_unrecorded, market_provision
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.outcome import MarketEnd, MarketWrite, Outcome
from provisioning.semrush import SemrushClient
from provisioning.upstream import client_for_org
from provisioning.workspace import workspace_gone_heal
from serenity.exceptions import UnknownLanguageError
from serenity.models import Brand, BrandStatus, Market, MarketStatus, Organization
from serenity.slices import Slice, slice_from_ids


@dataclass(frozen=True)
class MarketPlan:
    """One market to create: its slice and name, and what its project tracks (`brand_names`
    and `brand_domain`; None: the brand's name and aliases, and the host of its `baseUrl`)."""

    slice: Slice
    name: str | None = None
    brand_names: list[str] | None = None
    brand_domain: str | None = None

    def as_metadata(self) -> dict[str, Any]:
        """What a chained job stores to run the plan later (no secrets, ids and codes only)."""
        return {
            "market": self.slice.country,
            "geoTargetId": self.slice.geo_target_id,
            "languageCode": self.slice.language_code,
            "name": self.name,
            "brandNames": self.brand_names,
            "brandDomain": self.brand_domain,
        }

    @classmethod
    def from_metadata(cls, meta: dict[str, Any]) -> MarketPlan:
        slice_ = slice_from_ids(
            geo_target_id=meta["geoTargetId"], language_code=meta["languageCode"]
        )
        assert slice_ is not None  # validated before the job was written
        return cls(
            slice=slice_,
            name=meta.get("name"),
            brand_names=meta.get("brandNames"),
            brand_domain=meta.get("brandDomain"),
        )


def default_brand_names(brand: Brand) -> list[str]:
    """The brand's name and aliases, trimmed, without case-insensitive duplicates."""
    seen: set[str] = set()
    names = []
    for name in [brand.name, *(brand.aliases or [])]:
        key = name.strip().lower()
        if key and key not in seen:
            seen.add(key)
            names.append(name.strip())
    return names


def default_brand_domain(base_url: str | None) -> str:
    """The host of `base_url` without a leading `www.` (SPEC §7)."""
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    return host.removeprefix("www.")


def market_request_for(*, client: SemrushClient, brand: Brand, plan: MarketPlan) -> MarketRequest:
    """The plan resolved: its language against the upstream catalogue (400 unknownLanguage),
    its brand names and domain defaulted from the brand."""
    language_id = catalogue_language_id(
        languages_catalogue(client=client), plan.slice.language_code
    )
    if language_id is None:
        raise UnknownLanguageError(
            f"languageCode: {plan.slice.language_code} is not in the upstream catalogue.",
            field="languageCode",
        )
    return MarketRequest(
        slice=plan.slice,
        name=plan.name,
        brand_names=plan.brand_names or default_brand_names(brand),
        brand_domain=plan.brand_domain or default_brand_domain(brand.base_url),
        language_id=language_id,
    )


def market_provision_planned(
    *,
    client: SemrushClient,
    brand: Brand,
    plan: MarketPlan,
    reservation: Market,
    owner: uuid.UUID,
    workspace_id: str,
    owned_workspace: bool,
    **options: Any,
) -> Outcome:
    """Resolve the plan, then create or resume its project in `workspace_id` on the existing
    reservation (`markets.market_provision`, whose `options` pass through). A refusal before
    any upstream write releases the reservation. The Outcome carries the row's final write,
    not committed (`market_writes.market_writes_commit`)."""
    try:
        request = market_request_for(client=client, brand=brand, plan=plan)
    except DomainError as error:
        release = MarketWrite(
            market_id=reservation.pk,
            owner=owner,
            end=MarketEnd.RELEASED,
            project_id=None,
            workspace_id=workspace_id,
            owned_workspace=owned_workspace,
        )
        return replace(Outcome.from_error(error), market_writes=(release,))
    outcome = market_provision(
        client=client,
        brand=brand,
        market=reservation,
        owner=owner,
        workspace_id=workspace_id,
        request=request,
        owned_workspace=owned_workspace,
        **options,
    )
    return healed_if_gone(
        outcome,
        client=client,
        brand=brand,
        workspace_id=workspace_id,
        owned_workspace=owned_workspace,
    )


def healed_if_gone(
    outcome: Outcome,
    *,
    client: SemrushClient,
    brand: Brand,
    workspace_id: str,
    owned_workspace: bool,
) -> Outcome:
    """A project call in the brand's own workspace answered 403 (`subworkspaceGone`): heal as
    a status read that meets it does (SPEC §10.2, `workspace_gone_heal`), and answer with the
    error the heal returns (`subworkspaceGone` once confirmed, else what the confirmation met),
    with the outcome's market writes. Any other outcome is returned as it is."""
    if not owned_workspace or outcome.body.get("error") != SubworkspaceGoneError.code:
        return outcome
    healed = workspace_gone_heal(
        client=client,
        brand_id=brand.pk,
        workspace_id=workspace_id,
        parent_id=brand.organization.semrush_parent_workspace_id,
    )
    return replace(Outcome.from_error(healed), market_writes=outcome.market_writes)


def require_parent(organization: Organization) -> str:
    if not organization.semrush_parent_workspace_id:
        raise NoParentWorkspaceError()
    return organization.semrush_parent_workspace_id


def check_market_cap(brand: Brand, *, adding: int = 1, live_count: int | None = None) -> None:
    """400 when the brand would have more than SERENITY_MAX_ACTIVATE_MARKETS markets."""
    live = (
        Market.objects.filter(brand=brand, deleted_at__isnull=True).count()
        if live_count is None
        else live_count
    )
    if live + adding > settings.SERENITY_MAX_ACTIVATE_MARKETS:
        raise InvalidRequestError(
            f"market: a brand has at most {settings.SERENITY_MAX_ACTIVATE_MARKETS} markets.",
            field="market",
        )


@dataclass(frozen=True)
class Chained:
    """A chained step's inputs, checked: the attempt (pending, promoted), its brand (pending or
    active, pointing at the promoted workspace) and that workspace."""

    attempt: ProvisioningAttempt
    brand: Brand
    workspace_id: str


def chained_preflight(run: StepRun) -> Chained | chain.StoodDown:
    """Re-check before touching Semrush (SPEC §6.3); otherwise the step stands down."""
    attempt = chain.attempt_of(run)
    if attempt is None or attempt.status != AttemptStatus.PENDING or not attempt.workspace_promoted:
        return chain.StoodDown(attempt)
    context.bind(attempt_id=attempt.id)
    brand = attempt.brand
    if (
        brand.status not in (BrandStatus.PENDING, BrandStatus.ACTIVE)
        or brand.semrush_sub_workspace_id is None
        or brand.semrush_sub_workspace_id != attempt.candidate_workspace_id
    ):
        return chain.StoodDown(attempt)
    return Chained(attempt=attempt, brand=brand, workspace_id=brand.semrush_sub_workspace_id)


def chained_stand_down(
    run: StepRun, stood_down: chain.StoodDown, plans: list[MarketPlan]
) -> chain.Ending:
    """End a chained market step that stands down (its chain lost the brand, SPEC §6.3).

    A re-run first deletes the projects of its slices that an earlier run of it may have
    created upstream and could not record: its worker died in between, or a deactivate or
    cancel tombstoned its reservation (emptying the workspace) before the project appeared.
    Before the step's end, not after it: a permit deferred on the way re-schedules the step,
    which then stands down again and discards, where after its end nothing would run again
    and the project would be left (SPEC §7: nothing orphaned)."""
    if run.job.run_count > 1 and plans:
        _unrecorded_projects_discard(stood_down.attempt, plans)
    return chain.Ending(stood_down.attempt, stood_down)


def _unrecorded_projects_discard(
    attempt: ProvisioningAttempt | None, plans: list[MarketPlan]
) -> None:
    """`market_discard_unrecorded` in the attempt's workspace, for the slices no live work is
    creating: a project is only ever made under a `creating` reservation of its slice (taken
    before any upstream call), so a slice without one is nobody's to resume; a slice with one
    (the brand activated again meanwhile) is left to that work, which resumes its project.
    The chain's own reservations do not count: it is standing down."""
    workspace_id = attempt.candidate_workspace_id if attempt else None
    if attempt is None or not workspace_id:
        return
    creating = set(
        Market.objects.filter(
            brand_id=attempt.brand_id, status=MarketStatus.CREATING, deleted_at__isnull=True
        )
        .exclude(reserved_by=attempt.id)  # this chain's own: its ending releases them
        .values_list("geo_target_id", "language_code")
    )
    slices = [
        plan.slice
        for plan in plans
        if (plan.slice.geo_target_id, plan.slice.language_code) not in creating
    ]
    if not slices:
        return
    client = client_for_org(attempt.brand.organization, attempt_id=str(attempt.id))
    market_discard_unrecorded(
        client=client,
        workspace_id=workspace_id,
        slices=slices,
        language_ids=_catalogue_ids(client, slices),
    )


def _catalogue_ids(client: SemrushClient, slices: list[Slice]) -> dict[str, str | None]:
    """Each slice's language catalogue id, for matching projects by identity (SPEC §12.1);
    the catalogue is cached (the create step read it). Unreadable: {} (names decide)."""
    try:
        catalogue = languages_catalogue(client=client)
    except DomainError:
        return {}
    return {s.language_code: catalogue_language_id(catalogue, s.language_code) for s in slices}
