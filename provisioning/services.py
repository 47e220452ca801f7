"""Writes on provisioning attempts once they exist: finishing, cancelling, reconciling stale
ones, and the cancel route (SPEC §6). Beginning an attempt is the guard's (`provisioning.guard`).
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from jobs import services as job_services
from jobs.exceptions import JobFinishedError, JobNotCancellableError
from jobs.models import AsyncJob, JobStatus, JobType
from jobs.publishing import publish_task
from jobs.selectors import job_chain_get
from kernel import context
from provisioning import states
from provisioning.models import (
    AttemptReason,
    AttemptStatus,
    ProvisioningAttempt,
)
from serenity.models import Brand, Market, MarketStatus

logger = logging.getLogger("serenity.provisioning")

CLEANUP_TASK = "provisioning.cleanup_attempt"


def stale_error() -> dict[str, Any]:
    return {
        "code": "provisioningStale",
        "message": "Provisioning was abandoned and has been reconciled.",
        "retryable": True,
    }


def _stale_cutoff() -> Any:
    return timezone.now() - timedelta(seconds=settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS)


def attempts_stale() -> QuerySet[ProvisioningAttempt]:
    """Pending attempts that nothing drives any more: the one staleness rule (SPEC §11.1), used
    by the guard, the sweep, the audit and the admin.

    An attempt driven by a chain is alive while any job of its chain is unfinished and
    runnable: running under a lease, waiting for its `runAfter` (a settle wait, a quota
    re-schedule) or due and waiting for a worker; the dispatcher keeps such jobs moving however
    old they are, and a job that keeps killing its workers ends by `JOBS_MAX_DELIVERIES`. It is
    stale only when no such job is left (a successor never made runnable does not count); so
    is sync work's (its request runs its chain at once, SPEC §13.5; the dispatcher takes the
    chain over if the request dies). An attempt without a job (begun before §13.5) is stale
    when its `updatedAt` is older than `SERENITY_PROVISIONING_STALE_AFTER_SECONDS`."""
    chain_alive = AsyncJob.objects.filter(
        Q(pk=OuterRef("job_id")) | Q(root_id=OuterRef("job_id")),
        status=JobStatus.IN_PROGRESS,
        run_after__isnull=False,
    )
    return ProvisioningAttempt.objects.filter(status=AttemptStatus.PENDING).filter(
        Q(job_id__isnull=True, updated_at__lt=_stale_cutoff())
        | Q(job_id__isnull=False) & ~Exists(chain_alive)
    )


def attempt_is_stale(*, attempt_id: uuid.UUID) -> bool:
    return attempts_stale().filter(pk=attempt_id).exists()


def attempt_reconcile_stale(*, attempt: ProvisioningAttempt) -> bool:
    """End an abandoned attempt (`attempts_stale`): `failed`/`stale`, or `ready` when its
    workspace was promoted (the workspace is valid and stays, SPEC §11.1); its chain's
    leftover jobs FAILED `provisioningStale`. A freshly created candidate is emptied by the
    sweep (a worker), never here."""
    if attempt.workspace_promoted:
        changed = states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
    else:
        changed = states.transition(
            attempt_id=attempt.id,
            to=AttemptStatus.FAILED,
            reason=AttemptReason.STALE,
            error="Provisioning was abandoned and reconciled as stale.",
        )
    if changed and attempt.job_id:
        job_services.chain_fail(root_id=attempt.job_id, error=stale_error())
    if changed:
        logger.warning(
            "stale attempt reconciled",
            extra={"attempt_id": str(attempt.id), "promoted": attempt.workspace_promoted},
        )
    return changed


def attempt_cancel(*, attempt_id: uuid.UUID) -> bool:
    """Cancel a pending attempt (deactivate, operators): `failed`/`cancelled`; its chain's jobs
    that are not running are CANCELLED; a running step sees the cancellation at its next
    conditional write and deletes what it created. Emptying a freshly created candidate is done
    by a worker after commit (and by the sweep as a backstop)."""
    attempt = ProvisioningAttempt.objects.filter(pk=attempt_id).first()
    if attempt is None:
        return False
    # One transaction: a job of the chain that a worker claims is then either cancelled with
    # the attempt or claimed before it, never claimed behind an attempt already cancelled.
    with transaction.atomic():
        changed = states.transition(
            attempt_id=attempt_id,
            to=AttemptStatus.FAILED,
            reason=AttemptReason.CANCELLED,
            error="Provisioning was cancelled.",
            **context.actor_fields("cancelled"),
        )
        if not changed:
            return False
        if attempt.job_id:
            job_services.chain_cancel(root_id=attempt.job_id, only_unstarted=True)
            if not AsyncJob.objects.filter(
                Q(pk=attempt.job_id) | Q(root_id=attempt.job_id), status=JobStatus.IN_PROGRESS
            ).exists():
                # No step of the chain will run again to free its market reservation (a running
                # step frees it itself); without this it stayed 'creating' until the stale sweep.
                release_reservations(owner=attempt_id)
        schedule_cleanup(attempt_id=attempt_id)
    return True


def schedule_cleanup(*, attempt_id: uuid.UUID) -> None:

    def send() -> None:
        if not publish_task(task_name=CLEANUP_TASK, args=[str(attempt_id)]):
            logger.warning(
                "cleanup publish failed; the sweep will do it",
                extra={"attempt_id": str(attempt_id)},
            )

    transaction.on_commit(send, robust=True)


def attempts_needing_cleanup() -> list[ProvisioningAttempt]:
    """Failed attempts whose freshly created, never promoted candidate is not emptied yet.

    Never a terminal workspace (SPEC §6.3: failed `terminal`, no cleanup), and never a candidate
    that is now some brand's pointer: a sync brand create persists the pointer without marking
    the attempt promoted, and another brand may have adopted an empty shell; emptying either
    would delete canonical projects.
    """
    pointed_at = Brand.objects.filter(semrush_sub_workspace_id=OuterRef("candidate_workspace_id"))
    return list(
        ProvisioningAttempt.objects.select_related("brand__organization")
        .filter(
            status=AttemptStatus.FAILED,
            freshly_created=True,
            workspace_promoted=False,
            cleanup_done=False,
            candidate_workspace_id__isnull=False,
        )
        .exclude(reason=AttemptReason.TERMINAL)
        .exclude(Exists(pointed_at))[:200]
    )


def stale_attempts() -> list[ProvisioningAttempt]:
    return list(attempts_stale())


def job_cancel(*, brand_id: uuid.UUID, job_id: uuid.UUID) -> None:
    """The cancel route (SPEC §6.6). Before promotion: the attempt `failed`/`cancelled`, the
    chain's jobs CANCELLED (a worker empties a fresh candidate). After promotion: a chained job
    that has not started is CANCELLED and the attempt `ready`; a running one → 409
    jobNotCancellable. A finished chain → 409 jobFinished; classifyPrompts → 409."""
    view = job_chain_get(job_id=job_id, brand_id=brand_id)
    if view.root.job_type == JobType.CLASSIFY_PROMPTS:
        raise JobNotCancellableError()
    if view.effective.is_finished:
        raise JobFinishedError()
    attempt = ProvisioningAttempt.objects.filter(job_id=view.root.id).first()
    if attempt is None:
        # A flat create-market job: cancellable until a worker starts it.
        if job_services.chain_cancel(root_id=view.root.id, only_unstarted=True) == 0:
            raise JobNotCancellableError()
        market_id = view.root.metadata.get("marketId")
        Market.objects.filter(
            pk=market_id,
            reserved_by=view.root.id,
            status=MarketStatus.CREATING,
            semrush_project_id=None,
        ).delete()
        return
    with transaction.atomic():
        locked = (
            ProvisioningAttempt.objects.select_for_update()
            .filter(pk=attempt.id, status=AttemptStatus.PENDING)
            .first()
        )
        if locked is None:
            raise JobFinishedError()
        if not locked.workspace_promoted:
            states.transition(
                attempt_id=attempt.id,
                to=AttemptStatus.FAILED,
                reason=AttemptReason.CANCELLED,
                error="Provisioning was cancelled.",
                **context.actor_fields("cancelled"),
            )
            job_services.chain_cancel(root_id=view.root.id)
            schedule_cleanup(attempt_id=attempt.id)
            release_reservations(owner=attempt.id)
            return
        if job_services.chain_cancel(root_id=view.root.id, only_unstarted=True) == 0:
            raise JobNotCancellableError()
        states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
        release_reservations(owner=attempt.id)


def release_reservations(*, owner: uuid.UUID) -> None:
    """Drop the owner's reservations that created nothing upstream (no project id): failure
    paths that created nothing free their slice (SPEC §3)."""
    Market.objects.filter(
        reserved_by=owner, status=MarketStatus.CREATING, semrush_project_id=None
    ).delete()
