"""Activate (SPEC §4.3): the branch is chosen from the stored brand.

    A  pending → active      ensure the workspace (skip mode), flip the brand `active`
    B  bare re-activation    ensure the workspace (skip mode), re-affirm `active`
    C  project activation    ensure the workspace (poll mode), create or resume each market
    A+C pending, brandDomain  ensure (poll mode), flip `active`, then C's markets; C's answer

Async, each branch is one chain: provision-workspace → activate-brand-workspace (A, B) or
activate-markets (C); the chained steps call the same functions as the sync path.

Ensuring the workspace reads the pointer's status (once in skip mode, where a not-ready status
is fine); a pointer gone upstream heals and a new workspace is provisioned as for a brand
without one (SPEC §10.2).
"""

from __future__ import annotations

import enum
import uuid
from typing import Any

from django.utils import timezone

from jobs.models import JobStep
from jobs.runner import StepRun
from kernel.errors import DomainError
from provisioning import chain, guard
from provisioning.exceptions import (
    ActivationIncompleteError,
    WorkspaceMisconfiguredError,
)
from provisioning.flows.common import (
    MarketPlan,
    chain_create,
    chained_stand_down,
    market_provision_planned,
    require_parent,
)
from provisioning.markets import market_outcome_commit
from provisioning.models import AttemptStartedBy
from provisioning.outcome import Accepted, MarketWrite, Outcome
from provisioning.reservations import market_reserve
from provisioning.semrush import SemrushClient
from provisioning.upstream import client_for_org
from provisioning.workspace import brand_pointer, workspace_ensure
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
    parent_id = require_parent(brand.organization)
    branch = Branch.of(brand, brand_domain)
    if brand.workspace_mode == WorkspaceMode.FLAT:
        return _activate_flat(brand=brand, branch=branch, plans=plans, parent_id=parent_id)
    if run_async:
        return _begin_async(
            brand=brand,
            branch=branch,
            brand_domain=brand_domain,
            brand_names=brand_names,
            plans=plans,
        )
    pointer = brand_pointer(brand.pk)
    if pointer is not None and pointer == parent_id:
        raise WorkspaceMisconfiguredError()
    return _activate_sync(brand=brand, branch=branch, plans=plans)


def _activate_sync(*, brand: Brand, branch: Branch, plans: list[MarketPlan]) -> Outcome:
    """Ensure the workspace under a sync attempt, then the branch's work in it. A failure to
    ensure fails the attempt (a pending brand whose ensure failed upstream answers 502
    `serenityActivationIncomplete` instead of the error); once the workspace is in place the
    attempt ends `ready`, whatever follows."""
    # The client first: a missing configuration (503) must not lease the brand.
    client = client_for_org(brand.organization, brand_id=str(brand.pk))
    with guard.attempt_held(brand_id=brand.pk, started_by=AttemptStartedBy.ACTIVATE) as held:
        try:
            workspace = workspace_ensure(
                client=client,
                brand=brand,
                attempt_id=held.attempt_id,
                settle=branch.creates_markets,
            )
        except DomainError as error:
            if branch.was_pending and not hasattr(error, "reason") and error.http_status >= 500:
                held.fail(error)
                return _activation_incomplete(brand)
            raise
        held.workspace_ready()
        return activation_in_workspace(
            client=client,
            brand=brand,
            workspace_id=workspace.id,
            owner=held.owner,
            was_pending=branch.was_pending,
            plans=plans if branch.creates_markets else None,
        )


def _begin_async(
    *,
    brand: Brand,
    branch: Branch,
    brand_domain: str | None,
    brand_names: list[str] | None,
    plans: list[MarketPlan],
) -> Accepted:
    # A, A+C: the chained step flips the brand `active` first.
    step = JobStep.ACTIVATE_BRAND_WORKSPACE
    inputs: dict[str, Any] = {"wasPending": branch.was_pending}
    if branch.creates_markets:
        step = JobStep.ACTIVATE_MARKETS
        inputs.update(
            markets=[plan.as_metadata() for plan in plans],
            brandNames=brand_names,
            brandDomain=brand_domain,
        )
    parent_id = brand.organization.semrush_parent_workspace_id
    root_id = uuid.uuid4()

    def refuse_parent(pointer: str | None) -> None:
        if pointer is not None and pointer == parent_id:
            raise WorkspaceMisconfiguredError()

    with guard.lease(
        brand_id=brand.pk,
        started_by=AttemptStartedBy.ACTIVATE,
        job_id=root_id,
        candidate_is_pointer=True,
        checks=refuse_parent,
    ) as begun:
        assert begun.attempt is not None
        job = chain_create(
            brand=brand,
            root_id=root_id,
            attempt=begun.attempt,
            market=None,
            chained=[(step, inputs)],
        )
    return Accepted(job=job)


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
    """Activate's work once the brand's workspace is in place, the same for the sync request,
    the chained step (`options`: the chained step's, SPEC §11.5) and flat mode (`flat`: the
    parent is `workspace_id`). No `plans` (A, B): flip the brand `active`. With `plans` (C):
    its markets; a pending brand (A+C) is flipped `active` first, and a refused flip is the
    answer."""
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
    chained: bool = False,
    **options: Any,
) -> Outcome:
    """Branch C: per market create-or-resume + publish + confirm; one market's failure is its
    entry's. 200 when every market is live or publishing (created now or already), else 207.

    Sync, each market's row is finished as it is answered (`market_outcome_commit`). In the
    chained step (`chained`) the rows' final writes are gathered in the Outcome: the step's
    ending commits them with the job and the attempt (SPEC §11.5); while a publish is not
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
        if not chained:
            outcome = market_outcome_commit(client=client, outcome=outcome)
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


def _activate_flat(
    *, brand: Brand, branch: Branch, plans: list[MarketPlan], parent_id: str
) -> Outcome:
    """Flat mode: the same work, its markets' projects in the parent (no workspace, no
    attempt); the flip is not conditional on a pointer."""
    return activation_in_workspace(
        client=(
            client_for_org(brand.organization, brand_id=str(brand.pk))
            if branch.creates_markets
            else None
        ),
        brand=brand,
        workspace_id=parent_id,
        owner=uuid.uuid4(),
        was_pending=branch.was_pending,
        plans=plans if branch.creates_markets else None,
        flat=True,
    )


# --- the chained steps --------------------------------------------------------------------------


def activation_step(run: StepRun) -> None:
    """The chain's activate step, `activateMarkets` (C, A+C: its `markets`) and
    `activateBrandWorkspace` (A, B: none): the chain's checks (a chain that lost the brand
    stands down), then the work the sync request does, its rows' final writes left to the
    step's ending."""
    markets = run.job.metadata.get("markets")
    plans = [MarketPlan.from_metadata(m) for m in markets] if markets is not None else None
    checked = chain.chained_preflight(run)
    if isinstance(checked, chain.StoodDown):
        chained_stand_down(run, checked, plans or [])
        return
    attempt, brand = checked.attempt, checked.brand
    outcome = activation_in_workspace(
        # A client only for markets: a flip makes no upstream call.
        client=(
            client_for_org(
                brand.organization,
                brand_id=str(brand.pk),
                attempt_id=str(attempt.id),
                step_job_id=str(run.job.id),
            )
            if plans is not None
            else None
        ),
        brand=brand,
        workspace_id=checked.workspace_id,
        owner=attempt.id,
        was_pending=bool(run.job.metadata.get("wasPending")),
        plans=plans,
        chained=True,
        renew=run.keep_alive,
    )
    chain.step_end(run, attempt, chain.Finished(outcome))
