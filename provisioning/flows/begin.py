"""One begin for all work (SPEC §13.5): every provisioning operation, sync or async, single or
bulk, begins here, as Pulp's `dispatch` does: in one transaction, the brand row when the work
creates it, the guard and the attempt (`guard.lease`), the market reservation and the chain's
job rows. Async work is then the workers' (the root is published after commit); sync work runs
its rows at once, in the request, with the request's patience (`work_run`, `jobs.inline`).

    begun = work_begin(Work(brand=brand, started_by=..., chained=[(step, inputs)]), mode=...)
    outcome = work_run(begun)        # sync: the chain's answer (raises its errors)
    begun.job                        # async: the job the client polls

Flat work (`started_by=None`: a flat org's markets, no workspace) takes no guard and has no
attempt: its chain is its chained steps alone, the reservation owned by the chain's root.

Rows are built here only: the attempt (`guard.attempt_row`), the chain (`chain_spec`); brand
rows by `brand_row`. A bulk begin (`works_begin`, an onboarding's items: brands it creates, or
a redrive's brands resumed) writes the same rows with one INSERT per table.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from jobs import services as job_services
from jobs.endings import Defer, Finish, InlineRun
from jobs.inline import chain_run_inline
from jobs.models import AsyncJob, JobMode, JobStatus, JobStep, JobType
from provisioning import chain, guard, services
from provisioning.exceptions import ProvisioningCancelledError, UpstreamBusyError
from provisioning.flows.common import MarketPlan
from provisioning.models import AttemptStartedBy, AttemptStatus, ProvisioningAttempt
from provisioning.outcome import Outcome
from provisioning.reservations import market_reserve, reservation_row
from serenity.exceptions import BrandExistsError, SliceExistsError
from serenity.models import Brand, Market, Organization
from serenity.names import brand_name_key

Chained = Sequence[tuple[JobStep, dict[str, Any]]]


@dataclass(frozen=True)
class Work:
    """One operation to begin on one brand.

    `started_by`: the attempt's (None: flat work, no guard and no attempt). `chained`: the
    steps after provision-workspace (flat: the whole chain). `market`: the slice the chain
    reserves (its id goes to every row). `checks(pointer)`: the caller's refusals, under the
    brand's lock. `candidate_is_pointer`: the attempt settles the brand's existing workspace.
    `brand_is_new`: the begin inserts `brand` (nobody else can see it: no lock is taken).
    `refs`: carried by every row of the chain (an onboarding's). `live_markets`: the brand's
    live markets, filled by `checks` under the lock (the reservation then reads none).
    `settles`: the chain begins with provision-workspace (a deactivate's does not).
    `job_type`: the chain's (a repair's is `repairBrand`). `prepared(attempt)`: the work's own
    writes in the begin's transaction once its attempt exists (a repair's unbinding and
    reservations), answering its chained steps (instead of `chained`). `candidate`: in a bulk
    begin on an existing brand (a redrive's), the workspace the attempt settles, as the caller
    read it under its own lock of the brand."""

    brand: Brand
    started_by: AttemptStartedBy | None
    chained: Chained = ()
    market: MarketPlan | None = None
    checks: guard.Checks | None = None
    candidate_is_pointer: bool = False
    brand_is_new: bool = False
    refs: Mapping[str, Any] = field(default_factory=dict)
    live_markets: list[Market] | None = None
    settles: bool = True
    job_type: JobType = JobType.PROVISION_WORKSPACE
    prepared: Callable[[ProvisioningAttempt], Chained] | None = None
    candidate: str | None = None


@dataclass(frozen=True)
class Begun:
    """What a begin wrote: the chain's root (the job the client holds), the attempt (None for
    flat work) and the reservation."""

    work: Work
    job: AsyncJob
    attempt: ProvisioningAttempt | None
    market: Market | None


def work_begin(work: Work, *, mode: JobMode) -> Begun:
    """Begin `work` (module docstring). Raises, with nothing written: `BrandExistsError` (a
    new brand's name is taken), the guard's refusals (`ProvisioningInProgressError`, those of
    `work.checks`), `SliceExistsError` (the market's slice is taken). Sync work must not begin
    inside a caller's transaction (its steps commit their endings, durable)."""
    root_id = uuid.uuid4()
    sync = mode == JobMode.SYNC
    # One transaction: the guard's own for an existing brand; else one opened here.
    guarded = work.started_by is not None and not work.brand_is_new
    try:
        with nullcontext() if guarded else transaction.atomic(durable=sync):
            if work.brand_is_new:
                brand_insert(work.brand)
            if work.started_by is None:
                return _flat_begin(work, root_id, mode)
            with guard.lease(
                brand_id=work.brand.pk,
                started_by=work.started_by,
                job_id=root_id,
                candidate_is_pointer=work.candidate_is_pointer,
                checks=work.checks,
                brand_is_new=work.brand_is_new,
                durable=sync and guarded,
            ) as begun:
                attempt = begun.attempt
                assert attempt is not None  # the guard tolerates no missing table with a job
                market = _reserve(work, owner=attempt.id)
                if work.prepared is not None:
                    work = replace(work, chained=work.prepared(attempt))
                spec = chain_spec(work, root_id=root_id, attempt=attempt, market=market, mode=mode)
                [job] = job_services.job_chains_create([spec])
    except IntegrityError:
        # The brand's lock serializes begins; a market row can only conflict with a create of
        # the slice that takes no guard (flat mode) committed after the guard's read.
        raise SliceExistsError() from None
    return Begun(work=work, job=job, attempt=attempt, market=market)


def _flat_begin(work: Work, root_id: uuid.UUID, mode: JobMode) -> Begun:
    market = _reserve(work, owner=root_id)
    spec = chain_spec(work, root_id=root_id, attempt=None, market=market, mode=mode)
    [job] = job_services.job_chains_create([spec])
    return Begun(work=work, job=job, attempt=None, market=market)


def _reserve(work: Work, *, owner: uuid.UUID) -> Market | None:
    """The chain's market reservation, in the begin's transaction: a new brand's needs no
    read (it has no markets); an existing brand's is under its lock (no savepoint)."""
    if work.market is None:
        return None
    return market_reserve(
        brand=work.brand,
        slice_=work.market.slice,
        owner=owner,
        name=work.market.name,
        live_markets=[] if work.brand_is_new else work.live_markets,
        savepoint=work.started_by is None and not work.brand_is_new,
    )


def chain_spec(
    work: Work,
    *,
    root_id: uuid.UUID,
    attempt: ProvisioningAttempt | None,
    market: Market | None,
    mode: JobMode,
) -> job_services.ChainSpec:
    """An operation's chain: provision-workspace, then its `chained` steps (flat work, and
    work that settles no workspace: its chained steps alone; flat ones marked `flat`). Steps
    read their inputs from the database: every row carries the attempt (and the reservation)
    and the work's `refs`."""
    refs: dict[str, Any] = dict(work.refs)
    if attempt is not None:
        refs["attemptId"] = str(attempt.id)
    else:
        refs["flat"] = True
    if market is not None:
        refs["marketId"] = str(market.pk)
    steps = [job_services.StepSpec(step, {**inputs, **refs}) for step, inputs in work.chained]
    if attempt is not None and work.settles:
        steps.insert(0, job_services.StepSpec(JobStep.PROVISION_WORKSPACE, refs))
    return job_services.ChainSpec(
        organization_id=work.brand.organization_id,
        brand_id=work.brand.pk,
        job_type=work.job_type,
        root_id=root_id,
        first=steps[0],
        then=steps[1:],
        mode=mode,
    )


def work_run(begun: Begun) -> Outcome:
    """Sync work: its rows run now, in this thread, with the request's patience
    (`jobs.inline`). See `inline_answer` for what it answers and raises."""
    return inline_answer(chain_run_inline(begun.job))


def inline_answer(run: InlineRun) -> Outcome:
    """The answer of a chain run inline (its last run): the chained work's Outcome (its rows
    written); a bare chain's `{brandId, provisioningStatus}` (200). Raises the error that ended
    the chain before its chained work (`Failed`: §4's 502/504 …); `UpstreamBusyError` (503)
    when a step would have waited longer than the request may; `ProvisioningCancelledError`
    when the chain stood down (the attempt was cancelled or the brand changed)."""
    ending, end = run.ending, run.decided
    if isinstance(ending, Defer):
        raise UpstreamBusyError(retry_after=ending.delay_seconds)
    if isinstance(ending, Finish) and ending.status != JobStatus.CANCELLED:
        if isinstance(end, chain.Failed):
            raise end.error
        if isinstance(end, chain.Finished) and end.outcome is not None:
            return replace(end.outcome, market_writes=())
        if isinstance(end, chain.Promoted) and ending.result is not None:
            return Outcome(ending.result["status"], ending.result["body"])
    raise ProvisioningCancelledError()


def work_withdraw(begun: Begun) -> None:
    """Take back a begin whose work was refused before any upstream call (a sync request's
    language check): its rows go as if it had never begun (a brand it inserted with them)."""
    root_id = begun.job.pk
    with transaction.atomic():
        AsyncJob.objects.filter(Q(pk=root_id) | Q(root_id=root_id)).delete()
        if begun.work.brand_is_new:
            Brand.objects.filter(pk=begun.work.brand.pk).delete()
            return
        attempt_id = begun.attempt.id if begun.attempt is not None else root_id
        services.release_reservations(owner=attempt_id)
        ProvisioningAttempt.objects.filter(pk=attempt_id, status=AttemptStatus.PENDING).delete()


@dataclass(frozen=True, kw_only=True)
class BrandFields:
    """A new brand's writable fields, by the model's names, as a request gives them (a brand
    create's body, an onboarding's item): `brand_row` copies every one of them."""

    name: str
    base_url: str | None
    urls: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)


def brand_row(*, organization: Organization, fields: BrandFields, status: str) -> Brand:
    """A new brand's row (not saved), its id chosen now: the brand's fields, its name trimmed."""
    given = {f.name: getattr(fields, f.name) for f in dataclass_fields(BrandFields)}
    return Brand(
        **given | {"name": fields.name.strip()},
        id=uuid.uuid4(),
        organization=organization,
        workspace_mode=organization.workspace_mode,
        status=status,
    )


def brand_insert(brand: Brand) -> Brand:
    """Insert `brand`; a name taken among the org's live brands → BrandExistsError. No
    savepoint: inside a caller's transaction, the conflict ends that transaction too."""
    try:
        with transaction.atomic(savepoint=False):
            brand.save(force_insert=True)
    except IntegrityError:
        raise BrandExistsError() from None
    return brand


def works_begin(works: list[Work]) -> list[Begun]:
    """`work_begin` (async) for many works, with one INSERT per table, inside the caller's
    transaction, taking no lock: works on brands it creates (`brand_is_new`, an onboarding's
    items: new brands cannot be held or raced; their names checked free by the caller, a name
    taken meanwhile is an `IntegrityError` that spoils the caller's transaction), and works on
    existing brands that the caller holds locked and has found free of pending attempts (a
    redrive's resumed items; their attempts settle `work.candidate`, they reserve no market)."""
    begun = []
    specs = []
    markets = []
    for work in works:
        assert work.started_by is not None and (work.brand_is_new or work.market is None)
        root_id = uuid.uuid4()
        attempt = guard.attempt_row(
            brand_id=work.brand.pk,
            started_by=work.started_by,
            job_id=root_id,
            candidate=None if work.brand_is_new else work.candidate,
        )
        market = None
        if work.market is not None:
            market = reservation_row(
                brand=work.brand, slice_=work.market.slice, owner=attempt.id, name=work.market.name
            )
            markets.append(market)
        specs.append(
            chain_spec(work, root_id=root_id, attempt=attempt, market=market, mode=JobMode.ASYNC)
        )
        begun.append((work, attempt, market))
    new_brands = [work.brand for work, *_ in begun if work.brand_is_new]
    for brand in new_brands:
        brand.name_key = brand_name_key(brand.name)  # `save()` is not called
    Brand.objects.bulk_create(new_brands)
    roots = job_services.job_chains_create(specs)
    ProvisioningAttempt.objects.bulk_create([attempt for _, attempt, _ in begun])
    Market.objects.bulk_create(markets)
    return [
        Begun(work=work, job=root, attempt=attempt, market=market)
        for (work, attempt, market), root in zip(begun, roots, strict=True)
    ]
