"""Endpoint flows: brand create, market create, activate, deactivate, market delete (SPEC §4).

Each flow has a sync path and an async begin. Sync paths hold a `pending` attempt for their
whole duration (the per-brand lease of §6.2). Async begins run every cheap validation, then
write the attempt, the reservation and the job chain in one transaction and answer 202; no
upstream call happens inside an async request. The chained jobs (`provisioning.steps`) call the
same functions as the sync paths (`market_provision`, `activate_markets_in_workspace`,
`brand_workspace_activate`) so that both answer the same `{status, body}`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import services as job_services
from jobs.models import AsyncJob, JobStep, JobType
from kernel.errors import DomainError, InvalidRequestError
from kernel.queries import insert_row
from provisioning import services as attempts
from provisioning.catalogue import catalogue_language_id, languages_catalogue
from provisioning.exceptions import (
    ActivationIncompleteError,
    NoParentWorkspaceError,
    ProvisioningCancelledError,
    ProvisioningIncompleteError,
    ProvisioningInProgressError,
    UpstreamError,
    WorkspaceMisconfiguredError,
)
from provisioning.lifecycle import (
    Workspace,
    client_for_org,
    empty_quietly,
    pointer_persist,
    translate_upstream,
    workspace_create_or_adopt,
    workspace_empty,
    workspace_settle,
)
from provisioning.markets import (
    MarketRequest,
    market_provision,
    market_release,
    market_reserve,
    market_slice_check,
    slice_market_in,
    slice_taken,
)
from provisioning.models import AttemptReason, AttemptStartedBy, ProvisioningAttempt
from provisioning.outcome import Outcome
from provisioning.selectors import with_latest_attempt
from provisioning.semrush import SemrushClient, SemrushError
from serenity.exceptions import (
    BaseUrlRequiredError,
    BrandExistsError,
    MarketBusyError,
    SerenityNotEnabledError,
    SliceExistsError,
    UnknownLanguageError,
)
from serenity.models import (
    Brand,
    BrandStatus,
    Market,
    MarketStatus,
    Organization,
    WorkspaceMode,
)
from serenity.slices import Slice, slice_from_ids

logger = logging.getLogger("serenity.provisioning")

PROVISIONING_FAILURES: dict[str, AttemptReason] = {
    "subworkspaceCreationFailed": AttemptReason.TERMINAL,
    "subworkspaceCreationTimeout": AttemptReason.EXHAUSTED,
    "subworkspaceGone": AttemptReason.GONE,
    "ambiguousWorkspace": AttemptReason.AMBIGUOUS,
    "workspaceNotEmpty": AttemptReason.AMBIGUOUS,
}


def reason_for(error: DomainError) -> AttemptReason:
    return PROVISIONING_FAILURES.get(error.code, AttemptReason.UPSTREAM)


# --- Inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MarketInput:
    slice: Slice
    name: str | None = None


@dataclass(frozen=True)
class BrandInput:
    name: str
    status: str | None
    base_url: str | None
    urls: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    market: MarketInput | None = None


@dataclass(frozen=True)
class Accepted:
    """An async begin's answer: the job to poll."""

    job: AsyncJob


@dataclass(frozen=True)
class BrandCreated:
    brand: Brand
    market: Market | None = None
    job: AsyncJob | None = None


def _default_brand_names(brand: Brand) -> list[str]:
    names = [brand.name, *(brand.aliases or [])]
    seen: set[str] = set()
    out = []
    for name in names:
        key = name.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(name.strip())
    return out


def default_brand_domain(base_url: str | None) -> str:
    from urllib.parse import urlsplit

    host = (urlsplit(base_url).hostname or "") if base_url else ""
    return host[4:] if host.startswith("www.") else host


def market_job_metadata(
    *, market: MarketInput, brand_names: list[str] | None, brand_domain: str | None
) -> dict[str, Any]:
    return {
        "market": market.slice.country,
        "geoTargetId": market.slice.geo_target_id,
        "languageCode": market.slice.language_code,
        "name": market.name,
        "brandNames": brand_names,
        "brandDomain": brand_domain,
    }


def market_input_from_metadata(meta: dict[str, Any]) -> MarketInput:
    slice_ = slice_from_ids(geo_target_id=meta["geoTargetId"], language_code=meta["languageCode"])
    assert slice_ is not None
    return MarketInput(slice=slice_, name=meta.get("name"))


def market_request_for(
    *,
    client: SemrushClient,
    brand: Brand,
    market: MarketInput,
    brand_names: list[str] | None,
    brand_domain: str | None,
) -> MarketRequest:
    """Resolve the language against the upstream catalogue (400 unknownLanguage)."""
    language_id = catalogue_language_id(
        languages_catalogue(client=client), market.slice.language_code
    )
    if language_id is None:
        raise UnknownLanguageError(
            f"languageCode: {market.slice.language_code} is not in the upstream catalogue."
        )
    return MarketRequest(
        slice=market.slice,
        name=market.name,
        brand_names=brand_names or _default_brand_names(brand),
        brand_domain=brand_domain or default_brand_domain(brand.base_url),
        language_id=language_id,
    )


def market_provision_reserved(
    *,
    client: SemrushClient,
    brand: Brand,
    market: MarketInput,
    reservation: Market,
    owner: uuid.UUID,
    workspace_id: str,
    brand_names: list[str] | None,
    brand_domain: str | None,
    owned_workspace: bool,
    still_valid: Callable[[], bool] | None = None,
    renew: Callable[[], object] | None = None,
    workspace_new: bool = False,
) -> Outcome | None:
    """Resolve the market's language, then create or resume its project in `workspace_id` (the
    reservation already exists). A refusal before any upstream write frees the reservation.
    In a sub-workspace (`owned_workspace`) a failed step keeps the project for a resume; in the
    parent (flat mode) a project this call created is deleted. None: cancelled meanwhile
    (see `market_provision`). Shared by the sync routes and the chained jobs."""
    try:
        request = market_request_for(
            client=client,
            brand=brand,
            market=market,
            brand_names=brand_names,
            brand_domain=brand_domain,
        )
    except DomainError as error:
        market_release(market_id=reservation.pk, owner=owner)
        return Outcome.from_error(error)
    return market_provision(
        client=client,
        brand=brand,
        market=reservation,
        owner=owner,
        workspace_id=workspace_id,
        request=request,
        owned_workspace=owned_workspace,
        delete_on_failure=not owned_workspace,
        still_valid=still_valid,
        renew=renew,
        workspace_new=workspace_new,
    )


def _require_parent(organization: Organization) -> str:
    if not organization.semrush_parent_workspace_id:
        raise NoParentWorkspaceError()
    return organization.semrush_parent_workspace_id


def _fresh_pointer(brand_id: uuid.UUID) -> str | None:
    return (
        Brand.objects.filter(pk=brand_id).values_list("semrush_sub_workspace_id", flat=True).first()
    )


def _check_market_cap(brand: Brand, adding: int = 1, live_count: int | None = None) -> None:
    live = (
        Market.objects.filter(brand=brand, deleted_at__isnull=True).count()
        if live_count is None
        else live_count
    )
    if live + adding > settings.SERENITY_MAX_ACTIVATE_MARKETS:
        raise InvalidRequestError(
            f"market: a brand has at most {settings.SERENITY_MAX_ACTIVATE_MARKETS} markets."
        )


# --- Brand create (§4.1) ---------------------------------------------------------------------


def brand_create(*, organization: Organization, data: BrandInput, run_async: bool) -> BrandCreated:
    """Create a brand; provision its sub-workspace when the org is a Serenity org.

    Raises BaseUrlRequiredError, SerenityNotEnabledError, InvalidRequestError, BrandExistsError,
    and (sync) the provisioning domain errors, after deleting the brand row and emptying a
    workspace this request created.
    """
    if data.status == BrandStatus.ACTIVE and not data.base_url:
        raise BaseUrlRequiredError()
    is_draft = data.status == BrandStatus.PENDING
    if data.market is not None:
        if not organization.is_serenity_org:
            raise SerenityNotEnabledError()
        if is_draft:
            raise InvalidRequestError("semrushMarket: a draft brand cannot have a market.")
        if not data.base_url:
            raise BaseUrlRequiredError("baseUrl is required to create a market.")
    stored_status = BrandStatus.PENDING if is_draft or not data.base_url else BrandStatus.ACTIVE
    provisions = organization.is_serenity_org and not is_draft
    flat = organization.workspace_mode == WorkspaceMode.FLAT

    if not provisions or (flat and data.market is None):
        return BrandCreated(
            brand=_brand_insert(organization=organization, data=data, status=stored_status)
        )
    if flat:
        assert data.market is not None
        if run_async:
            # One transaction: the row exists with its job and reservation, or not at all.
            with transaction.atomic():
                brand = _brand_insert(organization=organization, data=data, status=stored_status)
                accepted = market_create_flat_begin(
                    brand=brand, market=data.market, brand_names=None, brand_domain=None
                )
            # The row as inserted (no attempt in flat mode): the 202 renders it without a read.
            return BrandCreated(brand=with_latest_attempt(brand, None), job=accepted.job)
        brand = _brand_insert(organization=organization, data=data, status=stored_status)
        try:
            outcome = market_create_flat_sync(
                brand=brand, market=data.market, brand_names=None, brand_domain=None
            )
        except Exception:
            Brand.objects.filter(pk=brand.pk).delete()
            raise
        if outcome.status >= 400:
            Brand.objects.filter(pk=brand.pk).delete()
            raise DomainError(
                outcome.body["message"], code=outcome.body["error"], http_status=outcome.status
            )
        return BrandCreated(
            brand=brand,
            market=Market.objects.get(
                brand=brand,
                geo_target_id=data.market.slice.geo_target_id,
                language_code=data.market.slice.language_code,
                deleted_at__isnull=True,
            ),
        )

    job: AsyncJob | None = None
    with transaction.atomic():
        brand = _brand_insert(organization=organization, data=data, status=stored_status)
        # The brand is new: no guard is needed, and nothing can conflict with its attempt or
        # its reservation, so they are plain inserts (no savepoints).
        root_id = uuid.uuid4() if run_async else None
        attempt = attempts.attempt_insert_unguarded(
            brand_id=brand.pk, started_by=AttemptStartedBy.CREATE_BRAND, job_id=root_id
        )
        market = None
        if data.market is not None:
            market = market_reserve(
                brand=brand,
                slice_=data.market.slice,
                owner=attempt.id,
                name=data.market.name,
                live_markets=[],
                savepoint=False,
            )
        if root_id is not None:
            job = _chain_create(
                brand=brand,
                root_id=root_id,
                attempt=attempt,
                market=market,
                chained=(
                    (
                        JobStep.CREATE_MARKET,
                        market_job_metadata(
                            market=data.market, brand_names=None, brand_domain=None
                        ),
                    )
                    if data.market is not None
                    else None
                ),
            )
    if job is not None:
        # The row as inserted, with the attempt it began: the 202 renders it without a read.
        return BrandCreated(brand=with_latest_attempt(brand, attempt), job=job)
    return _brand_create_sync(brand=brand, attempt=attempt, market_input=data.market, market=market)


def _brand_insert(*, organization: Organization, data: BrandInput, status: str) -> Brand:
    # No savepoint: inside a caller's transaction the name conflict ends that transaction too
    # (BrandExistsError propagates out of it), so a savepoint would only cost two statements.
    try:
        with transaction.atomic(savepoint=False):
            return insert_row(
                Brand,
                organization=organization,
                name=data.name.strip(),
                workspace_mode=organization.workspace_mode,
                status=status,
                base_url=data.base_url,
                urls=data.urls,
                aliases=data.aliases,
            )
    except IntegrityError:
        raise BrandExistsError() from None


def _chain_create(
    *,
    brand: Brand,
    root_id: uuid.UUID,
    attempt: ProvisioningAttempt,
    market: Market | None,
    chained: tuple[JobStep, dict[str, Any]] | None,
) -> AsyncJob:
    """The provision-workspace job and its chained job. Steps read their inputs from the
    database: every row carries the attempt (and the reservation)."""
    refs: dict[str, Any] = {"attemptId": str(attempt.id)}
    if market is not None:
        refs["marketId"] = str(market.pk)
    return job_services.job_chain_create(
        organization_id=brand.organization_id,
        brand_id=brand.pk,
        job_type=JobType.PROVISION_WORKSPACE,
        root_id=root_id,
        first=job_services.StepSpec(JobStep.PROVISION_WORKSPACE, refs),
        then=job_services.StepSpec(chained[0], {**chained[1], **refs}) if chained else None,
    )


def _brand_create_sync(
    *,
    brand: Brand,
    attempt: ProvisioningAttempt,
    market_input: MarketInput | None,
    market: Market | None,
) -> BrandCreated:
    organization = brand.organization
    parent_id = _require_parent(organization)
    workspace: Workspace | None = None
    client: SemrushClient | None = None
    try:
        client = client_for_org(organization, brand_id=str(brand.pk), attempt_id=str(attempt.id))
        # The language is resolved before any workspace exists: an unknown one is a 400 that
        # must not leave an empty sub-workspace behind.
        request = (
            market_request_for(
                client=client, brand=brand, market=market_input, brand_names=None, brand_domain=None
            )
            if market_input is not None
            else None
        )
        workspace = workspace_create_or_adopt(client=client, brand=brand, parent_id=parent_id)
        attempts_update_candidate(attempt=attempt, workspace=workspace)
        if market_input is not None:
            workspace_settle(client=client, workspace_id=workspace.id)
        if not pointer_persist(brand_id=brand.pk, workspace_id=workspace.id):
            raise UpstreamError("The workspace could not be recorded for this brand.")
        attempt_mark_promoted(attempt=attempt)
        if request is not None and market is not None:
            outcome = market_provision(
                client=client,
                brand=brand,
                market=market,
                owner=attempt.id,
                workspace_id=workspace.id,
                request=request,
                owned_workspace=True,
                delete_on_failure=not workspace.freshly_created,
            )
            if outcome is None or outcome.status >= 400:
                body = outcome.body if outcome else {}
                raise DomainError(
                    body.get("message"),
                    code=body.get("error", "serenityUpstreamError"),
                    http_status=outcome.status if outcome else 502,
                )
    except Exception:
        # Any failure (not only a domain error): a row left behind would keep a `pending`
        # attempt and block the name until the stale sweep.
        if client is not None and workspace is not None and workspace.freshly_created:
            empty_quietly(client=client, workspace_id=workspace.id, parent_id=parent_id)
        # The row goes with its attempt and reservation (cascade); the name is free again.
        Brand.objects.filter(pk=brand.pk).delete()
        raise
    attempts.attempt_finish(attempt=attempt, ok=True)
    brand.refresh_from_db()
    fresh_market = Market.objects.get(pk=market.pk) if market is not None else None
    return BrandCreated(brand=brand, market=fresh_market)


def attempts_update_candidate(*, attempt: ProvisioningAttempt | None, workspace: Workspace) -> None:
    if attempt is None:
        return
    from provisioning import states

    states.update_pending(
        attempt_id=attempt.id,
        candidate_workspace_id=workspace.id,
        freshly_created=workspace.freshly_created,
    )


def attempt_mark_promoted(*, attempt: ProvisioningAttempt | None) -> None:
    """The candidate became the brand's pointer: no cleanup may ever empty it."""
    if attempt is not None:
        from provisioning import states

        states.update_pending(attempt_id=attempt.id, workspace_promoted=True)


# --- Market create (§4.2) ---------------------------------------------------------------------


def market_create(
    *,
    brand: Brand,
    market: MarketInput,
    brand_names: list[str] | None,
    brand_domain: str | None,
    run_async: bool,
) -> Outcome | Accepted:
    organization = brand.organization
    _require_parent(organization)
    if brand.workspace_mode == WorkspaceMode.FLAT:
        _check_market_cap(brand)
        if run_async:
            return market_create_flat_begin(
                brand=brand, market=market, brand_names=brand_names, brand_domain=brand_domain
            )
        return market_create_flat_sync(
            brand=brand, market=market, brand_names=brand_names, brand_domain=brand_domain
        )
    if run_async:
        return _begin_chain(
            brand=brand,
            started_by=AttemptStartedBy.CREATE_MARKET,
            require_pointer=True,
            chained=(
                JobStep.CREATE_MARKET,
                market_job_metadata(
                    market=market, brand_names=brand_names, brand_domain=brand_domain
                ),
            ),
            reserve=market,
        )
    _check_market_cap(brand)
    _refuse_without_workspace(brand)
    return _market_create_subworkspace_sync(
        brand=brand, market=market, brand_names=brand_names, brand_domain=brand_domain
    )


def _refuse_without_workspace(brand: Brand) -> str:
    """A sub-workspace brand without a workspace is refused before any upstream call; nothing
    is ever created in the parent for it (§4.2)."""
    organization = brand.organization
    pointer = _fresh_pointer(brand.pk)
    if pointer is not None and pointer == organization.semrush_parent_workspace_id:
        raise WorkspaceMisconfiguredError()
    if pointer is None:
        pending = attempts.pending_attempt_for(brand.pk)
        if pending is not None:
            raise ProvisioningInProgressError(
                details={"jobId": str(pending.job_id) if pending.job_id else None}
            )
        raise ProvisioningIncompleteError()
    return pointer


def _lock_brand(brand_id: uuid.UUID) -> None:
    """Lock the brand row until the surrounding transaction commits (the guard's lock)."""
    Brand.objects.select_for_update().filter(pk=brand_id).values_list("pk").first()


def _market_create_subworkspace_sync(
    *,
    brand: Brand,
    market: MarketInput,
    brand_names: list[str] | None,
    brand_domain: str | None,
) -> Outcome:
    """Refusals first, writing nothing: a taken slice (409 sliceExists) and other work holding
    the brand (409 semrush_provisioning_in_progress) before any upstream call, then the language
    against the (cached) catalogue. Then, in one transaction under the brand's row lock: the
    pointer is re-read, the slice re-checked, the guard inserts our attempt and the slice is
    reserved. A concurrent create of the same slice therefore meets our reservation (409
    sliceExists) rather than our attempt, and any refusal rolls back the attempt with it.
    """
    client = client_for_org(brand.organization, brand_id=str(brand.pk))
    market_slice_check(brand=brand, slice_=market.slice)
    try:
        attempts.attempt_guard_precheck(brand_id=brand.pk)
    except ProvisioningInProgressError:
        # The holder may be a create of this very slice that committed a moment ago (its
        # attempt and reservation together): the slice's answer wins, as under the lock below.
        market_slice_check(brand=brand, slice_=market.slice)
        raise
    request = market_request_for(
        client=client,
        brand=brand,
        market=market,
        brand_names=brand_names,
        brand_domain=brand_domain,
    )
    with transaction.atomic():
        _lock_brand(brand.pk)
        # Under the lock: a deactivate may have cleared the pointer since the first check.
        pointer = _refuse_without_workspace(brand)
        market_slice_check(brand=brand, slice_=market.slice)
        attempt = attempts.attempt_begin(
            brand_id=brand.pk, started_by=AttemptStartedBy.CREATE_MARKET
        )
        owner = attempt.id if attempt is not None else uuid.uuid4()
        reservation = market_reserve(
            brand=brand, slice_=market.slice, owner=owner, name=market.name
        )
    try:
        workspace_settle(client=client, workspace_id=pointer)
    except DomainError as error:
        market_release(market_id=reservation.pk, owner=owner)
        provisioning_failure = error.code in PROVISIONING_FAILURES
        attempts.attempt_finish(
            attempt=attempt,
            ok=not provisioning_failure,
            reason=reason_for(error),
            error=error.message,
        )
        raise
    except Exception:
        market_release(market_id=reservation.pk, owner=owner)
        attempts.attempt_finish(attempt=attempt, ok=False, reason=AttemptReason.UNEXPECTED)
        raise
    try:
        outcome = market_provision(
            client=client,
            brand=brand,
            market=reservation,
            owner=owner,
            workspace_id=pointer,
            request=request,
            owned_workspace=True,
            delete_on_failure=False,
        )
    except Exception:
        # Never leave the brand leased to a request that is gone (a kept reservation is
        # resumable once its owner has finished).
        attempts.attempt_finish(attempt=attempt, ok=False, reason=AttemptReason.UNEXPECTED)
        raise
    attempts.attempt_finish(attempt=attempt, ok=True)
    assert outcome is not None
    return outcome


def market_create_flat_sync(
    *,
    brand: Brand,
    market: MarketInput,
    brand_names: list[str] | None,
    brand_domain: str | None,
) -> Outcome:
    parent_id = _require_parent(brand.organization)
    owner = uuid.uuid4()
    reservation = market_reserve(brand=brand, slice_=market.slice, owner=owner, name=market.name)
    return market_create_flat_run(
        brand=brand,
        market=market,
        reservation=reservation,
        owner=owner,
        parent_id=parent_id,
        brand_names=brand_names,
        brand_domain=brand_domain,
    )


def market_create_flat_run(
    *,
    brand: Brand,
    market: MarketInput,
    reservation: Market,
    owner: uuid.UUID,
    parent_id: str,
    brand_names: list[str] | None,
    brand_domain: str | None,
    renew: Callable[[], object] | None = None,
) -> Outcome:
    try:
        # A missing configuration (503) must free the reservation too, or the slice would
        # answer sliceExists/marketBusy until the stale threshold.
        client = client_for_org(brand.organization, brand_id=str(brand.pk))
    except DomainError as error:
        market_release(market_id=reservation.pk, owner=owner)
        return Outcome.from_error(error)
    outcome = market_provision_reserved(
        client=client,
        brand=brand,
        market=market,
        reservation=reservation,
        owner=owner,
        workspace_id=parent_id,
        brand_names=brand_names,
        brand_domain=brand_domain,
        owned_workspace=False,
        renew=renew,
    )
    assert outcome is not None
    return outcome


def market_create_flat_begin(
    *,
    brand: Brand,
    market: MarketInput,
    brand_names: list[str] | None,
    brand_domain: str | None,
) -> Accepted:
    """Flat async: a `create-market` job with no provisioning step, after the refusal check."""
    with transaction.atomic():
        job = job_services.job_chain_create(
            organization_id=brand.organization_id,
            brand_id=brand.pk,
            job_type=JobType.PROVISION_WORKSPACE,
            first=job_services.StepSpec(
                JobStep.CREATE_MARKET,
                market_job_metadata(
                    market=market, brand_names=brand_names, brand_domain=brand_domain
                ),
            ),
        )
        reservation = market_reserve(
            brand=brand, slice_=market.slice, owner=job.pk, name=market.name
        )
        AsyncJob.objects.filter(pk=job.pk).update(
            metadata={**job.metadata, "marketId": str(reservation.pk), "flat": True}
        )
    return Accepted(job=job)


def _begin_chain(
    *,
    brand: Brand,
    started_by: AttemptStartedBy,
    chained: tuple[JobStep, dict[str, Any]] | None,
    reserve: MarketInput | None = None,
    require_pointer: bool = False,
) -> Accepted:
    """An async begin: guard, attempt, reservation and jobs in one short transaction
    (§6.2, §6.3), in a bounded number of queries and without any upstream call.

    Under the brand's lock, in this order: a slice that is already taken → 409 sliceExists (so
    that a create racing another create of the same slice gets the same answer in both modes);
    the market cap; a fresh pending attempt → 409 semrush_provisioning_in_progress (a stale one
    is reconciled); the pointer equal to the parent → 409 workspaceMisconfigured; no pointer
    where one is required → 409 semrush_provisioning_incomplete. The attempt's candidate is the
    pointer read under the lock.
    """
    root_id = uuid.uuid4()
    parent_id = brand.organization.semrush_parent_workspace_id
    try:
        with transaction.atomic():
            locked = attempts.brand_lock(brand_id=brand.pk)
            live: list[Market] = []
            if reserve is not None:
                live = list(Market.objects.filter(brand=brand, deleted_at__isnull=True))
                if slice_taken(slice_market_in(live, reserve.slice)):
                    raise SliceExistsError()
                _check_market_cap(brand, live_count=len(live))
            attempts.attempt_pass_guard(locked=locked)
            if locked.pointer is not None and locked.pointer == parent_id:
                raise WorkspaceMisconfiguredError()
            if require_pointer and locked.pointer is None:
                raise ProvisioningIncompleteError()
            attempt = attempts.attempt_insert(
                brand_id=brand.pk,
                started_by=started_by,
                candidate_workspace_id=locked.pointer,
                job_id=root_id,
                savepoint=False,
            )
            market = None
            if reserve is not None:
                market = market_reserve(
                    brand=brand,
                    slice_=reserve.slice,
                    owner=attempt.id,
                    name=reserve.name,
                    live_markets=live,
                    savepoint=False,
                )
            job = _chain_create(
                brand=brand, root_id=root_id, attempt=attempt, market=market, chained=chained
            )
    except IntegrityError as exc:
        # The brand's lock serializes begins, so neither insert should conflict: the attempt
        # constraint is the last line of defence, and a market row can only conflict with a
        # create of the slice that takes no guard (flat mode) committed after our read.
        if attempts.is_pending_attempt_conflict(exc):
            raise attempts.in_progress_error(brand_id=brand.pk) from None
        raise SliceExistsError() from None
    return Accepted(job=job)


# --- Activate (§4.3) ---------------------------------------------------------------------------


def activate(
    *,
    brand: Brand,
    brand_domain: str | None,
    brand_names: list[str] | None,
    markets: list[MarketInput],
    run_async: bool,
) -> Outcome | Accepted:
    organization = brand.organization
    _require_parent(organization)
    if brand.status == BrandStatus.PENDING:
        if not brand.base_url:
            raise BaseUrlRequiredError()
        branch = "A"
    elif brand_domain is None:
        branch = "B"
    else:
        branch = "C"
    if brand.workspace_mode == WorkspaceMode.FLAT:
        return _activate_flat(
            brand=brand,
            branch=branch,
            brand_domain=brand_domain,
            brand_names=brand_names,
            markets=markets,
        )
    if run_async:
        if branch == "C":
            chained = (
                JobStep.ACTIVATE_MARKETS,
                {
                    "markets": [
                        market_job_metadata(
                            market=m, brand_names=brand_names, brand_domain=brand_domain
                        )
                        for m in markets
                    ],
                    "brandNames": brand_names,
                    "brandDomain": brand_domain,
                },
            )
        else:
            chained = (JobStep.ACTIVATE_BRAND_WORKSPACE, {"wasPending": branch == "A"})  # type: ignore[dict-item]
        return _begin_chain(brand=brand, started_by=AttemptStartedBy.ACTIVATE, chained=chained)

    pointer = _fresh_pointer(brand.pk)
    if pointer is not None and pointer == organization.semrush_parent_workspace_id:
        raise WorkspaceMisconfiguredError()

    # The client first: a missing configuration (503) must not leave the brand leased.
    client = client_for_org(organization, brand_id=str(brand.pk))
    attempt = attempts.attempt_begin(brand_id=brand.pk, started_by=AttemptStartedBy.ACTIVATE)
    try:
        workspace = ensure_workspace(
            client=client, brand=brand, attempt=attempt, settle=branch == "C"
        )
    except DomainError as error:
        attempts.attempt_finish(
            attempt=attempt, ok=False, reason=reason_for(error), error=error.message
        )
        if branch == "A" and error.code not in PROVISIONING_FAILURES and error.http_status >= 500:
            return _activation_incomplete(brand)
        raise
    try:
        if branch == "C":
            return activate_markets_in_workspace(
                client=client,
                brand=brand,
                workspace_id=workspace.id,
                owner=attempt.id if attempt else uuid.uuid4(),
                markets=markets,
                brand_names=brand_names,
                brand_domain=brand_domain,
            )
        return brand_workspace_activate(
            brand=brand, workspace_id=workspace.id, was_pending=branch == "A"
        )
    finally:
        attempts.attempt_finish(attempt=attempt, ok=True)


def ensure_workspace(
    *, client: SemrushClient, brand: Brand, attempt: ProvisioningAttempt | None, settle: bool
) -> Workspace:
    """The brand's workspace: the pointer if any (skip mode: no status read), else
    create-or-adopt and persist the pointer conditionally. With `settle`, poll until ready.
    A workspace this call created is emptied if a later step of this call fails."""
    parent_id = _require_parent(brand.organization)
    pointer = _fresh_pointer(brand.pk)
    if pointer is not None:
        workspace = Workspace(id=pointer, freshly_created=False)
    else:
        workspace = workspace_create_or_adopt(client=client, brand=brand, parent_id=parent_id)
        attempts_update_candidate(attempt=attempt, workspace=workspace)
    try:
        if settle:
            workspace_settle(client=client, workspace_id=workspace.id)
        if pointer is None:
            if not pointer_persist(brand_id=brand.pk, workspace_id=workspace.id):
                raise UpstreamError("The workspace could not be recorded for this brand.")
            attempt_mark_promoted(attempt=attempt)
    except DomainError:
        if workspace.freshly_created:
            empty_quietly(client=client, workspace_id=workspace.id, parent_id=parent_id)
        raise
    return workspace


def brand_workspace_activate(
    *, brand: Brand, workspace_id: str | None, was_pending: bool
) -> Outcome:
    """Flip the brand `active`, conditional on the pointer still being this workspace and the
    brand pending/active. A: 200 or 502 serenityActivationIncomplete; B: 200 or 207."""
    query = Brand.objects.filter(pk=brand.pk, status__in=(BrandStatus.PENDING, BrandStatus.ACTIVE))
    if workspace_id is not None:
        query = query.filter(semrush_sub_workspace_id=workspace_id)
    changed = query.update(status=BrandStatus.ACTIVE, updated_at=timezone.now())
    if changed == 1:
        return Outcome(200, {"brandId": str(brand.pk), "status": "active", "markets": []})
    if was_pending:
        return _activation_incomplete(brand)
    return Outcome(207, {"brandId": str(brand.pk), "status": "active", "markets": []})


def _activation_incomplete(brand: Brand) -> Outcome:
    error = ActivationIncompleteError()
    return Outcome(
        502, {"brandId": str(brand.pk), "status": "pending", **error.as_body(), "markets": []}
    )


def activate_markets_in_workspace(
    *,
    client: SemrushClient,
    brand: Brand,
    workspace_id: str,
    owner: uuid.UUID,
    markets: list[MarketInput],
    brand_names: list[str] | None,
    brand_domain: str | None,
    owned_workspace: bool = True,
    still_valid: Callable[[], bool] | None = None,
    renew: Callable[[], object] | None = None,
) -> Outcome:
    """Branch C: per market create-or-resume + publish; one market's failure is its entry's.
    200 when every market is live (created now or already), else 207."""
    entries: list[dict[str, Any]] = []
    for market in markets:
        entry_outcome = _activate_one_market(
            client=client,
            brand=brand,
            workspace_id=workspace_id,
            owner=owner,
            market=market,
            brand_names=brand_names,
            brand_domain=brand_domain,
            owned_workspace=owned_workspace,
            still_valid=still_valid,
            renew=renew,
        )
        entries.append(
            {
                "market": market.slice.country,
                "languageCode": market.slice.language_code,
                "status": entry_outcome.status,
                "body": entry_outcome.body,
            }
        )
    all_live = all(
        e["status"] == 201 or (e["status"] == 409 and e["body"].get("error") == "sliceExists")
        for e in entries
    )
    fresh = Brand.objects.get(pk=brand.pk)
    return Outcome(
        200 if all_live else 207,
        {
            "brandId": str(brand.pk),
            "status": fresh.status,
            "baseUrl": fresh.base_url,
            "markets": entries,
        },
    )


def _activate_one_market(
    *,
    client: SemrushClient,
    brand: Brand,
    workspace_id: str,
    owner: uuid.UUID,
    market: MarketInput,
    brand_names: list[str] | None,
    brand_domain: str | None,
    owned_workspace: bool,
    still_valid: Callable[[], bool] | None,
    renew: Callable[[], object] | None,
) -> Outcome:
    try:
        reservation = market_reserve(
            brand=brand, slice_=market.slice, owner=owner, name=market.name
        )
    except DomainError as error:
        return Outcome.from_error(error)
    outcome = market_provision_reserved(
        client=client,
        brand=brand,
        market=market,
        reservation=reservation,
        owner=owner,
        workspace_id=workspace_id,
        brand_names=brand_names,
        brand_domain=brand_domain,
        owned_workspace=owned_workspace,
        still_valid=still_valid,
        renew=renew,
    )
    if outcome is None:
        # A deactivate or cancel won before this market's final write: its project is gone.
        return Outcome.from_error(ProvisioningCancelledError())
    return outcome


def _activate_flat(
    *,
    brand: Brand,
    branch: str,
    brand_domain: str | None,
    brand_names: list[str] | None,
    markets: list[MarketInput],
) -> Outcome:
    if branch in ("A", "B"):
        return brand_workspace_activate(brand=brand, workspace_id=None, was_pending=branch == "A")
    parent_id = _require_parent(brand.organization)
    client = client_for_org(brand.organization, brand_id=str(brand.pk))
    return activate_markets_in_workspace(
        client=client,
        brand=brand,
        workspace_id=parent_id,
        owner=uuid.uuid4(),
        markets=markets,
        brand_names=brand_names,
        brand_domain=brand_domain,
        owned_workspace=False,
    )


# --- Deactivate (§4.4) -------------------------------------------------------------------------


def deactivate(*, brand: Brand) -> Outcome:
    """Cancel-first, then lease, then re-read the pointer, decommission, clear, tombstone.

    A live *sync* attempt (a request in flight, no job) is not cancelled: 409. A decommission
    failure → 502 with pointer and status untouched and the attempt `failed`/`upstream`.
    """
    pending = attempts.pending_attempt_for(brand.pk)
    if pending is not None and pending.job_id is not None:
        attempts.attempt_cancel(attempt_id=pending.id)
    attempt = attempts.attempt_begin(brand_id=brand.pk, started_by=AttemptStartedBy.DEACTIVATE)
    organization = brand.organization
    parent_id = organization.semrush_parent_workspace_id
    pointer = _fresh_pointer(brand.pk)
    try:
        if pointer is not None:
            client = client_for_org(organization, brand_id=str(brand.pk))
            workspace_empty(client=client, workspace_id=pointer, parent_id=parent_id)
        elif brand.workspace_mode == WorkspaceMode.FLAT:
            _delete_flat_projects(brand=brand)
    except DomainError as error:
        attempts.attempt_finish(
            attempt=attempt, ok=False, reason=AttemptReason.UPSTREAM, error=error.message
        )
        raise
    now = timezone.now()
    with transaction.atomic():
        if pointer is not None:
            Brand.objects.filter(pk=brand.pk, semrush_sub_workspace_id=pointer).update(
                semrush_sub_workspace_id=None
            )
        Market.objects.filter(brand=brand, deleted_at__isnull=True).update(
            deleted_at=now, reserved_by=None, updated_at=now
        )
        Brand.objects.filter(pk=brand.pk).exclude(status=BrandStatus.DELETED).update(
            status=BrandStatus.PENDING, updated_at=now
        )
    attempts.attempt_finish(attempt=attempt, ok=True)
    return Outcome(200, {"brandId": str(brand.pk), "status": "pending"})


def _delete_flat_projects(*, brand: Brand) -> None:
    parent_id = _require_parent(brand.organization)
    client = client_for_org(brand.organization, brand_id=str(brand.pk))
    for market in Market.objects.filter(
        brand=brand, deleted_at__isnull=True, semrush_project_id__isnull=False
    ):
        try:
            client.delete_project(workspace_id=parent_id, project_id=str(market.semrush_project_id))
        except SemrushError as exc:
            raise translate_upstream(exc) from exc


# --- Market delete, read --------------------------------------------------------------------------


def market_delete(*, brand: Brand, geo_target_id: int, language_code: str) -> None:
    """Idempotent: no market → done; `creating` → 409 marketBusy; delete the upstream project
    (404 counts as success), then tombstone. Any other upstream failure → 502, market kept."""
    market = Market.objects.filter(
        brand=brand,
        geo_target_id=geo_target_id,
        language_code=language_code.lower(),
        deleted_at__isnull=True,
    ).first()
    if market is None:
        return
    if market.status == MarketStatus.CREATING:
        raise MarketBusyError()
    if market.semrush_project_id and market.workspace_id:
        client = client_for_org(brand.organization, brand_id=str(brand.pk))
        owned = market.workspace_id != brand.organization.semrush_parent_workspace_id
        try:
            client.delete_project(
                workspace_id=market.workspace_id, project_id=market.semrush_project_id, owned=owned
            )
        except SemrushError as exc:
            error = translate_upstream(exc)
            if error.code != "subworkspaceGone":
                raise error from exc
    Market.objects.filter(pk=market.pk, deleted_at__isnull=True).update(
        deleted_at=timezone.now(), updated_at=timezone.now()
    )


def languages_list(*, organization: Organization) -> list[dict[str, str]]:
    from provisioning.catalogue import catalogue_code

    client = client_for_org(organization)
    items = []
    for entry in languages_catalogue(client=client):
        code = catalogue_code(entry["name"])
        if code:
            items.append({"id": entry["id"], "code": code})
    return items
