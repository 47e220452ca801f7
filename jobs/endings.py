"""How a step ends: a value saying what happened, and the one function that commits it.

A step handler decides; `step_commit_decided` writes, once. Every ending is one transaction
holding the domain's own writes (`decide`: move the attempt, set the pointer, release a
reservation, and answer the job's ending from the rows as they are inside the transaction),
then the job's write, conditional on the claim token. `decide` answering None means the domain
refused: nothing of the transaction stays, and the caller learns it lost. `step_commit` is the
same with an ending known beforehand (`effects` returning False refuses).

    Finish     the chain ends with this step: COMPLETED / FAILED / CANCELLED, result or error
    Continue   this row is COMPLETED and the chained successor becomes runnable (hand-over)
    Repeat     this row is COMPLETED and the same step runs again after a delay (a settle read)
    Defer      the claim is given back; this row runs again after a delay (upstream Retry-After,
               or no upstream permit soon enough)

A step run inline (`InlineRun`, a sync request's, `jobs.inline`) is a claimed row like any:
its ending is written the same way, nothing is published (the request runs what follows at
once), and the ending is kept on the run for the request's answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from jobs import services
from jobs.models import JobStatus
from jobs.runner import StepRun


@dataclass(frozen=True)
class Finish:
    status: JobStatus
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class Continue:
    result: dict[str, Any]


@dataclass(frozen=True)
class Repeat:
    result: dict[str, Any]
    delay_seconds: float
    # Merged into the repeat's metadata (it inherits this row's).
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class Defer:
    delay_seconds: float
    # What else the row waits for (its `waiting_for`; e.g. "credential", SPEC §13.2).
    waiting_for: str | None = None


JobEnding = Finish | Continue | Repeat | Defer


@dataclass
class InlineRun(StepRun):
    """A step run in the caller's thread with its caller's patience (`jobs.inline`): a row the
    caller claimed. Its ending, once written, is kept here (`ending`), with what the step's app
    decided (`decided`: the app's own value, for the caller's answer)."""

    ending: JobEnding | None = None
    decided: object = None


@dataclass(frozen=True)
class Decided:
    """An ending a step leaves to be decided inside the ending's transaction
    (`step_commit_decided`): `decide` makes the domain's writes and answers the ending (None:
    nothing of the transaction stands)."""

    decide: Callable[[], JobEnding | None]


# What a step returns for its runner to commit (`committed`); None: nothing (its claim is lost).
StepResult = JobEnding | Decided | None


def committed(handler: Callable[[StepRun], StepResult]) -> Callable[[StepRun], None]:
    """`handler` as the runner runs it: the ending it returns is committed once, here."""

    def run_and_commit(run: StepRun) -> None:
        step_result_commit(run, handler(run))

    return run_and_commit


def committed_failure(
    handler: Callable[[StepRun, BaseException], StepResult],
) -> Callable[[StepRun, BaseException], None]:
    """`committed` for a step's `on_unexpected`."""

    def fail_and_commit(run: StepRun, exc: BaseException) -> None:
        step_result_commit(run, handler(run, exc))

    return fail_and_commit


def step_result_commit(run: StepRun, result: StepResult) -> bool:
    """Commit what a step returned (`committed`)."""
    if result is None:
        return False
    if isinstance(result, Decided):
        return step_commit_decided(run, result.decide)
    return step_commit(run, result)


def step_commit(
    run: StepRun, ending: JobEnding, *, effects: Callable[[], bool] | None = None
) -> bool:
    """Commit a fixed `ending` for the claimed `run`, with `effects` in the same transaction
    (`step_commit_decided` with a decision that is known beforehand). False, with nothing
    written, when `effects` refused or the claim was lost."""

    def decide() -> JobEnding | None:
        return ending if effects is None or effects() else None

    return step_commit_decided(run, decide)


def step_commit_decided(run: StepRun, decide: Callable[[], JobEnding | None]) -> bool:
    """Commit the ending `decide` returns for the claimed `run`, in one transaction.

    `decide` runs inside the transaction: it makes the domain's writes and answers the job's
    ending from the rows as they are then (an attempt that ended meanwhile decides a different
    ending in the same transaction, never a second pass). None: the domain refused; nothing of
    the transaction stays. Returns False, with nothing written, when `decide` refused or the
    claim was lost (another worker holds the job, or a cancel finished it). A `Continue` whose
    successor this worker may run itself (`JOBS_HAND_OVER_INLINE`) is handed over to the
    runner instead of published (the dispatcher publishes it if this worker dies first). An
    `InlineRun` publishes nothing: its caller runs the successor or the repeat next (handed
    over), and keeps the ending."""
    inline = isinstance(run, InlineRun)
    hand_over = inline or settings.JOBS_HAND_OVER_INLINE
    # Durable: the successor handed over (or published) below must see this commit, so the
    # ending may never be folded into a caller's transaction that commits later.
    with transaction.atomic(durable=True):
        ending = decide()
        written = _write(run, ending, publish=not hand_over) if ending is not None else False
        if not written:
            transaction.set_rollback(True)
            return False
    assert ending is not None
    if isinstance(run, InlineRun):
        run.ending = ending
    if isinstance(ending, Finish):
        run.finished_status = ending.status
    if isinstance(written, uuid.UUID) and (inline or isinstance(ending, Continue)) and hand_over:
        run.hand_over(written)
    return True


def _write(run: StepRun, ending: JobEnding, *, publish: bool) -> bool | uuid.UUID:
    """The job's own write for `ending`, conditional on the claim; a `Continue` answers its
    successor's id, a `Repeat` its repeat's (False: the claim was lost). `publish`: the
    successor is published (else its runner runs it next); a repeat is, but an inline one's."""
    if isinstance(ending, Finish):
        return services.job_finish(
            job=run.job,
            claim_token=run.claim_token,
            status=ending.status,
            result=ending.result,
            error=ending.error,
        )
    if isinstance(ending, Continue):
        successor = services.job_complete_and_release_next(
            job=run.job,
            claim_token=run.claim_token,
            result=ending.result,
            publish=publish,
        )
        return successor if successor is not None else False
    if isinstance(ending, Repeat):
        repeat = services.job_complete_and_repeat(
            job=run.job,
            claim_token=run.claim_token,
            result=ending.result,
            delay_seconds=ending.delay_seconds,
            metadata=ending.metadata,
            publish=not isinstance(run, InlineRun),
        )
        return repeat.id if repeat is not None else False
    return services.job_release(
        job_id=run.job.id,
        claim_token=run.claim_token,
        delay_seconds=ending.delay_seconds,
        waiting_for=ending.waiting_for,
    )
