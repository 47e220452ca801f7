"""The provisioning chain (SPEC §6.3): the one way any step of the chain ends, and the checks a
chained step makes before and at its end. The steps themselves are flows (the first one,
provision-workspace, is `flows.provision`).

A step decides what happened and returns it as a value (`Ending`: its `StepEnd`, with its
attempt); the runner's wrapper (`chain_step`) hands it to `step_end`, which commits it once,
in one transaction (`jobs.endings.step_commit_decided`): the job's end, the attempt's move, the
final writes of the chain's market rows (or the release of its reservation), the hand-over to
the chained job. The job's ending is decided inside that transaction, so an attempt that ended
meanwhile ends the step there and then; nothing calls back into `step_end`.

    Promoted      the candidate is ready: pointer set, attempt promoted, chained job runnable
                  (no chained job: the attempt is ready and the chain COMPLETED)
    SettleLater   not ready yet: the next status read after the backoff (a new row)
    Failed        before promotion: the attempt fails with the error's reason, the chain with
                  its code; a fresh candidate is emptied (never a terminal one)
    StoodDown     the attempt is no longer pending, or the brand changed under the chain:
                  CANCELLED (FAILED when reconciled as stale); a promoted workspace stays
    Finished      the chained work answered: its market rows' final writes, the attempt
                  ready and the chain COMPLETED with the answer, in one transaction (None:
                  nothing left to write → CANCELLED; a single market whose publish failed:
                  FAILED `publishFailed`; a publish not confirmed yet: as RetryLater)
    Discarded     the answer's final write was refused (a deactivate or cancel won): its live
                  projects deleted, their rows dropped, CANCELLED
    RetryLater    upstream asked to wait longer than a worker should, or a publish is to be
                  read again: the same row, later

A step refused an upstream permit (`quota.PermitDeferredError`, SPEC §10.6) is released by
`quota_deferring`, whatever it was doing: the same row runs again at its place in the
credential's queue (a later `runAfter`, and a countdown message for then).
    Crashed       anything unexpected: FAILED `jobFailed`; before promotion the attempt fails
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError
from django.utils import timezone

from jobs import services as job_services
from jobs.endings import Continue, Finish, InlineRun, JobEnding, Repeat, step_commit_decided
from jobs.endings import Defer as JobDefer
from jobs.models import JobStatus
from jobs.runner import StepHandler, StepRun
from kernel.errors import DomainError
from provisioning import credentials, quota, services, states
from provisioning.exceptions import (
    JOB_FAILED_MESSAGE,
    UpstreamBusyError,
    UpstreamError,
    attempt_reason,
    job_error,
)
from provisioning.market_writes import market_writes_commit, market_writes_refused
from provisioning.models import AttemptReason, AttemptStatus, ProvisioningAttempt
from provisioning.outcome import MarketWrite, Outcome
from provisioning.semrush import SemrushClient
from provisioning.upstream import client_for_org
from provisioning.workspace import (
    Promotion,
    cleanup_candidate,
    workspace_promote,
)
from serenity.models import Organization

logger = logging.getLogger("serenity.provisioning")


@dataclass(frozen=True)
class Promoted:
    workspace_id: str


@dataclass(frozen=True)
class SettleLater:
    delay_seconds: float
    # The hop made no status read: the first waits the learned settle time (SPEC §11.1).
    first_read_deferred: bool = False


# Metadata of a chain's settle rows whose first hop deferred its status read.
FIRST_READ_DEFERRED = "firstReadDeferred"
# Metadata of a settle row: the workspace's age when the read was scheduled to run (seconds).
SETTLE_AGE = "settleAge"


@dataclass(frozen=True)
class Failed:
    error: DomainError
    # The attempt's reason when not the error's own (`exceptions.attempt_reason`).
    reason: AttemptReason | None = None


@dataclass(frozen=True)
class StoodDown:
    attempt: ProvisioningAttempt | None


@dataclass(frozen=True)
class Finished:
    outcome: Outcome | None


@dataclass(frozen=True)
class Discarded:
    """The chained work's final write was refused (SPEC §6.3: a deactivate or cancel won after
    its last upstream call): the projects it was making live have been deleted upstream, and
    `market_writes` (their rows dropped, the other rows as answered) end with the job."""

    market_writes: tuple[MarketWrite, ...]


@dataclass(frozen=True)
class RetryLater:
    delay_seconds: float
    waiting_for: str | None = None


@dataclass(frozen=True)
class Crashed:
    pass


StepEnd = Promoted | SettleLater | Failed | StoodDown | Finished | Discarded | RetryLater | Crashed


@dataclass(frozen=True)
class Ending:
    """What a step of the chain returns: its attempt (as read by the step) and its end, for
    the runner to commit (`chain_step`)."""

    attempt: ProvisioningAttempt | None
    end: StepEnd


def chain_step(step: Callable[[StepRun], Ending]) -> StepHandler:
    """A step of the chain as the runner runs it: with the chain's upstream patience
    (`quota_deferring`), the ending it returns committed once, here (`step_end`)."""

    def run_and_commit(run: StepRun) -> None:
        ending = step(run)
        step_end(run, ending.attempt, ending.end)

    return quota_deferring(run_and_commit)


def quota_deferring(handler: StepHandler) -> StepHandler:
    """`handler` with a chained step's upstream patience (`quota.step_permits`): a permit not
    due within it re-schedules the step instead of holding the worker slot.

    The release is one conditional write on the claim (`RetryLater`): the row stays
    IN_PROGRESS with a later `runAfter` (its place in the credential's queue) and a countdown
    message for then, the attempt and the chain are untouched, and no retry is consumed (the
    refused call was never sent). The refusal can come in the middle of the step: it then
    leaves exactly what an interrupted worker leaves (every write so far committed, none
    half-made), and the re-run resumes from there as after a crash (SPEC §4.6).

    A step run inline (a sync request's, `jobs.inline`) keeps its request's patience: it waits
    for its permits within the request's budget, and a refusal is the request's 503."""

    def run_with_permits(run: StepRun) -> None:
        if isinstance(run, InlineRun):
            handler(run)
            return
        with quota.step_permits():
            try:
                handler(run)
            except quota.CredentialHeldError as held:
                # SPEC §13.2: the step waits for the credential's hold to lift (which wakes it).
                logger.info("step waits: Semrush refuses the credential for now")
                step_end(run, None, RetryLater(held.retry_in, waiting_for=credentials.WAITING_FOR))
            except quota.PermitDeferredError as deferred:
                logger.info(
                    "step re-scheduled for the upstream quota",
                    extra={"retry_in_s": round(deferred.retry_in, 3)},
                )
                step_end(run, None, RetryLater(deferred.retry_in))

    return run_with_permits


def attempt_of(run: StepRun) -> ProvisioningAttempt | None:
    """The chain's attempt with its brand and the brand's org (one query)."""
    attempt_id = run.job.metadata.get("attemptId")
    if not attempt_id:
        return None
    try:
        return ProvisioningAttempt.objects.select_related("brand__organization").get(pk=attempt_id)
    except ProvisioningAttempt.DoesNotExist:
        return None


class _Redo(enum.Enum):
    """Why an ending's transaction could not stand and the step must end otherwise (the only
    two: each needs work that cannot happen inside that transaction)."""

    # The promotion met another brand's pointer: the transaction is spoiled (a unique
    # violation, or the promotion's own rollback); the step ends Failed in a new one.
    SUPERSEDED = "superseded"
    # The answer's final write was refused (a deactivate or cancel won): its projects must be
    # deleted upstream (outside any transaction) before the step ends Discarded.
    ANSWER_REFUSED = "answerRefused"


@dataclass
class _Decided:
    """What the ending's transaction decided, read after it: whether a candidate may need
    emptying (the attempt failed or the chain stood down), and what must be redone."""

    cleanup: bool = False
    redo: _Redo | None = None


def step_end(run: StepRun, attempt: ProvisioningAttempt | None, end: StepEnd) -> None:
    """Commit `end` for the claimed step: the only way a step of the chain ends.

    One transaction (`jobs.endings.step_commit_decided`) whose job write is decided inside it
    from the rows as they are then: an attempt that ended meanwhile (cancelled, reconciled)
    ends the step as it says, in that same transaction. Two endings cannot stand as decided
    (`_Redo`); each is redone once, here, as a different ending: nothing re-enters this
    function. A failed attempt's fresh candidate is emptied after the commit (upstream)."""
    if isinstance(end, Finished) and end.outcome is not None and end.outcome.confirm_in:
        # A publish not confirmed yet (SPEC §12.1): the same step reads it again then.
        end = RetryLater(end.outcome.confirm_in)
    if isinstance(end, RetryLater) and isinstance(run, InlineRun):
        # A request cannot wait that long: its work fails busy (503 `upstreamBusy`).
        end = Failed(UpstreamBusyError(retry_after=end.delay_seconds))
    decided = _commit(run, attempt, end)
    if decided.redo is _Redo.SUPERSEDED:
        logger.warning("promotion superseded: the brand points elsewhere")
        error = UpstreamError("The brand's workspace changed meanwhile.")
        decided = _commit(run, attempt, Failed(error))
    elif decided.redo is _Redo.ANSWER_REFUSED:
        assert isinstance(end, Finished) and end.outcome is not None
        writes = end.outcome.market_writes
        instead = market_writes_refused(client=_client_of(run, attempt), writes=writes)
        decided = _commit(run, attempt, Discarded(instead))
    if decided.cleanup and attempt is not None:
        # A terminal workspace is left alone (it can be neither used nor emptied).
        cleanup_candidate(attempt_id=attempt.id)


def _commit(run: StepRun, attempt: ProvisioningAttempt | None, end: StepEnd) -> _Decided:
    """One transaction for `end`: its writes and the job's ending, decided inside it. An
    inline run keeps `end` beside its ending, for its request's answer."""
    decided = _Decided()
    try:
        committed = step_commit_decided(run, lambda: _decide(run, attempt, end, decided))
    except IntegrityError:
        # Only a promotion writes a unique value (the pointer): nothing of it was written.
        decided.redo = _Redo.SUPERSEDED
        return decided
    if committed and isinstance(run, InlineRun):
        run.decided = end
    return decided


def _decide(
    run: StepRun, attempt: ProvisioningAttempt | None, end: StepEnd, decided: _Decided
) -> JobEnding | None:
    """Inside the ending's transaction: `end`'s writes, and the job's ending to write (None:
    roll back)."""
    if isinstance(end, RetryLater):
        attempt_id = run.job.metadata.get("attemptId")
        if attempt_id:
            # Every step run bumps its attempt (SPEC §11.1: an operator sees the chain
            # moving); an attempt that has ended is left alone and the re-run stands down.
            states.touch(attempt_id=attempt_id)
        return JobDefer(delay_seconds=end.delay_seconds, waiting_for=end.waiting_for)
    if isinstance(end, Finished) and end.outcome is not None:
        return _answered(run, attempt, end.outcome, decided)
    if isinstance(end, StoodDown | Finished | Discarded | Crashed):
        decided.cleanup = isinstance(end, StoodDown | Crashed)
        return _final(run, attempt, end)
    if attempt is None:
        # Flat work (no attempt) that failed: its reservation, owned by the chain, is freed.
        assert isinstance(end, Failed)
        services.release_reservations(owner=run.job.root_id_or_self)
        return Finish(JobStatus.FAILED, error=job_error(end.error))
    if isinstance(end, Promoted):
        ending = _promoted(run, attempt, end.workspace_id, decided)
    elif isinstance(end, SettleLater):
        ending = _settle_later(attempt, end)
    else:
        ending = _failed(attempt, end, decided)
    return ending if ending is not None else _stood_down_if_ended(run, attempt, decided)


def _settle_later(attempt: ProvisioningAttempt, end: SettleLater) -> JobEnding | None:
    """The next status read after the backoff, while the attempt is pending."""
    if not states.touch(attempt_id=attempt.id):
        return None
    return Repeat(
        result={"workspaceStatus": "notRead" if end.first_read_deferred else "notReady"},
        delay_seconds=end.delay_seconds,
        metadata={
            SETTLE_AGE: _workspace_age(attempt) + end.delay_seconds,
            **({FIRST_READ_DEFERRED: True} if end.first_read_deferred else {}),
        },
    )


def _answered(
    run: StepRun, attempt: ProvisioningAttempt | None, outcome: Outcome, decided: _Decided
) -> JobEnding | None:
    """The chained work answered: its market rows' final writes (SPEC §11.5,
    `market_writes.market_writes_commit`), the attempt `ready` and the job COMPLETED with the
    answer.
    A row goes live only while the chain may still write (`still_valid`: the attempt pending,
    the brand pointing at its workspace) and the reservation is still the chain's; otherwise
    nothing of the transaction stands (`_Redo.ANSWER_REFUSED`). A step with a successor that
    answered a success hands over to it instead (the attempt stays pending)."""
    valid = (
        still_valid(attempt.id, attempt.brand_id, attempt.candidate_workspace_id or "")
        if attempt is not None
        else None
    )
    if not market_writes_commit(outcome.market_writes, still_valid=valid):
        decided.redo = _Redo.ANSWER_REFUSED
        return None
    if run.job.next_id is not None and outcome.label != "failed" and outcome.job_failure is None:
        # Not the chain's last step: the next one runs, under the same (pending) attempt.
        return Continue(result=outcome.as_job_result())
    if attempt is not None:
        states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
    if outcome.job_failure is not None:
        return Finish(JobStatus.FAILED, error=job_error(outcome.job_failure))
    return Finish(JobStatus.COMPLETED, result=outcome.as_job_result())


def _client_of(run: StepRun, attempt: ProvisioningAttempt | None) -> SemrushClient:
    """The org's client for the step's own clean-up (a flat chain has no attempt: its job
    names the org)."""
    if attempt is None:
        organization = Organization.objects.get(pk=run.job.organization_id)
        return client_for_org(organization)
    return client_for_org(
        attempt.brand.organization, brand_id=str(attempt.brand_id), attempt_id=str(attempt.id)
    )


def _final(
    run: StepRun,
    attempt: ProvisioningAttempt | None,
    end: StoodDown | Finished | Discarded | Crashed,
) -> JobEnding:
    """The last job write of the chain and the writes that go with it (the attempt's move, the
    chain's market rows), when the chained work did not answer."""
    promoted = attempt is not None and attempt.workspace_promoted
    # The chained step got as far as its final write (Finished(None): it found nothing left
    # to write): the attempt is ready whatever else happened, as after an answer.
    reached_its_end = isinstance(end, Finished | Discarded)
    if isinstance(end, Discarded):
        market_writes_commit(end.market_writes)
    if attempt is not None:
        if (promoted and attempt.status == AttemptStatus.PENDING) or reached_its_end:
            # Once promotion has succeeded, the chain's end (but a cancellation, which has
            # already finished the attempt) makes it ready: the workspace is valid and stays.
            states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
        elif isinstance(end, Crashed) and not promoted:
            states.transition(
                attempt_id=attempt.id,
                to=AttemptStatus.FAILED,
                reason=AttemptReason.UNEXPECTED,
                error="Unexpected error.",
            )
        if not reached_its_end:
            # Nothing was created for the chain's market (a chained step that answered has
            # finished or freed its markets itself): its slice is free again (SPEC §3); a
            # reservation with a project stays resumable.
            services.release_reservations(owner=attempt.id)
    if isinstance(end, Crashed):
        error = {"code": "jobFailed", "message": JOB_FAILED_MESSAGE, "retryable": promoted}
        return Finish(JobStatus.FAILED, error=error)
    ended = end.attempt if isinstance(end, StoodDown) else None
    if ended is not None and ended.reason == AttemptReason.STALE:
        return Finish(JobStatus.FAILED, error=services.stale_error())
    return Finish(JobStatus.CANCELLED, error=job_services.cancelled_error())


def _promoted(
    run: StepRun, attempt: ProvisioningAttempt, workspace_id: str, decided: _Decided
) -> JobEnding | None:
    """Promotion (`workspace_promote`) and the hand-over to the chained job, or (none) the
    chain COMPLETED with the attempt ready. None: the attempt ended meanwhile."""
    chained = run.job.next_id is not None
    promotion = workspace_promote(
        attempt_id=attempt.id,
        brand_id=attempt.brand_id,
        workspace_id=workspace_id,
        settle_seconds=_settle_sample(run, attempt),
    )
    if promotion is Promotion.SUPERSEDED:
        decided.redo = _Redo.SUPERSEDED
        return None
    if promotion is Promotion.ATTEMPT_ENDED:
        return None
    if chained:
        return Continue(result={"workspaceStatus": "ready"})
    states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
    body = {"brandId": str(attempt.brand_id), "provisioningStatus": "ready"}
    return Finish(JobStatus.COMPLETED, result=Outcome(200, body).as_job_result())


def _workspace_age(attempt: ProvisioningAttempt) -> float:
    """Seconds since the attempt recorded its candidate (0 when this hop recorded it)."""
    if attempt.candidate_at is None:
        return 0.0
    return max((timezone.now() - attempt.candidate_at).total_seconds(), 0.0)


def _settle_sample(run: StepRun, attempt: ProvisioningAttempt) -> float | None:
    """A freshly created candidate's age when the read that found it ready was scheduled
    (SPEC §11.1; `selectors.settle_seconds_learned`): the schedule's, not the quota's (a read
    re-scheduled for the quota ran later than the workspace needed). None for a read made at
    once, in the hop that created the workspace."""
    age = run.job.metadata.get(SETTLE_AGE)
    if not attempt.freshly_created or age is None:
        return None
    return float(age)


def _failed(attempt: ProvisioningAttempt, end: Failed, decided: _Decided) -> JobEnding | None:
    """Before promotion: the attempt fails with the error's reason (its reservations freed),
    the chain with the error's code. None: the attempt ended meanwhile."""
    error = end.error
    if not states.transition(
        attempt_id=attempt.id,
        to=AttemptStatus.FAILED,
        reason=end.reason or attempt_reason(error),
        error=error.message,
    ):
        return None
    services.release_reservations(owner=attempt.id)
    decided.cleanup = True
    return Finish(JobStatus.FAILED, error=job_error(error))


def _stood_down_if_ended(
    run: StepRun, attempt: ProvisioningAttempt, decided: _Decided
) -> JobEnding | None:
    """A write refused inside the ending's transaction: if the attempt has ended meanwhile
    (cancelled, reconciled), the step stands down as it says, in this same transaction;
    otherwise (None) the claim was lost and the holder of the job ends it."""
    current = ProvisioningAttempt.objects.filter(pk=attempt.id).first()
    if current is None or current.status == AttemptStatus.PENDING:
        return None
    decided.cleanup = True
    return _final(run, current, StoodDown(current))


# --- chained steps ----------------------------------------------------------------------------


def still_valid(
    attempt_id: uuid.UUID, brand_id: uuid.UUID, workspace_id: str
) -> Callable[[], bool]:
    """The chained step's final-write condition: inside the caller's transaction, lock the
    attempt (a cancel then waits for our commit) and check that it is pending and that the
    brand still points at the workspace. Only the attempt row is locked; the brand is read."""

    def check() -> bool:
        rows = (
            ProvisioningAttempt.objects.select_for_update(of=("self",))
            .filter(
                pk=attempt_id,
                status=AttemptStatus.PENDING,
                brand_id=brand_id,
                brand__semrush_sub_workspace_id=workspace_id,
            )
            .values_list("pk", flat=True)
        )
        return bool(list(rows))

    return check


def on_unexpected(run: StepRun, exc: BaseException) -> None:
    """Anything unexpected: the job FAILED `jobFailed`. Before promotion the attempt fails
    (`unexpected`) and a fresh candidate is emptied; after it the attempt is `ready` (the
    workspace is valid) and re-issuing the request is safe."""
    step_end(run, attempt_of(run), Crashed())
