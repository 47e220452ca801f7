"""Market create (SPEC §4.2): sync or async, in the brand's sub-workspace or (flat) the parent;
and the chained `createMarket` step, which workers run (async) and the request runs inline
(sync, SPEC §12.3).

The mode comes from the brand's recorded `workspaceMode`, never from the pointer. A
sub-workspace brand with no pointer is refused before any upstream call; nothing is ever
created in the parent for it.
"""

from __future__ import annotations

from typing import Any

from jobs.models import JobMode, JobStep
from jobs.runner import StepRun
from kernel.errors import DomainError
from provisioning import chain, guard, quota
from provisioning.caps import queued_markets_check
from provisioning.exceptions import ProvisioningIncompleteError, WorkspaceMisconfiguredError
from provisioning.flows.begin import Work, work_begin, work_run, work_withdraw
from provisioning.flows.common import (
    MarketPlan,
    chained_preflight,
    chained_stand_down,
    check_market_cap,
    market_provision_planned,
    market_request_for,
    require_parent,
)
from provisioning.models import AttemptStartedBy
from provisioning.outcome import Accepted, Outcome
from provisioning.reservations import market_release, slice_market_in, slice_taken
from provisioning.upstream import client_for_org
from serenity.exceptions import SliceExistsError
from serenity.models import Brand, BrandStatus, Market, WorkspaceMode


def market_create(*, brand: Brand, plan: MarketPlan, run_async: bool) -> Outcome | Accepted:
    """Create one market. Raises the refusals (409 sliceExists, semrush_provisioning_in_progress,
    semrush_provisioning_incomplete, workspaceMisconfigured; 400s) before any upstream call;
    sync answers the market's Outcome, async the job."""
    parent_id = require_parent(brand.organization)
    chained = [(JobStep.CREATE_MARKET, plan.as_metadata())]
    if brand.workspace_mode == WorkspaceMode.FLAT:
        # The project goes in the parent, by a `createMarket` chain alone (no attempt: nothing
        # creates a workspace), owning the reservation.
        check_market_cap(brand)
        if run_async:
            queued_markets_check(organization_id=brand.organization_id, adding=1)
        flat = work_begin(
            Work(brand=brand, started_by=None, chained=chained, market=plan),
            mode=JobMode.ASYNC if run_async else JobMode.SYNC,
        )
        return Accepted(job=flat.job) if run_async else work_run(flat)
    live: list[Market] = []
    # Guard, attempt (its candidate: the pointer), reservation and jobs in one short
    # transaction; the chain settles the existing workspace, then creates the market.
    work = Work(
        brand=brand,
        started_by=AttemptStartedBy.CREATE_MARKET,
        chained=chained,
        market=plan,
        checks=_refusals(brand, plan, parent_id, live),
        candidate_is_pointer=True,
        live_markets=live,
    )
    if run_async:
        queued_markets_check(organization_id=brand.organization_id, adding=1)
        return Accepted(job=work_begin(work, mode=JobMode.ASYNC).job)
    check_market_cap(brand)
    with quota.request_permits():
        return _create_sync(work)


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


def _create_sync(work: Work) -> Outcome:
    """The begin (no upstream call before the guard has answered), then the language against
    the (cached) catalogue: a refusal there withdraws the begin (a 400 writes nothing). Then
    the chain, at once (`work_run`): settle the pointer, create or resume the project."""
    brand = work.brand
    assert work.market is not None
    client = client_for_org(brand.organization, brand_id=str(brand.pk))
    begun = work_begin(work, mode=JobMode.SYNC)
    try:
        # The language first (cached catalogue): a 400 writes nothing, reads no status.
        market_request_for(client=client, brand=brand, plan=work.market)
    except Exception:
        work_withdraw(begun)
        raise
    return work_run(begun)


# --- the chained step ---------------------------------------------------------------------------


def create_market_step(run: StepRun) -> chain.Ending:
    """The chain's `createMarket` step: the market's project in the promoted workspace (flat:
    in the parent), its market row finished by the step's ending (with the job and the
    attempt, SPEC §11.5). Stands down (CANCELLED) when the chain's reservation is no longer
    its own."""
    meta = run.job.metadata
    plan = MarketPlan.from_metadata(meta)
    if meta.get("flat"):
        return chain.Ending(None, _flat_step(run, plan))
    checked = chained_preflight(run)
    if isinstance(checked, chain.StoodDown):
        return chained_stand_down(run, checked, [plan])
    attempt, brand, workspace_id = checked.attempt, checked.brand, checked.workspace_id
    market = _reservation(meta)
    if market is None or market.deleted_at is not None or market.reserved_by != attempt.id:
        # Tombstoned (a heal) or no longer the chain's: nothing of it is this step's to write.
        return chain.Ending(attempt, chain.Finished(None))
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
    return chain.Ending(attempt, chain.Finished(outcome))


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
