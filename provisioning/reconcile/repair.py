"""Repair (SPEC §13.1): the smallest sequence of the existing steps, never a duplicate.

`repair_begin` is the one place a repair begins, through the one begin of all work
(`flows.begin.work_begin`, SPEC §13.5): the brand's guard (a brand with an attempt in flight is
refused with its 409, and the brand answers 409 to other work while the repair runs), the
attempt, the repair's own writes (`Work.prepared`) and the chain's rows (job type
`repairBrand`) in one transaction, as an async create begins.

- A workspace gone or failed: the brand is unbound in that transaction (its pointer cleared,
  its markets' projects forgotten: `publish_failed` with no project, reserved by the attempt),
  then the chain is provision-workspace (create-or-adopt by name, settle, promote: the
  failed workspace is terminal, so it is never adopted) → `repairMarkets`, each market as a
  project gone.
- Only project drift: the brand's workspace is the one the plan has just listed, so the
  attempt begins promoted on it (no settle read) and the chain is `repairMarkets` alone.

`repairMarkets` per market: a project gone → `markets.market_provision` on the reserved row
(one listing to adopt a project on the slice, else create; tracked URL, publish, confirm), then
its stored prompts pushed again (`repush`); not live → publish, confirm; tracked URL changed
→ tracked URL, publish, confirm. The step returns its ending and the rows' final writes are
committed with it by the runner, as every chained step's (`chain.chain_step`); a publish not
yet confirmed re-runs the step later, which only confirms.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.utils import timezone

from jobs.models import AsyncJob, JobMode, JobStatus, JobStep, JobType
from jobs.runner import StepRun
from kernel.errors import DomainError
from provisioning import chain, guard
from provisioning.exceptions import ProvisioningIncompleteError
from provisioning.flows.begin import Chained, Work, work_begin
from provisioning.flows.common import (
    MarketPlan,
    chained_preflight,
    chained_stand_down,
    market_provision_planned,
)
from provisioning.markets import market_publish_confirm
from provisioning.models import AttemptStartedBy, ProvisioningAttempt
from provisioning.outcome import MarketEnd, Outcome
from provisioning.reconcile.exceptions import BrandChangedError
from provisioning.reconcile.models import (
    PROJECT_KINDS,
    WORKSPACE_KINDS,
    DriftKind,
    ReconciliationItem,
)
from provisioning.reconcile.plan import COMPARED
from provisioning.reconcile.repush import prompts_repush
from provisioning.reconcile.services import repair_ended
from provisioning.semrush import SemrushClient, SemrushError
from provisioning.upstream import client_for_org, translate_upstream
from serenity.models import Brand, BrandStatus, Market, MarketStatus
from serenity.slices import slice_from_ids

RECONCILIATION_KEY = "reconciliationId"


def repair_begin(
    *, brand: Brand, items: Sequence[ReconciliationItem], reconciliation_id: uuid.UUID
) -> uuid.UUID:
    """Begin the brand's `repairBrand` chain for `items` (module docstring); its root id, now
    on the items. Raises the guard's `ProvisioningInProgressError` (409), `BrandChangedError`
    (the brand is no longer active, or points at another workspace than the plan read),
    `ProvisioningIncompleteError` (no workspace to repair projects in)."""
    rebuild = any(i.kind in WORKSPACE_KINDS for i in items)
    markets = [i for i in items if i.kind in PROJECT_KINDS and i.market_id is not None]

    def prepared(attempt: ProvisioningAttempt) -> Chained:
        """Under the brand's lock, once the attempt exists: the brand unbound (a rebuild) or
        the attempt promoted on the workspace the plan listed; the markets reserved; the items
        naming the chain."""
        if rebuild:
            # `_refusals` found the pointer as the plan read it, under the lock.
            _unbind(brand=brand, pointer=brand.semrush_sub_workspace_id)
        else:
            now = timezone.now()
            ProvisioningAttempt.objects.filter(pk=attempt.pk).update(
                workspace_promoted=True, promoted_at=now, candidate_at=now
            )
        entries = _markets_reserve(markets, owner=attempt.pk, rebuilt=rebuild)
        ReconciliationItem.objects.filter(pk__in=[i.pk for i in items]).update(
            job_id=attempt.job_id
        )
        return [
            (
                JobStep.REPAIR_MARKETS,
                {"markets": entries, RECONCILIATION_KEY: str(reconciliation_id)},
            )
        ]

    work = Work(
        brand=brand,
        started_by=AttemptStartedBy.REPAIR,
        checks=_refusals(brand),
        candidate_is_pointer=not rebuild,
        # A rebuild provisions the workspace again first; otherwise `repairMarkets` alone.
        settles=rebuild,
        job_type=JobType.REPAIR_BRAND,
        prepared=prepared,
    )
    return work_begin(work, mode=JobMode.ASYNC).job.pk


def _refusals(brand: Brand) -> guard.Checks:
    def check(pointer: str | None) -> None:
        current = Brand.objects.filter(pk=brand.pk).values_list("status", flat=True).first()
        if current != BrandStatus.ACTIVE or pointer != brand.semrush_sub_workspace_id:
            raise BrandChangedError()
        if pointer is None:
            raise ProvisioningIncompleteError()

    return check


def _unbind(*, brand: Brand, pointer: str | None) -> None:
    """The brand lets go of its lost workspace: its pointer cleared (conditional on the one
    read under the lock) and its markets' projects forgotten."""
    Brand.objects.filter(pk=brand.pk, semrush_sub_workspace_id=pointer).update(
        semrush_sub_workspace_id=None, updated_at=timezone.now()
    )
    Market.objects.filter(brand=brand, deleted_at__isnull=True, status__in=COMPARED).update(
        semrush_project_id=None,
        workspace_id=None,
        status=MarketStatus.PUBLISH_FAILED,
        publish_started_at=None,
        updated_at=timezone.now(),
    )


def _markets_reserve(
    items: Sequence[ReconciliationItem], *, owner: uuid.UUID, rebuilt: bool
) -> list[dict[str, Any]]:
    """Each item's market reserved by the attempt (a market that changed since the plan read
    it is left out); a project gone is forgotten (`publish_failed`, no project) so that the
    repair adopts or creates one. What the step reads: `{marketId, kind, adoptable}`."""
    entries = []
    now = timezone.now()
    for item in items:
        assert item.market_id is not None
        rows = Market.objects.filter(pk=item.market_id, deleted_at__isnull=True, reserved_by=None)
        if not rebuilt:
            rows = rows.filter(semrush_project_id=item.project_id, status__in=COMPARED)
        fields: dict[str, Any] = {"reserved_by": owner, "updated_at": now}
        if item.kind == DriftKind.PROJECT_GONE:
            fields.update(
                semrush_project_id=None, status=MarketStatus.PUBLISH_FAILED, publish_started_at=None
            )
        if rows.update(**fields):
            entries.append(
                {
                    "marketId": str(item.market_id),
                    "kind": item.kind,
                    "adoptable": bool((item.slice or {}).get("adoptable")),
                }
            )
    return entries


# --- the chained step ---------------------------------------------------------------------------


def repair_markets_step(run: StepRun) -> chain.Ending:
    """`repairMarkets`: each market's repair in the brand's (promoted) workspace, the rows'
    final writes left to the step's ending; a chain that lost the brand stands down."""
    checked = chained_preflight(run)
    if isinstance(checked, chain.StoodDown):
        return chained_stand_down(run, checked, [])
    attempt, brand, workspace_id = checked.attempt, checked.brand, checked.workspace_id
    client = client_for_org(brand.organization, brand_id=str(brand.pk), attempt_id=str(attempt.id))
    entries: list[dict[str, Any]] = []
    outcomes: list[tuple[dict[str, Any], Outcome]] = []
    for wanted in run.job.metadata.get("markets") or []:
        market = (
            Market.objects.select_related("brand__organization")
            .filter(pk=wanted["marketId"], deleted_at__isnull=True, reserved_by=attempt.id)
            .first()
        )
        if market is None:
            entries.append(_entry(wanted, None, BrandChangedError()))
            continue
        outcome = _market_repair(
            run, client, brand, market, attempt, workspace_id, DriftKind(wanted["kind"])
        )
        outcomes.append((wanted, outcome))
    confirm_in = min((o.confirm_in for _, o in outcomes if o.confirm_in is not None), default=None)
    writes = tuple(w for _, o in outcomes for w in o.market_writes)
    if confirm_in is None:
        writes = _prompts_after(run, client, brand, workspace_id, outcomes, writes)
    for wanted, outcome in outcomes:
        live = any(w.end is MarketEnd.LIVE for w in outcome.market_writes)
        entries.append(_entry(wanted, outcome, None if live else _error_of(outcome)))
    answer = Outcome(
        200 if all(e["repaired"] for e in entries) else 207,
        {"brandId": str(brand.pk), "markets": entries},
        market_writes=writes,
        confirm_in=confirm_in,
    )
    return chain.Ending(attempt, chain.Finished(answer))


def _market_repair(
    run: StepRun,
    client: SemrushClient,
    brand: Brand,
    market: Market,
    attempt: ProvisioningAttempt,
    workspace_id: str,
    kind: DriftKind,
) -> Outcome:
    if kind == DriftKind.PROJECT_GONE:
        slice_ = slice_from_ids(
            geo_target_id=market.geo_target_id, language_code=market.language_code
        )
        assert slice_ is not None
        return market_provision_planned(
            client=client,
            brand=brand,
            plan=MarketPlan(slice=slice_, name=market.name),
            reservation=market,
            owner=attempt.id,
            workspace_id=workspace_id,
            owned_workspace=True,
            renew=run.keep_alive,
            workspace_new=attempt.freshly_created and run.job.expired_claims == 0,
        )
    try:
        if market.status != MarketStatus.PUBLISHING:
            project_id = str(market.semrush_project_id)
            if kind == DriftKind.TRACKED_URL_CHANGED and brand.base_url:
                client.set_tracked_url(
                    workspace_id=workspace_id,
                    project_id=project_id,
                    primary_url=brand.base_url,
                    owned=True,
                )
            client.publish_project(workspace_id=workspace_id, project_id=project_id, owned=True)
            Market.objects.filter(pk=market.pk, reserved_by=attempt.id).update(
                status=MarketStatus.PUBLISHING,
                publish_started_at=timezone.now(),
                publish_error=None,
                workspace_id=workspace_id,
            )
            market.refresh_from_db()
    except SemrushError as exc:
        return Outcome.from_error(translate_upstream(exc))
    return market_publish_confirm(
        client=client, market=market, owner=attempt.id, owned_workspace=True
    )


def _prompts_after(
    run: StepRun,
    client: SemrushClient,
    brand: Brand,
    workspace_id: str,
    outcomes: list[tuple[dict[str, Any], Outcome]],
    writes: tuple[Any, ...],
) -> tuple[Any, ...]:
    """A project made again is given the market's stored prompts back (once every publish
    is confirmed: the step's last run); its row then says it has unpublished updates."""
    pushed: set[uuid.UUID] = set()
    for wanted, outcome in outcomes:
        if wanted["kind"] != DriftKind.PROJECT_GONE:
            continue
        for write in outcome.market_writes:
            if write.end is MarketEnd.LIVE and write.project_id is not None:
                fresh = not wanted.get("adoptable") and run.job.expired_claims == 0
                if prompts_repush(
                    client=client,
                    market_id=write.market_id,
                    workspace_id=workspace_id,
                    project_id=write.project_id,
                    fresh=fresh,
                ):
                    pushed.add(write.market_id)
    return tuple(
        replace(w, live_status=MarketStatus.LIVE_WITH_UNPUBLISHED_UPDATES)
        if w.market_id in pushed and w.end is MarketEnd.LIVE
        else w
        for w in writes
    )


def _error_of(outcome: Outcome | None) -> DomainError | dict[str, Any]:
    body = outcome.body if outcome is not None else {}
    return {
        "code": body.get("error") or "repairFailed",
        "message": body.get("message") or "The market could not be repaired.",
    }


def _entry(
    wanted: dict[str, Any], outcome: Outcome | None, error: DomainError | dict[str, Any] | None
) -> dict[str, Any]:
    if isinstance(error, DomainError):
        error = {"code": error.code, "message": error.message}
    return {
        "marketId": wanted["marketId"],
        "kind": wanted["kind"],
        "repaired": error is None and outcome is not None,
        "error": error,
    }


# --- the chain's end ----------------------------------------------------------------------------


def repair_chain_ended(
    sender: Any,
    *,
    root_id: uuid.UUID,
    job_type: str,
    status: str,
    metadata: dict[str, Any],
    **_: Any,
) -> None:
    """`jobs.signals.chain_ended` receiver: a `repairBrand` chain ended (inside its ending's
    transaction). Its items are counted from the step's answer (a chain that ended before
    `repairMarkets` answered fails them all with the chain's error), and the markets it still
    held are let go."""
    if job_type != JobType.REPAIR_BRAND:
        return
    root = AsyncJob.objects.select_related("current").get(pk=root_id)
    ending = root.current or root
    answered = ending.step == JobStep.REPAIR_MARKETS and status == JobStatus.COMPLETED
    body = ((ending.result or {}).get("body") or {}) if answered else {}
    mended: set[uuid.UUID | None] = {None} if answered else set()
    errors: dict[Any, dict[str, str]] = {}
    chain_error = ending.error or {"code": "repairFailed", "message": "Not repaired."}
    for entry in body.get("markets") or []:
        market_id = uuid.UUID(entry["marketId"])
        if entry.get("repaired"):
            mended.add(market_id)
        else:
            errors[market_id] = entry.get("error") or chain_error
    default = {
        "code": str(chain_error.get("code") or "repairFailed"),
        "message": str(chain_error.get("message") or "Not repaired."),
    }
    for item in ReconciliationItem.objects.filter(job_id=root_id).values_list(
        "market_id", flat=True
    ):
        errors.setdefault(item, default)
    repair_ended(root_id=root_id, mended=mended, errors=errors)
    attempt_id = metadata.get("attemptId")
    if attempt_id:
        Market.objects.filter(reserved_by=attempt_id).update(reserved_by=None)
