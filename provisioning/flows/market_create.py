"""Market create (SPEC §4.2): sync or async, in the brand's sub-workspace or (flat) the parent;
and the chained `createMarket` step, which workers run (async) and the request runs inline
(sync, SPEC §12.3).

The mode comes from the brand's recorded `workspaceMode`, never from the pointer. A
sub-workspace brand with no pointer is refused before any upstream call; nothing is ever
created in the parent for it.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction

from jobs import services as job_services
from jobs.inline import chain_run_inline
from jobs.models import JobStep, JobType
from jobs.runner import StepRun
from kernel.errors import DomainError
from provisioning import chain, guard, quota
from provisioning.caps import queued_markets_check
from provisioning.exceptions import ProvisioningIncompleteError, WorkspaceMisconfiguredError
from provisioning.flows.common import (
    Chained,
    MarketPlan,
    chain_create,
    chain_run_sync,
    chained_stand_down,
    check_market_cap,
    inline_answer,
    market_provision_planned,
    market_request_for,
    require_parent,
)
from provisioning.models import AttemptStartedBy
from provisioning.outcome import Accepted, Outcome
from provisioning.reservations import market_release, market_reserve, slice_market_in, slice_taken
from provisioning.upstream import client_for_org
from serenity.exceptions import SliceExistsError
from serenity.models import Brand, BrandStatus, Market, WorkspaceMode


def market_create(*, brand: Brand, plan: MarketPlan, run_async: bool) -> Outcome | Accepted:
    """Create one market. Raises the refusals (409 sliceExists, semrush_provisioning_in_progress,
    semrush_provisioning_incomplete, workspaceMisconfigured; 400s) before any upstream call;
    sync answers the market's Outcome, async the job."""
    parent_id = require_parent(brand.organization)
    if brand.workspace_mode == WorkspaceMode.FLAT:
        check_market_cap(brand)
        return market_create_flat(brand=brand, plan=plan, run_async=run_async)
    if run_async:
        return _begin_async(brand=brand, plan=plan, parent_id=parent_id)
    check_market_cap(brand)
    with quota.request_permits():
        return _create_sync(brand=brand, plan=plan, parent_id=parent_id)


def _refusals(brand: Brand, plan: MarketPlan, parent_id: str, live: list[Market]) -> guard.Checks:
    """The refusals made under the brand's lock, before the guard's own answer: a taken slice
    (so that racing creates of one slice get the same answer in both modes), the market cap,
    then the pointer: equal to the parent, or missing. Fills `live` with the brand's live
    markets as read under the lock."""

    def check(pointer: str | None) -> None:
        live[:] = Market.objects.filter(brand=brand, deleted_at__isnull=True)
        if slice_taken(slice_market_in(live, plan.slice)):
            raise SliceExistsError()
        check_market_cap(brand, live_count=len(live))
        if pointer is not None and pointer == parent_id:
            raise WorkspaceMisconfiguredError()
        if pointer is None:
            pending = guard.pending_attempt_for(brand.pk)
            if pending is not None:
                raise guard.in_progress_error(brand_id=brand.pk)
            raise ProvisioningIncompleteError()

    return check


def _chained(plan: MarketPlan) -> Chained:
    """The chain after provision-workspace (which settles the existing pointer): the market."""
    return [(JobStep.CREATE_MARKET, plan.as_metadata())]


def _begin_async(*, brand: Brand, plan: MarketPlan, parent_id: str) -> Accepted:
    """Guard, attempt (its candidate: the pointer), reservation and jobs in one short
    transaction; the chain settles the existing workspace, then creates the market."""
    queued_markets_check(organization_id=brand.organization_id, adding=1)
    root_id = uuid.uuid4()
    live: list[Market] = []
    try:
        with guard.lease(
            brand_id=brand.pk,
            started_by=AttemptStartedBy.CREATE_MARKET,
            job_id=root_id,
            candidate_is_pointer=True,
            checks=_refusals(brand, plan, parent_id, live),
        ) as begun:
            assert begun.attempt is not None
            market = market_reserve(
                brand=brand,
                slice_=plan.slice,
                owner=begun.attempt.id,
                name=plan.name,
                live_markets=live,
                savepoint=False,
            )
            job = chain_create(
                brand=brand,
                root_id=root_id,
                attempt=begun.attempt,
                market=market,
                chained=_chained(plan),
            )
    except IntegrityError:
        # The brand's lock serializes begins; a market row can only conflict with a create of
        # the slice that takes no guard (flat mode) committed after our read.
        raise SliceExistsError() from None
    return Accepted(job=job)


def _create_sync(*, brand: Brand, plan: MarketPlan, parent_id: str) -> Outcome:
    """Under the brand's lock, in one transaction: the refusals, the guard (the attempt's
    candidate: the pointer) and the slice's reservation; no upstream call before the guard has
    answered. Then the language against the (cached) catalogue: a refusal there withdraws the
    attempt and the reservation (a 400 writes nothing). Then the chain's own steps, inline
    (`chain_run_sync`): settle the pointer, create or resume the project."""
    client = client_for_org(brand.organization, brand_id=str(brand.pk))
    live: list[Market] = []
    with guard.attempt_held(
        brand_id=brand.pk,
        started_by=AttemptStartedBy.CREATE_MARKET,
        checks=_refusals(brand, plan, parent_id, live),
        reserve=lambda owner: market_reserve(
            brand=brand, slice_=plan.slice, owner=owner, name=plan.name, live_markets=live
        ),
        candidate_is_pointer=True,
    ) as held:
        try:
            # The language first (cached catalogue): a 400 writes nothing, reads no status.
            market_request_for(client=client, brand=brand, plan=plan)
        except Exception:
            held.withdraw()
            raise
        return chain_run_sync(
            brand=brand, attempt=held.attempt, market=held.market, chained=_chained(plan)
        )


def market_create_flat(*, brand: Brand, plan: MarketPlan, run_async: bool) -> Outcome | Accepted:
    """Flat mode: the project goes in the parent, by a `createMarket` job with no
    provisioning step (no attempt: nothing creates a workspace), owning the reservation; a
    sync request runs that job inline (`jobs.inline`)."""
    if run_async:
        queued_markets_check(organization_id=brand.organization_id, adding=1)
    root_id = uuid.uuid4()
    with transaction.atomic():
        reservation = market_reserve(brand=brand, slice_=plan.slice, owner=root_id, name=plan.name)
        spec = job_services.ChainSpec(
            organization_id=brand.organization_id,
            brand_id=brand.pk,
            job_type=JobType.PROVISION_WORKSPACE,
            first=job_services.StepSpec(
                JobStep.CREATE_MARKET,
                {**plan.as_metadata(), "marketId": str(reservation.pk), "flat": True},
            ),
            root_id=root_id,
        )
        if run_async:
            return Accepted(job=job_services.job_chains_create([spec])[0])
    return inline_answer(chain_run_inline(job_services.job_chain_rows(spec)))


# --- the chained step ---------------------------------------------------------------------------


def create_market_step(run: StepRun) -> None:
    """The chain's `createMarket` step: the market's project in the promoted workspace (flat:
    in the parent), its market row finished by the step's ending (with the job and the
    attempt, SPEC §11.5). Stands down (CANCELLED) when the chain's reservation is no longer
    its own."""
    meta = run.job.metadata
    plan = MarketPlan.from_metadata(meta)
    if meta.get("flat"):
        chain.step_end(run, None, _flat_step(run, plan))
        return
    checked = chain.chained_preflight(run)
    if isinstance(checked, chain.StoodDown):
        chained_stand_down(run, checked, [plan])
        return
    attempt, brand, workspace_id = checked.attempt, checked.brand, checked.workspace_id
    market = _reservation(meta)
    if market is None or market.deleted_at is not None or market.reserved_by != attempt.id:
        # Tombstoned (a heal) or no longer the chain's: nothing of it is this step's to write.
        chain.step_end(run, attempt, chain.Finished(None))
        return
    client = client_for_org(brand.organization, brand_id=str(brand.pk), attempt_id=str(attempt.id))
    outcome = market_provision_planned(
        client=client,
        brand=brand,
        plan=plan,
        reservation=market,
        owner=attempt.id,
        workspace_id=workspace_id,
        owned_workspace=True,
        renew=run.keep_alive,
        # A brand create's workspace, made by this attempt, is empty until this step creates
        # its project, which it records at once: only a run after a lost worker (an expired
        # claim) must look for one; a re-run after a quota re-schedule need not.
        workspace_new=attempt.freshly_created and run.job.expired_claims == 0,
    )
    chain.step_end(run, attempt, chain.Finished(outcome))


def _reservation(meta: dict[str, Any]) -> Market | None:
    """The chain's market row by its id (`get()`: no ORDER BY, unlike `first()`), or None."""
    market_id = meta.get("marketId")
    if not market_id:
        return None
    try:
        return Market.objects.get(pk=market_id)
    except Market.DoesNotExist:
        return None


def _flat_step(run: StepRun, plan: MarketPlan) -> chain.StepEnd:
    meta = run.job.metadata
    brand = (
        Brand.objects.select_related("organization").filter(pk=run.job.brand_id).first()
        if run.job.brand_id
        else None
    )
    market = _reservation(meta)
    if brand is None or brand.status == BrandStatus.DELETED or market is None:
        return chain.StoodDown(None)
    try:
        client = client_for_org(brand.organization, brand_id=str(brand.pk))
    except DomainError as error:
        market_release(market_id=market.pk, owner=run.job.id)
        return chain.Finished(Outcome.from_error(error))
    outcome = market_provision_planned(
        client=client,
        brand=brand,
        plan=plan,
        reservation=market,
        owner=run.job.id,
        workspace_id=brand.organization.semrush_parent_workspace_id or "",
        owned_workspace=False,
        renew=run.keep_alive,
    )
    return chain.Finished(outcome)
