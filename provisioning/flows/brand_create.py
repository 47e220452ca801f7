"""Brand create (SPEC §4.1): a plain row, or a row with its provisioning, sync or async.

Every provisioning path first commits, in one transaction, the brand row (pointer null), its
pending attempt, the market reservation when there is a market, and (async) the chain's jobs: a
concurrent same-name request answers 409 `brandExists` without touching Semrush, and a
concurrent market create on the new brand meets the pending attempt. A sync create whose
provisioning fails deletes that row (with its attempt and reservation) before answering.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction

from jobs.models import AsyncJob, JobStep
from kernel.errors import DomainError, InvalidRequestError
from provisioning import guard, quota
from provisioning.caps import queued_markets_check
from provisioning.exceptions import UpstreamBusyError
from provisioning.flows.common import (
    Chained,
    MarketPlan,
    chain_create,
    chain_run_sync,
    market_request_for,
    require_parent,
)
from provisioning.flows.market_create import market_create_flat
from provisioning.markets import project_discard
from provisioning.models import AttemptStartedBy, ProvisioningAttempt
from provisioning.outcome import Accepted, Outcome
from provisioning.reservations import market_reserve
from provisioning.selectors import with_latest_attempt
from provisioning.semrush import SemrushClient
from provisioning.upstream import client_for_org
from provisioning.workspace import empty_quietly
from serenity.exceptions import BaseUrlRequiredError, BrandExistsError, SerenityNotEnabledError
from serenity.models import Brand, BrandStatus, Market, Organization, WorkspaceMode


@dataclass(frozen=True)
class BrandInput:
    name: str
    status: str | None
    base_url: str | None
    urls: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    market: MarketPlan | None = None


@dataclass(frozen=True)
class BrandCreated:
    brand: Brand
    market: Market | None = None
    job: AsyncJob | None = None


def brand_input_check(*, organization: Organization, data: BrandInput) -> None:
    """SPEC §4.1's cross-field rules, before anything is written or called (the OpenAPI document
    states the first three: api.schemas.hooks.BRAND_CREATE_RULES)."""
    if data.status == BrandStatus.ACTIVE and not data.base_url:
        raise BaseUrlRequiredError(field="baseUrl")
    if data.market is not None:
        if not organization.is_serenity_org:
            raise SerenityNotEnabledError()
        if data.status == BrandStatus.PENDING:
            raise InvalidRequestError(
                "semrushMarket: a draft brand cannot have a market.", field="semrushMarket"
            )
        if not data.base_url:
            raise BaseUrlRequiredError("baseUrl is required to create a market.", field="baseUrl")


def brand_create(*, organization: Organization, data: BrandInput, run_async: bool) -> BrandCreated:
    """Create a brand; provision its sub-workspace when the org is a Serenity org.

    Raises BaseUrlRequiredError, SerenityNotEnabledError, InvalidRequestError, BrandExistsError,
    and (sync) the provisioning domain errors, after deleting the brand row and emptying a
    workspace this request created.
    """
    brand_input_check(organization=organization, data=data)
    is_draft = data.status == BrandStatus.PENDING
    status = BrandStatus.PENDING if is_draft or not data.base_url else BrandStatus.ACTIVE
    provisions = organization.is_serenity_org and not is_draft
    flat = organization.workspace_mode == WorkspaceMode.FLAT

    if not provisions or (flat and data.market is None):
        return BrandCreated(
            brand=_brand_insert(_brand_new(organization=organization, data=data, status=status))
        )
    if flat:
        assert data.market is not None
        return _brand_create_flat(
            organization=organization, data=data, status=status, run_async=run_async
        )

    if run_async:
        return _begin_async(organization=organization, data=data, status=status)
    with quota.request_permits():
        return _provision_sync(organization=organization, data=data, status=status)


def _begin_async(*, organization: Organization, data: BrandInput, status: str) -> BrandCreated:
    """The brand row, its attempt, its reservation and the chain's jobs in one transaction."""
    queued_markets_check(organization_id=organization.pk, adding=1 if data.market else 0)
    root_id = uuid.uuid4()
    # Durable: the brand and its attempt are committed before a worker may claim the chain.
    with transaction.atomic(durable=True):
        brand = _brand_insert(_brand_new(organization=organization, data=data, status=status))
        with guard.lease(
            brand_id=brand.pk,
            started_by=AttemptStartedBy.CREATE_BRAND,
            job_id=root_id,
            brand_is_new=True,
        ) as begun:
            attempt = begun.attempt
            assert attempt is not None  # the table exists: the brand was just written with it
            market = _reserve(brand, data.market, owner=attempt.id)
            job = chain_create(
                brand=brand,
                root_id=root_id,
                attempt=attempt,
                market=market,
                chained=_chained(data.market),
            )
    # The row as inserted, with the attempt it began: the 202 renders it without a read.
    return BrandCreated(brand=with_latest_attempt(brand, attempt), job=job)


def _reserve(brand: Brand, plan: MarketPlan | None, *, owner: uuid.UUID) -> Market | None:
    """The new brand's market reservation, in the transaction that inserted the brand (no
    savepoint, no live markets to read: nobody else can see the brand yet)."""
    if plan is None:
        return None
    return market_reserve(
        brand=brand,
        slice_=plan.slice,
        owner=owner,
        name=plan.name,
        live_markets=[],
        savepoint=False,
    )


def _brand_new(*, organization: Organization, data: BrandInput, status: str) -> Brand:
    """The brand row to insert (not saved)."""
    return Brand(
        organization=organization,
        name=data.name.strip(),
        workspace_mode=organization.workspace_mode,
        status=status,
        base_url=data.base_url,
        urls=data.urls,
        aliases=data.aliases,
    )


def _brand_insert(brand: Brand) -> Brand:
    """Insert `brand`; a name taken among the org's live brands → BrandExistsError. No
    savepoint: inside a caller's transaction, the conflict ends that transaction too."""
    try:
        with transaction.atomic(savepoint=False):
            brand.save(force_insert=True)
    except IntegrityError:
        raise BrandExistsError() from None
    return brand


def _brand_create_flat(
    *, organization: Organization, data: BrandInput, status: str, run_async: bool
) -> BrandCreated:
    """A flat org's brand with a market: the market's project goes in the parent (no attempt,
    no workspace); the row is deleted again if the market fails (sync)."""
    assert data.market is not None
    if run_async:
        # One transaction: the row exists with its job and reservation, or not at all.
        with transaction.atomic():
            brand = _brand_insert(_brand_new(organization=organization, data=data, status=status))
            accepted = market_create_flat(brand=brand, plan=data.market, run_async=True)
        assert isinstance(accepted, Accepted)
        return BrandCreated(brand=with_latest_attempt(brand, None), job=accepted.job)
    brand = _brand_insert(_brand_new(organization=organization, data=data, status=status))
    try:
        outcome = market_create_flat(brand=brand, plan=data.market, run_async=False)
        assert not isinstance(outcome, Accepted)
        _raise_if_failed(outcome)
    except Exception:
        Brand.objects.filter(pk=brand.pk).delete()
        raise
    return BrandCreated(brand=brand, market=_market_of(brand, data.market))


def _provision_sync(*, organization: Organization, data: BrandInput, status: str) -> BrandCreated:
    """The brand, its attempt and its reservation committed first (`guard.attempt_held`); the
    language against the catalogue (an unknown one is a 400 before any workspace exists); then
    the chain's own steps, inline (`chain_run_sync`): create-or-adopt the workspace, settle and
    promote it, create the market's project. Any failure deletes the row (its attempt and
    reservation go with it: the guard's ending of a brand it inserted) and undoes what the
    request made upstream (`_made_undo`)."""
    parent_id = require_parent(organization)
    brand = _brand_new(organization=organization, data=data, status=status)
    plan = data.market
    with guard.attempt_held(
        brand_id=brand.pk,
        started_by=AttemptStartedBy.CREATE_BRAND,
        insert_brand=lambda: _brand_insert(brand),
        reserve=lambda owner: _reserve(brand, plan, owner=owner),
    ) as held:
        client = client_for_org(organization, brand_id=str(brand.pk), attempt_id=str(held.owner))
        if plan is not None:
            market_request_for(client=client, brand=brand, plan=plan)
        try:
            outcome = chain_run_sync(
                brand=brand, attempt=held.attempt, market=held.market, chained=_chained(plan)
            )
            _raise_if_failed(outcome)
        except Exception:
            _made_undo(client, held, parent_id)
            raise
    brand.refresh_from_db()
    return BrandCreated(brand=brand, market=_market_of(brand, plan))


def _chained(plan: MarketPlan | None) -> Chained:
    """The chain after provision-workspace: the market, if the brand has one."""
    return [(JobStep.CREATE_MARKET, plan.as_metadata())] if plan is not None else []


def _made_undo(client: SemrushClient, held: guard.SyncAttempt, parent_id: str) -> None:
    """A sync create failed after the chain promoted its workspace (the chain never undoes a
    promoted one, SPEC §6.3; before promotion it empties a fresh candidate itself), and its
    brand row is about to go: the workspace this request created is emptied; in one it
    adopted, only the market's project is deleted (SPEC §4.1)."""
    attempt = ProvisioningAttempt.objects.filter(pk=held.owner, workspace_promoted=True).first()
    workspace_id = attempt.candidate_workspace_id if attempt is not None else None
    if attempt is None or workspace_id is None:
        return
    if attempt.freshly_created:
        empty_quietly(client=client, workspace_id=workspace_id, parent_id=parent_id)
        return
    market = held.market
    project_id = (
        Market.objects.filter(pk=market.pk).values_list("semrush_project_id", flat=True).first()
        if market is not None
        else None
    )
    if project_id:
        project_discard(
            client=client, workspace_id=workspace_id, project_id=project_id, owned_workspace=True
        )


def _raise_if_failed(outcome: Outcome) -> None:
    """A brand create answers its market's failure as its own error (503 `upstreamBusy` keeps
    its `Retry-After`)."""
    if outcome.status < 400:
        return
    if outcome.body.get("error") == UpstreamBusyError.code:
        retry_after = (outcome.headers or {}).get("Retry-After")
        raise UpstreamBusyError(retry_after=float(retry_after or 1))
    raise DomainError(
        outcome.body.get("message"),
        code=outcome.body.get("error", "serenityUpstreamError"),
        http_status=outcome.status,
    )


def _market_of(brand: Brand, plan: MarketPlan | None) -> Market | None:
    """The brand's market on `plan`'s slice, as its create left it."""
    if plan is None:
        return None
    return Market.objects.get(
        brand=brand,
        geo_target_id=plan.slice.geo_target_id,
        language_code=plan.slice.language_code,
        deleted_at__isnull=True,
    )
