"""Brand create (SPEC §4.1): a plain row, or a row with its provisioning, sync or async.

Every provisioning path first commits, in one transaction (`flows.begin`), the brand row
(pointer null), its pending attempt, the market reservation when there is a market, and the
chain's jobs: a concurrent same-name request answers 409 `brandExists` without touching
Semrush, and a concurrent market create on the new brand meets the pending attempt. A sync
create runs its chain at once; when it fails, the row goes (with its attempt and reservation)
before the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.models import AsyncJob, JobMode, JobStep
from kernel.errors import DomainError, InvalidRequestError
from provisioning import quota
from provisioning.caps import queued_markets_check
from provisioning.exceptions import UpstreamBusyError
from provisioning.flows.begin import (
    Begun,
    BrandFields,
    Work,
    brand_insert,
    brand_row,
    work_begin,
    work_run,
    work_withdraw,
)
from provisioning.flows.common import MarketPlan, market_request_for, require_parent
from provisioning.markets import project_discard
from provisioning.models import AttemptStartedBy, ProvisioningAttempt
from provisioning.outcome import Outcome
from provisioning.selectors import with_latest_attempt
from provisioning.semrush import SemrushClient
from provisioning.upstream import client_for_org
from provisioning.workspace import empty_quietly
from serenity.exceptions import BaseUrlRequiredError, SerenityNotEnabledError
from serenity.models import Brand, BrandStatus, Market, Organization, WorkspaceMode


@dataclass(frozen=True, kw_only=True)
class BrandInput(BrandFields):
    status: str | None
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
    brand = brand_row(organization=organization, fields=data, status=status)
    flat = organization.workspace_mode == WorkspaceMode.FLAT
    if not organization.is_serenity_org or is_draft or (flat and data.market is None):
        return BrandCreated(brand=brand_insert(brand))
    plan = data.market
    work = Work(
        brand=brand,
        # Flat: the market's project goes in the parent (no attempt, no workspace).
        started_by=None if flat else AttemptStartedBy.CREATE_BRAND,
        chained=[(JobStep.CREATE_MARKET, plan.as_metadata())] if plan is not None else [],
        market=plan,
        brand_is_new=True,
    )
    if run_async:
        queued_markets_check(organization_id=organization.pk, adding=1 if plan else 0)
        begun = work_begin(work, mode=JobMode.ASYNC)
        # The row as inserted, with the attempt it began: the 202 renders it without a read.
        return BrandCreated(brand=with_latest_attempt(brand, begun.attempt), job=begun.job)
    if flat:
        return _create_sync(work, parent_id=None)
    parent_id = require_parent(organization)
    with quota.request_permits():
        return _create_sync(work, parent_id=parent_id)


def _create_sync(work: Work, *, parent_id: str | None) -> BrandCreated:
    """The brand, its attempt, its reservation and its chain committed first (`work_begin`);
    the language against the catalogue (an unknown one is a 400 before any workspace exists:
    the begin is withdrawn); then the chain, at once (`work_run`): create-or-adopt the
    workspace, settle and promote it, create the market's project. Any failure deletes the
    row (its attempt and reservation go with it; its jobs stay, ended) and undoes what the
    request made upstream (`_made_undo`)."""
    brand, plan = work.brand, work.market
    begun = work_begin(work, mode=JobMode.SYNC)
    owner = begun.attempt.id if begun.attempt is not None else begun.job.pk
    try:
        client = client_for_org(brand.organization, brand_id=str(brand.pk), attempt_id=str(owner))
        if plan is not None and parent_id is not None:
            market_request_for(client=client, brand=brand, plan=plan)
    except Exception:
        work_withdraw(begun)
        raise
    try:
        _raise_if_failed(work_run(begun))
    except Exception:
        if parent_id is not None:
            _made_undo(client, begun, parent_id)
        Brand.objects.filter(pk=brand.pk).delete()
        raise
    brand.refresh_from_db()
    return BrandCreated(brand=brand, market=_market_of(brand, plan))


def _made_undo(client: SemrushClient, begun: Begun, parent_id: str) -> None:
    """A sync create failed after the chain promoted its workspace (the chain never undoes a
    promoted one, SPEC §6.3; before promotion it empties a fresh candidate itself), and its
    brand row is about to go: the workspace this request created is emptied; in one it
    adopted, only the market's project is deleted (SPEC §4.1)."""
    if begun.attempt is None:
        return
    attempt = ProvisioningAttempt.objects.filter(
        pk=begun.attempt.id, workspace_promoted=True
    ).first()
    workspace_id = attempt.candidate_workspace_id if attempt is not None else None
    if attempt is None or workspace_id is None:
        return
    if attempt.freshly_created:
        empty_quietly(client=client, workspace_id=workspace_id, parent_id=parent_id)
        return
    market = begun.market
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
