"""Writes on job rows: chains, claims, hand-overs and endings (SPEC §4.6, §6.3, §6.4). The
dispatcher and the operator's republish are in `jobs.dispatch`, retention in `jobs.retention`.

Every function that changes a claimed job is conditional on the caller's claim token, so a
worker whose lease expired (and whose job another worker re-claimed) writes nothing.
Callers that combine a job write with a business write wrap both in one transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any, cast

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Field, Q
from django.utils import timezone

from jobs import states
from jobs.models import AsyncJob, JobMode, JobStatus, JobStep, JobType
from jobs.publishing import publish_job
from jobs.signals import chain_ended_check, chain_ended_send
from kernel import context, tracing

CHAINED_POSITION = 1000
# The key, in every row's `metadata`, of the id of the request that started the chain.
REQUEST_ID_KEY = "requestId"


def task_name_for(step: str) -> str:
    """Each step is one Celery task with a stable explicit name."""
    return f"serenity.step.{step}"


@dataclass(frozen=True)
class StepSpec:
    step: JobStep
    metadata: dict[str, Any] = field(default_factory=dict)


def publish_on_commit(
    *, job_id: uuid.UUID, step: str, countdown: float = 0.0, premarked: bool = False
) -> None:
    """Publish after the surrounding transaction commits; a failure is left to the dispatcher.
    `premarked`: the row was written with its `published_at` already set."""
    transaction.on_commit(
        partial(
            publish_job,
            job_id=job_id,
            task_name=task_name_for(step),
            countdown=countdown,
            premarked=premarked,
        ),
        robust=True,
    )


@dataclass(frozen=True)
class ChainSpec:
    """One chain to create: its first step and its chained steps (none, one, or several run in
    order), with a root id chosen by the caller (so that its other rows can point at it before
    the jobs exist)."""

    organization_id: uuid.UUID
    brand_id: uuid.UUID | None
    job_type: JobType
    first: StepSpec
    then: StepSpec | Sequence[StepSpec] | None = None
    root_id: uuid.UUID = field(default_factory=uuid.uuid4)
    # `sync`: the request that writes the chain runs it at once (`jobs.inline`): nothing is
    # published; the dispatcher sends it to a worker only if that request dies.
    mode: JobMode = JobMode.ASYNC


def job_chains_create(specs: list[ChainSpec]) -> list[AsyncJob]:
    """Create chains, inside the caller's transaction: for each, its root (runnable now) and
    its chained jobs (each not runnable until the one before it hands over), with one INSERT
    for every row of every chain (a bulk onboarding starts a thousand); each async root is
    published on commit. A spec's `root_id` lets the caller reference the job (e.g. from its
    attempt) before the rows exist (foreign keys are checked at commit). Every row records the
    request that started it (`metadata.requestId`, from the log context): the worker puts it
    on every line it writes for the chain. Returns the roots."""
    chains = [job_chain_rows(spec) for spec in specs]
    AsyncJob.objects.bulk_create([row for rows in chains for row in rows])
    roots = [rows[0] for rows in chains]
    published = [root for root in roots if root.mode == JobMode.ASYNC]
    if not published:
        return roots
    if len(published) == 1:
        publish_on_commit(job_id=published[0].id, step=published[0].step, premarked=True)
    else:
        transaction.on_commit(
            partial(_publish_all, [(root.id, root.step) for root in published]), robust=True
        )
    return roots


def job_chain_rows(spec: ChainSpec) -> list[AsyncJob]:
    """The rows of one chain, in order, not saved: the root (runnable now) and its chained jobs
    (each not runnable until the one before it hands over). `job_chains_create` inserts them."""
    now = timezone.now()
    origin = chain_origin()
    # The request's trace: every step of the chain continues it (kernel.tracing.step_span).
    trace_context = tracing.traceparent()
    chained = [spec.then] if isinstance(spec.then, StepSpec) else list(spec.then or ())
    ids = [uuid.uuid4() for _ in chained]
    # `published_at` is set now: the on-commit publish then needs no UPDATE, and clears it
    # when it fails so that the dispatcher re-sends at once.
    root = AsyncJob(
        id=spec.root_id,
        organization_id=spec.organization_id,
        brand_id=spec.brand_id,
        job_type=spec.job_type,
        mode=spec.mode,
        step=spec.first.step,
        metadata={**spec.first.metadata, **origin},
        trace_context=trace_context,
        next_id=ids[0] if ids else None,
        current_id=spec.root_id,
        position=0,
        run_after=now,
        published_at=now,
    )
    return [root] + [
        AsyncJob(
            id=ids[index],
            organization_id=spec.organization_id,
            brand_id=spec.brand_id,
            job_type=spec.job_type,
            mode=spec.mode,
            step=step.step,
            metadata={**step.metadata, **origin},
            trace_context=trace_context,
            next_id=ids[index + 1] if index + 1 < len(ids) else None,
            root_id=spec.root_id,
            position=CHAINED_POSITION + index,
            run_after=None,
        )
        for index, step in enumerate(chained)
    ]


def _publish_all(jobs: list[tuple[uuid.UUID, str]]) -> None:
    """Publish many premarked roots in order; at the first failure (the broker is down) stop
    and clear the rest's `published_at`, so that the dispatcher sends them at its next round
    instead of each waiting here for its publish timeout."""
    for done, (job_id, step) in enumerate(jobs):
        if not publish_job(job_id=job_id, task_name=task_name_for(step), premarked=True):
            rest = [pk for pk, _ in jobs[done + 1 :]]
            AsyncJob.objects.filter(pk__in=rest, claim_token__isnull=True).update(published_at=None)
            return


def chain_origin() -> dict[str, str]:
    """What a new chain records of the request that starts it (its rows' `metadata`)."""
    request_id = context.current().get("request_id")
    return {REQUEST_ID_KEY: request_id} if request_id else {}


def job_claim(*, job_id: uuid.UUID) -> AsyncJob | None:
    """Claim a due, unfinished job for this worker: one conditional UPDATE that sets a fresh
    claim token and lease and returns the claimed row (`claim_token` is the claim). None when
    the job is finished, not due, or held by a live lease (a duplicate or late delivery, which
    must do nothing). Taking over an expired claim (its token is still set: every clean end
    clears or finishes it) counts in `expired_claims`.

    This is the one raw statement of the product code (SPEC §10.1): the ORM's filtered
    `update()` returns a row count, not the row, and every step starts here, so a claim that
    also read the row back would be two statements where one is enough. The statement is
    written from the model's meta; every value is a parameter."""
    now = timezone.now()
    lease_expires_at = now + timedelta(seconds=settings.JOBS_LEASE_SECONDS)
    params = [
        _prep("claim_token", uuid.uuid4()),
        _prep("lease_expires_at", lease_expires_at),
        _prep("started_at", now),
        _prep("updated_at", now),
        _prep("id", job_id),
        JobStatus.IN_PROGRESS.value,
        _prep("run_after", now),
        _prep("lease_expires_at", now),
    ]
    claimed = list(AsyncJob.objects.raw(_claim_sql(), params))
    return claimed[0] if claimed else None


def _field(name: str) -> Field[Any, Any]:
    field = AsyncJob._meta.get_field(name)
    assert isinstance(field, Field)
    return field


def _prep(name: str, value: Any) -> Any:
    """`value` as the database takes it for the field (a UUID is text on SQLite)."""
    return _field(name).get_db_prep_value(value, connection)


def _claim_sql() -> str:
    quote = connection.ops.quote_name

    def column(name: str) -> str:
        return quote(cast(str, _field(name).column))

    return (
        f"UPDATE {quote(AsyncJob._meta.db_table)}"  # noqa: S608 - identifiers from the meta
        f" SET {column('claim_token')} = %s, {column('lease_expires_at')} = %s,"
        f" {column('started_at')} = COALESCE({column('started_at')}, %s),"
        f" {column('run_count')} = {column('run_count')} + 1,"
        f" {column('expired_claims')} = {column('expired_claims')}"
        f" + CASE WHEN {column('claim_token')} IS NULL THEN 0 ELSE 1 END,"
        f" {column('updated_at')} = %s"
        f" WHERE {column('id')} = %s AND {column('status')} = %s AND {column('run_after')} <= %s"
        f" AND ({column('claim_token')} IS NULL OR {column('lease_expires_at')} < %s)"
        " RETURNING *"
    )


def job_renew(*, job_id: uuid.UUID, claim_token: uuid.UUID, seconds: float | None = None) -> bool:
    """Extend the lease between upstream calls, to JOBS_LEASE_SECONDS from now (or `seconds`,
    for a step that must outlive a known bound). False: the claim was lost."""
    lease = settings.JOBS_LEASE_SECONDS if seconds is None else seconds
    lease_expires_at = timezone.now() + timedelta(seconds=lease)
    renewed = AsyncJob.objects.filter(
        pk=job_id, status=JobStatus.IN_PROGRESS, claim_token=claim_token
    ).update(lease_expires_at=lease_expires_at)
    return renewed == 1


def job_release(
    *,
    job_id: uuid.UUID,
    claim_token: uuid.UUID,
    delay_seconds: float,
    waiting_for: str | None = None,
) -> bool:
    """Give the claim back and run the same step again after `delay_seconds` (e.g. an upstream
    Retry-After too long to wait in the worker), by a countdown message (the dispatcher as
    backstop), or sooner when its app wakes it (`waiting_for`: `dispatch.jobs_wake`). The
    row's chain and result are untouched: a release is not a failure and ends nothing."""
    run_after = timezone.now() + timedelta(seconds=delay_seconds)
    changed = AsyncJob.objects.filter(
        pk=job_id, status=JobStatus.IN_PROGRESS, claim_token=claim_token
    ).update(
        claim_token=None,
        lease_expires_at=None,
        run_after=run_after,
        published_at=None,
        waiting_for=waiting_for,
    )
    if changed and delay_seconds <= settings.JOBS_COUNTDOWN_MAX_SECONDS:
        step = AsyncJob.objects.values_list("step", flat=True).get(pk=job_id)
        publish_on_commit(job_id=job_id, step=step, countdown=delay_seconds)
    # A longer delay (hours: a webhook retry) is no countdown message: the broker would
    # redeliver it after its visibility timeout. The dispatcher publishes the row when due
    # (`published_at` NULL), within JOBS_DISPATCH_INTERVAL_SECONDS.
    return changed == 1


def job_finish(
    *,
    job: AsyncJob,
    claim_token: uuid.UUID | None,
    status: JobStatus,
    result: Any = None,
    error: dict[str, Any] | None = None,
) -> bool:
    """Finish a step as the last of its chain (its successor, if any, will never run and is
    cancelled with it, in the same transaction: a worker dying between the two writes would
    leave the successor unfinished and never runnable). Conditional on the claim token when one
    is given."""
    has_successor = job.next_id is not None
    # One transaction with the successors' cancel and `chain_ended`'s receivers (their outbox
    # rows); inside the step's ending (the usual caller) it adds nothing.
    with transaction.atomic(savepoint=False):
        changed = states.transition(
            job_id=job.id, to=status, claim_token=claim_token, result=result, error=error
        )
        if changed and has_successor:
            _cancel_successors(job=job, error=error)
        if changed:
            chain_ended_send(job=job, status=status)
    return changed


def _cancel_successors(*, job: AsyncJob, error: dict[str, Any] | None) -> None:
    root_id = job.root_id or job.id
    AsyncJob.objects.filter(
        root_id=root_id, status=JobStatus.IN_PROGRESS, position__gt=job.position
    ).update(
        status=JobStatus.CANCELLED,
        error=error or cancelled_error(),
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    )


def job_complete_and_release_next(
    *, job: AsyncJob, claim_token: uuid.UUID, result: Any = None, publish: bool = True
) -> uuid.UUID | None:
    """Complete this step and make its chained successor runnable (the chain's current step),
    publishing it after commit, or, with `publish=False`, leaving it to the caller's worker to
    claim and run next (`StepRun.hand_over`; the dispatcher publishes it if that worker dies
    first). Returns the successor's id, or None when the claim was lost."""
    successor_id = job.next_id
    assert successor_id is not None
    # The chain's current step moves to the successor: a root records it in its own final
    # UPDATE (as `job_complete_and_repeat` does), a later step in an UPDATE of its root.
    chain: dict[str, Any] = {"current_id": successor_id, "step_count": F("step_count") + 1}
    if not states.transition(
        job_id=job.id,
        to=JobStatus.COMPLETED,
        claim_token=claim_token,
        result=result,
        **(chain if job.root_id is None else {}),
    ):
        return None
    now = timezone.now()
    released = AsyncJob.objects.filter(pk=successor_id, status=JobStatus.IN_PROGRESS).update(
        run_after=now, published_at=now, updated_at=now
    )
    if job.root_id is not None:
        AsyncJob.objects.filter(pk=job.root_id).update(**chain, updated_at=now)
    if not released:
        # A cancel finished the successor while this step ran: the chain ends here, with it.
        chain_ended_check(root_id=job.root_id or job.id)
    if publish:
        step = AsyncJob.objects.values_list("step", flat=True).get(pk=successor_id)
        publish_on_commit(job_id=successor_id, step=step, premarked=True)
    return successor_id


def job_complete_and_repeat(
    *,
    job: AsyncJob,
    claim_token: uuid.UUID,
    result: Any,
    delay_seconds: float,
    metadata: dict[str, Any] | None = None,
    publish: bool = True,
) -> AsyncJob | None:
    """Complete this step and insert a repeat of it (the next settle read) after
    `delay_seconds`, ahead of any chained job. No worker slot is held while waiting: the wait is
    the new row's `run_after` plus a countdown message (and the dispatcher as backstop). The
    repeat inherits this row's metadata, with `metadata` merged in. `publish=False`: the
    caller runs the repeat itself when due (a sync request's, `jobs.inline`; the dispatcher
    publishes it if that caller dies)."""
    now = timezone.now()
    root_id = job.root_id or job.id
    repeat_id = uuid.uuid4()
    # The finished row's final UPDATE already points it at its repeat (the links are foreign
    # keys checked at commit, so the repeat may be inserted after): that lets go of the
    # successor, which `next` (one-to-one) needs before the repeat takes it. A root also
    # records its repeat as the chain's current step in that same UPDATE.
    chain: dict[str, Any] = {"current_id": repeat_id, "step_count": F("step_count") + 1}
    with transaction.atomic(savepoint=False):
        if not states.transition(
            job_id=job.id,
            to=JobStatus.COMPLETED,
            claim_token=claim_token,
            result=result,
            next_id=repeat_id,
            **(chain if job.root_id is None else {}),
        ):
            return None
        repeat = job_repeat_row(
            job, repeat_id=repeat_id, delay_seconds=delay_seconds, metadata=metadata
        )
        repeat.save(force_insert=True)
        if job.root_id is not None:
            AsyncJob.objects.filter(pk=root_id).update(**chain, updated_at=now)
    if publish:
        publish_on_commit(
            job_id=repeat.id, step=repeat.step, countdown=delay_seconds, premarked=True
        )
    return repeat


def job_repeat_row(
    job: AsyncJob,
    *,
    delay_seconds: float,
    metadata: dict[str, Any] | None = None,
    repeat_id: uuid.UUID | None = None,
) -> AsyncJob:
    """The repeat of `job` (not saved): the same step, next in its chain, runnable after
    `delay_seconds`, ahead of `job`'s successor, with `job`'s metadata (`metadata` merged in)."""
    run_after = timezone.now() + timedelta(seconds=delay_seconds)
    return AsyncJob(
        id=repeat_id or uuid.uuid4(),
        organization_id=job.organization_id,
        brand_id=job.brand_id,
        job_type=job.job_type,
        mode=job.mode,
        step=job.step,
        metadata={**job.metadata, **metadata} if metadata else job.metadata,
        trace_context=job.trace_context,
        root_id=job.root_id or job.id,
        next_id=job.next_id,
        position=job.position + 1,
        run_after=run_after,
        published_at=run_after,
    )


def cancelled_error() -> dict[str, Any]:
    return {
        "code": "provisioningCancelled",
        "message": "Provisioning was cancelled.",
        "retryable": True,
    }


def chain_cancel(
    *, root_id: uuid.UUID, error: dict[str, Any] | None = None, only_unstarted: bool = False
) -> int:
    """Mark the chain's unfinished jobs CANCELLED. With `only_unstarted`, a job that a worker
    holds under a live lease is left alone. Returns how many rows changed."""
    now = timezone.now()
    query = AsyncJob.objects.filter(Q(pk=root_id) | Q(root_id=root_id)).filter(
        status=JobStatus.IN_PROGRESS
    )
    if only_unstarted:
        query = query.filter(Q(claim_token__isnull=True) | Q(lease_expires_at__lt=now))
    # One transaction with `chain_ended`'s receivers (their outbox rows).
    with transaction.atomic(savepoint=False):
        changed = query.update(
            status=JobStatus.CANCELLED,
            error=error or cancelled_error(),
            finished_at=now,
            updated_at=now,
            claim_token=None,
            lease_expires_at=None,
        )
        if changed:
            chain_ended_check(root_id=root_id)
    return changed


def chains_cancel(*, root_ids: list[uuid.UUID], only_unstarted: bool = False) -> set[uuid.UUID]:
    """`chain_cancel` for many chains in a fixed number of statements (SPEC §12.4), without
    its `chain_ended`: the caller sends `chains_ended_check` once it has written the rest of
    the ending. The rows are locked (primary-key order) between the read of which chains
    change and the write. Returns the roots of the chains a row of which changed."""
    now = timezone.now()
    query = AsyncJob.objects.filter(Q(pk__in=root_ids) | Q(root_id__in=root_ids)).filter(
        status=JobStatus.IN_PROGRESS
    )
    if only_unstarted:
        query = query.filter(Q(claim_token__isnull=True) | Q(lease_expires_at__lt=now))
    with transaction.atomic(savepoint=False):
        rows = list(query.select_for_update().order_by("pk").values_list("pk", "root_id"))
        AsyncJob.objects.filter(pk__in=[pk for pk, _ in rows]).update(
            status=JobStatus.CANCELLED,
            error=cancelled_error(),
            finished_at=now,
            updated_at=now,
            claim_token=None,
            lease_expires_at=None,
        )
    return {root_id or pk for pk, root_id in rows}


def chain_fail(*, root_id: uuid.UUID, error: dict[str, Any]) -> int:
    """Mark the chain's unfinished jobs FAILED (e.g. its attempt was reconciled as stale)."""
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        changed = (
            AsyncJob.objects.filter(Q(pk=root_id) | Q(root_id=root_id))
            .filter(status=JobStatus.IN_PROGRESS)
            .update(
                status=JobStatus.FAILED,
                error=error,
                finished_at=now,
                updated_at=now,
                claim_token=None,
                lease_expires_at=None,
            )
        )
        if changed:
            chain_ended_check(root_id=root_id)
    return changed
