"""Running one claimed step. Tasks are thin: they hand a job id to `run_step`."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError

from jobs import services
from jobs.dispatch import job_fairest_due, job_unclaimed_due
from jobs.exceptions import PoisonStepError
from jobs.models import AsyncJob, JobStatus
from kernel import context, tracing
from kernel.metrics import record_step

logger = logging.getLogger("serenity.jobs")


@dataclass
class StepRun:
    """A claimed job and its claim token; `keep_alive()` (or `renew()`) between upstream calls."""

    job: AsyncJob
    claim_token: uuid.UUID
    lease_from: float = field(default_factory=time.monotonic)
    # Set when this step made its chained successor runnable without publishing it: this
    # worker claims and runs it next, in the same task (`hand_over`).
    successor: uuid.UUID | None = None
    # The status this step finished its job with (`endings.step_commit` of a `Finish`): a step
    # that returns normally after ending its job FAILED did not end "ok".
    finished_status: str | None = None

    def renew(self) -> bool:
        """Extend the lease now. False: the claim was lost (a checkpointing step stops)."""
        renewed = services.job_renew(job_id=self.job.id, claim_token=self.claim_token)
        if renewed:
            self.lease_from = time.monotonic()
        return renewed

    def keep_alive(self) -> None:
        """Extend the lease once a third of it has run since the claim or the last extension;
        otherwise nothing (no write: a step is far shorter than a lease). For steps whose final
        writes are conditional anyway, so a lost claim needs no early check."""
        if time.monotonic() - self.lease_from >= settings.JOBS_LEASE_SECONDS / 3:
            self.renew()

    def hand_over(self, successor_id: uuid.UUID) -> None:
        """After this step made its successor runnable (committed, unpublished): claim and run
        it next, in this worker."""
        self.successor = successor_id


StepHandler = Callable[[StepRun], None]
FailureHandler = Callable[[StepRun, BaseException], None]


@dataclass(frozen=True)
class StepHandlers:
    run: StepHandler
    on_unexpected: FailureHandler
    # Steps that share workers fairly across orgs (`run_step`): a delivery of one of them runs
    # the due one whose org has the fewest steps running.
    fair: bool = False


# Filled by the apps that own the steps (`register_step`, at import of their tasks module):
# `jobs` runs steps without knowing what they do.
_HANDLERS: dict[str, StepHandlers] = {}


def register_step(
    step: str, *, run: StepHandler, on_unexpected: FailureHandler, fair: bool = False
) -> None:
    _HANDLERS[step] = StepHandlers(run=run, on_unexpected=on_unexpected, fair=fair)


def _fair_steps() -> list[str]:
    return [step for step, handlers in _HANDLERS.items() if handlers.fair]


def run_step(*, job_id: str) -> None:
    """Claim the job and run its step's registered handler; a delivery that cannot claim its
    job runs the oldest due fair step waiting for its message in its place, else does nothing.

    A handler may hand its chained successor over (`StepRun.hand_over`): the successor is then
    claimed and run here, right after, instead of travelling through the broker to another
    worker. It is claimed like any delivery: one that a cancel finished meanwhile is not run,
    and if this worker dies first, the dispatcher publishes it (it is runnable, unclaimed).

    Fair steps (`register_step(fair=True)`) share the workers across orgs: a delivery runs the
    due, claimable fair step whose org has the fewest steps running, then the fewest due (its
    own job on a tie, `jobs.dispatch.job_fairest_due`). So a second org's first step is claimed
    by the next free worker, not after every message of another org's backlog that the broker's
    FIFO queue holds ahead of it, whatever the pool and its size. Every due job still has its
    own message (or the dispatcher's), so a job whose message ran another job is run by that
    job's message. And a delivery whose job cannot run (a duplicate, a hand-over's message, one
    that a cancelled onboarding left in the queue) runs the oldest due one waiting behind it
    (`jobs.dispatch.job_unclaimed_due`): a cancel's hundreds of messages hold nobody back.

    Database connectivity errors propagate: the claim's lease then expires and the dispatcher
    re-publishes the job, which resumes. Any other exception is the step's unexpected failure,
    handed to its `on_unexpected` (which records the job's and the attempt's outcome); so is a
    claim taken over after `JOBS_MAX_DELIVERIES` expired ones (a poison step).
    """
    job = _claim_fairly(uuid.UUID(job_id))
    first = True
    while job is not None:
        first = False
        run = _claimed(job)
        _run_claimed(run, _HANDLERS[job.step])
        if run.successor is None:
            return
        job = services.job_claim(job_id=run.successor)
        if job is None:
            logger.info(
                "hand-over ignored: the chained job was cancelled or claimed",
                extra={"step_job_id": str(run.successor)},
            )
    if first:
        logger.info(
            "delivery ignored: job finished, not due, or claimed", extra={"step_job_id": job_id}
        )


def _claim_fairly(own_id: uuid.UUID) -> AsyncJob | None:
    """Claim the job this delivery runs (`run_step`): the fairest due one, else its own, else
    (its own finished, claimed or not due) the oldest due one waiting for its message. When it
    runs another job in place of its own still due one, that one gets a new message: every due
    job keeps one, so none waits for the dispatcher's lost-message backstop (a job that another
    delivery ran had a message of its own, or was a hand-over that its worker then finds
    claimed)."""
    fair_steps = _fair_steps()
    chosen = job_fairest_due(job_id=own_id, steps=fair_steps) if fair_steps else own_id
    job = services.job_claim(job_id=chosen) if chosen != own_id else None
    if job is None:
        job = services.job_claim(job_id=own_id)
        if job is None and fair_steps:
            # Its own cannot run: the oldest due job that waits for its message runs instead.
            instead = job_unclaimed_due(job_id=own_id, steps=fair_steps)
            job = services.job_claim(job_id=instead) if instead is not None else None
            if job is not None:
                logger.info(
                    "delivery ran a due job in place of its own",
                    extra={"step_job_id": str(own_id), "ran_job_id": str(instead)},
                )
        return job
    own_step = AsyncJob.objects.filter(pk=own_id).values_list("step", flat=True).first()
    if own_step is not None:
        services.publish_on_commit(job_id=own_id, step=own_step)
    return job


def _claimed(job: AsyncJob) -> StepRun:
    assert job.claim_token is not None  # returned by the claim
    return StepRun(job=job, claim_token=job.claim_token)


def run_claimed(job: AsyncJob) -> None:
    """Run the registered handler of a job its caller claimed (a step that picks and claims its
    own work: webhook attempts under their slots, `webhooks.slots`) as `run_step` runs the job
    it claims; a hand-over is not followed."""
    _run_claimed(_claimed(job), _HANDLERS[job.step])


def run_inline(run: StepRun) -> None:
    """Run the step's registered handler for `run` in this thread, as a worker runs a claimed
    one (`jobs.inline`), except that what the handler raises is raised here too, after its
    `on_unexpected` has recorded the step's failure: the caller answers it."""
    _run_claimed(run, _HANDLERS[run.job.step], inline=True)


def _log_ids(job: AsyncJob, *, inline: bool) -> dict[str, object]:
    """What every line of the step carries. `job_id` is the id the client holds (the chain's
    root); `step_job_id` is this row. An inline run keeps its request's own request id."""
    ids: dict[str, object] = {
        "org_id": job.organization_id,
        "brand_id": job.brand_id,
        "job_id": job.root_id or job.id,
        "step_job_id": job.id,
    }
    if not inline:
        ids["request_id"] = (job.metadata or {}).get(services.REQUEST_ID_KEY)
    return {**ids, "step": job.step}


def _span_attributes(job: AsyncJob) -> dict[str, str | None]:
    """What a step's span says of it (kernel.tracing.step_span)."""
    return {
        "serenity.step": job.step,
        "serenity.job_id": str(job.root_id or job.id),
        "serenity.step_job_id": str(job.id),
        "serenity.org_id": str(job.organization_id),
        "serenity.brand_id": str(job.brand_id) if job.brand_id else None,
    }


def _run_claimed(run: StepRun, handlers: StepHandlers, *, inline: bool = False) -> None:
    job = run.job
    started = time.monotonic()
    outcome = "error"
    with (
        context.scope(**_log_ids(job, inline=inline)),
        tracing.step_span(
            f"step {job.step}", traceparent=job.trace_context, attributes=_span_attributes(job)
        ),
    ):
        # DEBUG: the row's `started_at` says as much; "step ended" (INFO) carries the outcome.
        logger.debug("step started", extra={"run_count": job.run_count})
        try:
            if 0 < settings.JOBS_MAX_DELIVERIES <= job.expired_claims:
                # A poison step: every worker that ran it died. It ends as its app says an
                # unexpected failure ends (`on_unexpected`), never runs again.
                raise PoisonStepError(job.expired_claims)
            handlers.run(run)
            outcome = "failed" if run.finished_status == JobStatus.FAILED else "ok"
        except (OperationalError, InterfaceError):
            outcome = "interrupted"
            logger.warning(
                "step interrupted by a database error; the lease will expire and "
                "the dispatcher re-publishes it",
                exc_info=True,
            )
            raise
        except DatabaseError as exc:
            logger.exception("step failed with a database error")
            handlers.on_unexpected(run, exc)
            if inline:
                raise
        except Exception as exc:
            logger.exception("step failed unexpectedly")
            handlers.on_unexpected(run, exc)
            if inline:
                raise
        finally:
            elapsed = time.monotonic() - started
            record_step(job.step, outcome, elapsed)
            logger.info(
                "step ended",
                extra={
                    "outcome": outcome,
                    "duration_ms": int(elapsed * 1000),
                    "run_count": job.run_count,
                },
            )
