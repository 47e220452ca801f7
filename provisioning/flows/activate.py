"""Activate (SPEC §4.3): the branch is chosen from the stored brand.

    A  pending → active      settle the workspace (or provision one), flip the brand `active`
    B  bare re-activation    settle the workspace (or provision one), re-affirm `active`
    C  project activation    settle the workspace (or provision one), create or resume each
                             market
    A+C pending, brandDomain  as C, the brand flipped `active` first; C's answer

Each branch is one chain: provision-workspace → activate-brand-workspace (A, B) or
activate-markets (C, A+C), run by workers (async) or inline by the request (sync, SPEC §12.3),
with the caller's patience. Provision-workspace reads the pointer's status until it is ready;
a pointer gone upstream heals and a new workspace is provisioned as for a brand without one
(SPEC §10.2).
"""

from __future__ import annotations

import enum
import uuid
from typing import Any

from django.utils import timezone

from jobs.models import JobMode, JobStep
from jobs.runner import StepRun
from kernel.errors import DomainError
from provisioning import chain, guard, quota
from provisioning.caps import queued_markets_check
from provisioning.exceptions import (
    ActivationIncompleteError,
    WorkspaceMisconfiguredError,
)
from provisioning.flows.begin import Chained, Work, work_begin, work_run
from provisioning.flows.common import (
    MarketPlan,
    chained_preflight,
    chained_stand_down,
    market_provision_planned,
    require_parent,
)
from provisioning.models import AttemptStartedBy
from provisioning.outcome import Accepted, MarketWrite, Outcome
from provisioning.reservations import market_reserve
from provisioning.semrush import SemrushClient
from provisioning.upstream import client_for_org
from serenity.exceptions import BaseUrlRequiredError
from serenity.models import Brand, BrandStatus, WorkspaceMode


class Branch(enum.Enum):
    PENDING_TO_ACTIVE = "A"
    BARE_REACTIVATION = "B"
    PROJECT_ACTIVATION = "C"
    # A pending brand with `brandDomain` (SPEC §10.2): A's flip to `active`, then C's markets;
    # the answer is C's.
    PENDING_THEN_PROJECTS = "A+C"

    @classmethod
    def of(cls, brand: Brand, brand_domain: str | None) -> Branch:
        if brand.status == BrandStatus.PENDING:
            if not brand.base_url:
                raise BaseUrlRequiredError()
            return cls.PENDING_TO_ACTIVE if brand_domain is None else cls.PENDING_THEN_PROJECTS
        return cls.BARE_REACTIVATION if brand_domain is None else cls.PROJECT_ACTIVATION

    @property
    def creates_markets(self) -> bool:
        return self in (Branch.PROJECT_ACTIVATION, Branch.PENDING_THEN_PROJECTS)

    @property
    def was_pending(self) -> bool:
        return self in (Branch.PENDING_TO_ACTIVE, Branch.PENDING_THEN_PROJECTS)


def activate(
    *,
    brand: Brand,
    brand_domain: str | None,
    brand_names: list[str] | None,
    plans: list[MarketPlan],
    run_async: bool,
) -> Outcome | Accepted:
    require_parent(brand.organization)
    branch = Branch.of(brand, brand_domain)
    chained = _chained(branch, brand_domain, brand_names, plans)
    if brand.workspace_mode == WorkspaceMode.FLAT:
        return _activate_flat(brand=brand, branch=branch, chained=chained)
    # A chain whose attempt's candidate is the pointer: provision-workspace settles it (or
    # provisions one), then the branch's step.
    work = Work(
        brand=brand,
        started_by=AttemptStartedBy.ACTIVATE,
        chained=chained,
        checks=_refuse_parent(brand),
        candidate_is_pointer=True,
    )
    if run_async:
        adding = len(plans) if branch.creates_markets else 0
        queued_markets_check(organization_id=brand.organization_id, adding=adding)
        return Accepted(job=work_begin(work, mode=JobMode.ASYNC).job)
    with quota.request_permits():
        return _activate_sync(work, branch=branch)


def _chained(
    branch: Branch,
    brand_domain: str | None,
    brand_names: list[str] | None,
    plans: list[MarketPlan],
) -> Chained:
    """The branch's step after provision-workspace. A, A+C: it flips the brand `active` first."""
    inputs: dict[str, Any] = {"wasPending": branch.was_pending}
    if not branch.creates_markets:
        return [(JobStep.ACTIVATE_BRAND_WORKSPACE, inputs)]
    inputs.update(
        markets=[plan.as_metadata() for plan in plans],
        brandNames=brand_names,
        brandDomain=brand_domain,
    )
    return [(JobStep.ACTIVATE_MARKETS, inputs)]


def _refuse_parent(brand: Brand) -> guard.Checks:
    """Under the brand's lock: a pointer equal to the parent is misconfigured (409)."""
    parent_id = brand.organization.semrush_parent_workspace_id

    def check(pointer: str | None) -> None:
        if pointer is not None and pointer == parent_id:
            raise WorkspaceMisconfiguredError()

    return check


def _activate_sync(work: Work, *, branch: Branch) -> Outcome:
    """The chain at once (`work_run`). A pending brand whose workspace could not be
    provisioned for an upstream failure answers 502 `serenityActivationIncomplete` instead of
    the error (the chain has failed the attempt)."""
    # The client first: a missing configuration (503) must not lease the brand.
    client_for_org(work.brand.organization, brand_id=str(work.brand.pk))
    begun = work_begin(work, mode=JobMode.SYNC)
    try:
        return work_run(begun)
    except DomainError as error:
        if branch.was_pending and not hasattr(error, "reason") and error.http_status >= 500:
            return _activation_incomplete(work.brand)
        raise


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


def activation_in_workspace(
    *,
    client: SemrushClient | None,
    brand: Brand,
    workspace_id: str,
    owner: uuid.UUID,
    was_pending: bool,
    plans: list[MarketPlan] | None,
    flat: bool = False,
    **options: Any,
) -> Outcome:
    """Activate's work once the brand's workspace is in place: the chained step's (`options`:
    its own, SPEC §11.5), and flat mode's (`flat`: the parent is `workspace_id`). No `plans`
    (A, B): flip the brand `active`. With `plans` (C): its markets; a pending brand (A+C) is
    flipped `active` first, and a refused flip is the answer."""
    if plans is None or was_pending:
        flipped = brand_workspace_activate(
            brand=brand, workspace_id=None if flat else workspace_id, was_pending=was_pending
        )
        if plans is None or flipped.status != 200:
            return flipped
    assert client is not None  # the markets' calls need one
    return activate_markets_in_workspace(
        client=client,
        brand=brand,
        workspace_id=workspace_id,
        owner=owner,
        plans=plans,
        owned_workspace=not flat,
        **options,
    )


def activate_markets_in_workspace(
    *,
    client: SemrushClient,
    brand: Brand,
    workspace_id: str,
    owner: uuid.UUID,
    plans: list[MarketPlan],
    owned_workspace: bool = True,
    **options: Any,
) -> Outcome:
    """Branch C: per market create-or-resume + publish + confirm; one market's failure is its
    entry's. 200 when every market is live or publishing (created now or already), else 207.

    The rows' final writes are gathered in the Outcome, for the end of the work to commit at
    once (the step's ending, with the job and the attempt, SPEC §11.5); while a publish is not
    confirmed the Outcome's `confirm_in` re-schedules the step, whose re-run confirms the
    markets already `publishing` without publishing them again."""
    entries: list[dict[str, Any]] = []
    writes: list[MarketWrite] = []
    confirm_in: list[float] = []
    for plan in plans:
        outcome = _activate_one(
            client=client,
            brand=brand,
            workspace_id=workspace_id,
            owner=owner,
            plan=plan,
            owned_workspace=owned_workspace,
            **options,
        )
        if outcome.confirm_in is not None:
            confirm_in.append(outcome.confirm_in)
        writes.extend(outcome.market_writes)
        entries.append(
            {
                "market": plan.slice.country,
                "languageCode": plan.slice.language_code,
                "status": outcome.status,
                "body": outcome.body,
            }
        )
    return _activation_answer(brand, entries, writes, min(confirm_in, default=None))


def _activation_answer(
    brand: Brand,
    entries: list[dict[str, Any]],
    writes: list[MarketWrite],
    confirm_in: float | None,
) -> Outcome:
    """Branch C's answer: 200 when every entry is created or already live, else 207."""
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
        market_writes=tuple(writes),
        confirm_in=confirm_in,
    )


def _activate_one(
    *,
    client: SemrushClient,
    brand: Brand,
    workspace_id: str,
    owner: uuid.UUID,
    plan: MarketPlan,
    owned_workspace: bool,
    **options: Any,
) -> Outcome:
    """One market of branch C: reserve (or resume) its slice, then create or resume its
    project (a reservation an earlier run of the step left `publishing` is only confirmed)."""
    try:
        reservation = market_reserve(brand=brand, slice_=plan.slice, owner=owner, name=plan.name)
    except DomainError as error:
        return Outcome.from_error(error)
    return market_provision_planned(
        client=client,
        brand=brand,
        plan=plan,
        reservation=reservation,
        owner=owner,
        workspace_id=workspace_id,
        owned_workspace=owned_workspace,
        **options,
    )


def _activate_flat(*, brand: Brand, branch: Branch, chained: Chained) -> Outcome:
    """Flat mode, sync whatever `async` says: the branch's step alone (no workspace, no
    attempt), run at once, its markets' projects in the parent; the flip is not conditional
    on a pointer."""
    if branch.creates_markets:
        # The client first: a missing configuration (503) before anything is reserved.
        client_for_org(brand.organization, brand_id=str(brand.pk))
    work = Work(brand=brand, started_by=None, chained=chained)
    return work_run(work_begin(work, mode=JobMode.SYNC))


# --- the chained steps --------------------------------------------------------------------------


def activation_step(run: StepRun) -> chain.Ending:
    """The chain's activate step, `activateMarkets` (C, A+C: its `markets`) and
    `activateBrandWorkspace` (A, B: none): the chain's checks (a chain that lost the brand
    stands down), then the branch's work in the promoted workspace, its rows' final writes
    left to the step's ending. Flat mode's (`flat`) has no chain before it: its work is in the
    parent."""
    markets = run.job.metadata.get("markets")
    plans = [MarketPlan.from_metadata(m) for m in markets] if markets is not None else None
    if run.job.metadata.get("flat"):
        return chain.Ending(None, _flat_activation(run, plans))
    checked = chained_preflight(run)
    if isinstance(checked, chain.StoodDown):
        return chained_stand_down(run, checked, plans or [])
    attempt, brand = checked.attempt, checked.brand
    outcome = activation_in_workspace(
        # A client only for markets: a flip makes no upstream call.
        client=(
            client_for_org(brand.organization, brand_id=str(brand.pk), attempt_id=str(attempt.id))
            if plans is not None
            else None
        ),
        brand=brand,
        workspace_id=checked.workspace_id,
        owner=attempt.id,
        was_pending=bool(run.job.metadata.get("wasPending")),
        plans=plans,
        renew=run.keep_alive,
    )
    return chain.Ending(attempt, chain.Finished(outcome))


def _flat_activation(run: StepRun, plans: list[MarketPlan] | None) -> chain.StepEnd:
    brand = (
        Brand.objects.select_related("organization").filter(pk=run.job.brand_id).first()
        if run.job.brand_id
        else None
    )
    if brand is None or brand.status == BrandStatus.DELETED:
        return chain.StoodDown(None)
    client = client_for_org(brand.organization, brand_id=str(brand.pk)) if plans else None
    outcome = activation_in_workspace(
        client=client,
        brand=brand,
        workspace_id=brand.organization.semrush_parent_workspace_id or "",
        owner=run.job.id,
        was_pending=bool(run.job.metadata.get("wasPending")),
        plans=plans,
        flat=True,
        renew=run.keep_alive,
    )
    return chain.Finished(outcome)
