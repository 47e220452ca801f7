"""Provisioning attempts: the per-brand guard, cancellation, and the stale sweep (SPEC §6).

Lock order: the brand row, then its attempts. The guard's lock lives for one short transaction
and is never held across an upstream call.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, ProgrammingError, transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from jobs import services as job_services
from jobs.models import AsyncJob, JobStatus
from kernel.queries import insert_row
from provisioning import states
from provisioning.exceptions import ProvisioningInProgressError
from provisioning.models import (
    AttemptReason,
    AttemptStartedBy,
    AttemptStatus,
    ProvisioningAttempt,
)
from serenity.models import Brand

logger = logging.getLogger("serenity.provisioning")

# PostgreSQL: undefined_table, undefined_column. A deploy may run ahead of its migration.
_MISSING_SCHEMA_SQLSTATES = frozenset({"42P01", "42703"})


def stale_error() -> dict[str, Any]:
    return {
        "code": "provisioningStale",
        "message": "Provisioning was abandoned and has been reconciled.",
        "retryable": True,
    }


def _stale_cutoff() -> Any:
    return timezone.now() - timedelta(seconds=settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS)


def _read_pending_attempt(brand_id: uuid.UUID) -> tuple[bool, ProvisioningAttempt | None]:
    """(schema present?, the pending attempt). Read inside a savepoint so that a missing table
    does not poison the surrounding transaction. Any other error propagates (fail closed)."""
    try:
        with transaction.atomic():
            return True, pending_attempt_for(brand_id)
    except ProgrammingError as exc:
        sqlstate = getattr(exc.__cause__, "sqlstate", None)
        if sqlstate in _MISSING_SCHEMA_SQLSTATES:
            logger.warning("attempts table missing; guard proceeds (migration pending)")
            return False, None
        raise


def pending_attempt_for(brand_id: uuid.UUID) -> ProvisioningAttempt | None:
    return ProvisioningAttempt.objects.filter(
        brand_id=brand_id, status=AttemptStatus.PENDING
    ).first()


def _raise_if_fresh(blocking: ProvisioningAttempt) -> None:
    if blocking.updated_at is None or blocking.updated_at >= _stale_cutoff():
        raise ProvisioningInProgressError(
            details={"jobId": str(blocking.job_id) if blocking.job_id else None}
        )


def attempt_guard_precheck(*, brand_id: uuid.UUID) -> None:
    """The guard's answer without its write: 409 `semrush_provisioning_in_progress` when a
    fresh pending attempt holds the brand. Lets a sync request refuse before its first upstream
    call; `attempt_begin` (under the lock) stays the authority. Reads only; a missing attempts
    table or a stale attempt passes (the begin deals with them)."""
    schema_present, blocking = _read_pending_attempt(brand_id)
    if schema_present and blocking is not None:
        _raise_if_fresh(blocking)


def attempt_begin(
    *,
    brand_id: uuid.UUID,
    started_by: AttemptStartedBy,
    candidate_workspace_id: str | None = None,
    job: AsyncJob | None = None,
) -> ProvisioningAttempt | None:
    """The concurrency guard: lock the brand, check for a pending attempt, insert ours.

    A pending attempt younger than the stale threshold → `ProvisioningInProgressError` (409,
    naming its job); an older one is reconciled (`failed`/`stale`, its chain FAILED) and we
    proceed. The partial unique constraint backs this up: an IntegrityError is the same 409.
    Returns None only when the attempts table does not exist yet (see `_read_pending_attempt`):
    sync work keeps working while a deploy runs ahead of its migration.
    Safe inside an outer transaction (the lock then lasts until the outer commit).
    """
    with transaction.atomic():
        Brand.objects.select_for_update().filter(pk=brand_id).values_list("pk").first()
        schema_present, blocking = _read_pending_attempt(brand_id)
        if not schema_present:
            return None
        if blocking is not None:
            _raise_if_fresh(blocking)
            attempt_reconcile_stale(attempt=blocking)
        return attempt_insert(
            brand_id=brand_id,
            started_by=started_by,
            candidate_workspace_id=candidate_workspace_id,
            job_id=job.pk if job is not None else None,
        )


@dataclass(frozen=True)
class LockedBrand:
    pointer: str | None
    pending: ProvisioningAttempt | None


def brand_lock(*, brand_id: uuid.UUID) -> LockedBrand:
    """The guard's read for an async begin, in one query: lock the brand row (until the
    surrounding transaction ends) and read its pointer and its pending attempt. Unlike
    `attempt_begin` this needs the attempts table (an async begin writes attempts and jobs)."""
    pending = ProvisioningAttempt.objects.filter(
        brand_id=OuterRef("pk"), status=AttemptStatus.PENDING
    ).order_by()
    pointer, pending_id, pending_job_id, pending_updated_at = (
        Brand.objects.select_for_update()
        .filter(pk=brand_id)
        .annotate(
            pending_id=Subquery(pending.values("id")[:1]),
            pending_job_id=Subquery(pending.values("job_id")[:1]),
            pending_updated_at=Subquery(pending.values("updated_at")[:1]),
        )
        .values_list(
            "semrush_sub_workspace_id", "pending_id", "pending_job_id", "pending_updated_at"
        )
        .get()
    )
    blocking = (
        ProvisioningAttempt(
            id=pending_id,
            brand_id=brand_id,
            status=AttemptStatus.PENDING,
            job_id=pending_job_id,
            updated_at=pending_updated_at,
        )
        if pending_id is not None
        else None
    )
    return LockedBrand(pointer=pointer, pending=blocking)


def attempt_pass_guard(*, locked: LockedBrand) -> None:
    """With the brand locked: a fresh pending attempt → 409; a stale one is reconciled."""
    if locked.pending is not None:
        _raise_if_fresh(locked.pending)
        attempt_reconcile_stale(attempt=locked.pending)


def is_pending_attempt_conflict(exc: IntegrityError) -> bool:
    """Whether an IntegrityError is the one-pending-attempt-per-brand constraint (PostgreSQL
    names the constraint; SQLite names the table)."""
    text = str(exc)
    return "one_pending_attempt_per_brand" in text or "provisioning_provisioningattempt" in text


def in_progress_error(*, brand_id: uuid.UUID) -> ProvisioningInProgressError:
    current = pending_attempt_for(brand_id)
    return ProvisioningInProgressError(
        details={"jobId": str(current.job_id) if current and current.job_id else None}
    )


def attempt_insert_unguarded(
    *, brand_id: uuid.UUID, started_by: AttemptStartedBy, job_id: uuid.UUID | None = None
) -> ProvisioningAttempt:
    """The first attempt of a brand created in the same transaction: nothing can hold or race
    it (the brand row is not visible to anyone else yet), so no guard and no savepoint."""
    return insert_row(ProvisioningAttempt, brand_id=brand_id, started_by=started_by, job_id=job_id)


def attempt_insert(
    *,
    brand_id: uuid.UUID,
    started_by: AttemptStartedBy,
    candidate_workspace_id: str | None = None,
    job_id: uuid.UUID | None = None,
    savepoint: bool = True,
) -> ProvisioningAttempt:
    """Insert the `pending` attempt. The partial unique constraint is the last line of
    defence: a conflict (a concurrent begin the read missed) is the guard's 409, never a 500.
    `savepoint=False` (an async begin, under the brand's lock): the conflict aborts the caller's
    transaction, and the caller maps it with `is_pending_attempt_conflict`."""
    if not savepoint:
        return ProvisioningAttempt.objects.create(
            brand_id=brand_id,
            started_by=started_by,
            candidate_workspace_id=candidate_workspace_id,
            job_id=job_id,
        )
    try:
        with transaction.atomic():
            return ProvisioningAttempt.objects.create(
                brand_id=brand_id,
                started_by=started_by,
                candidate_workspace_id=candidate_workspace_id,
                job_id=job_id,
            )
    except IntegrityError:
        raise in_progress_error(brand_id=brand_id) from None


def attempt_reconcile_stale(*, attempt: ProvisioningAttempt) -> bool:
    """Mark an abandoned attempt `failed`/`stale` and its chain FAILED `provisioningStale`.
    Its freshly created candidate is emptied by the sweep (a worker), never here."""
    changed = states.transition(
        attempt_id=attempt.id,
        to=AttemptStatus.FAILED,
        reason=AttemptReason.STALE,
        error="Provisioning was abandoned and reconciled as stale.",
    )
    if changed and attempt.job_id:
        job_services.chain_fail(root_id=attempt.job_id, error=stale_error())
    if changed:
        logger.warning("stale attempt reconciled", extra={"attempt_id": str(attempt.id)})
    return changed


def attempt_finish(
    *,
    attempt: ProvisioningAttempt | None,
    ok: bool,
    reason: AttemptReason | None = None,
    error: str | None = None,
) -> bool:
    """Finish a sync attempt (conditional: a cancel or reconcile may have won)."""
    if attempt is None:
        return True
    if ok:
        return states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
    return states.transition(
        attempt_id=attempt.id, to=AttemptStatus.FAILED, reason=reason, error=error
    )


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
                _release_reservations(attempt_id=attempt_id)
        schedule_cleanup(attempt_id=attempt_id)
    return True


def schedule_cleanup(*, attempt_id: uuid.UUID) -> None:
    from provisioning.tasks import cleanup_attempt

    def send() -> None:
        try:
            cleanup_attempt.apply_async(args=[str(attempt_id)], retry=False)
        except Exception:
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
    return list(
        ProvisioningAttempt.objects.filter(
            status=AttemptStatus.PENDING, updated_at__lt=_stale_cutoff()
        )
    )


def job_cancel(*, brand_id: uuid.UUID, job_id: uuid.UUID) -> None:
    """The cancel route (SPEC §6.6). Before promotion: the attempt `failed`/`cancelled`, the
    chain's jobs CANCELLED (a worker empties a fresh candidate). After promotion: a chained job
    that has not started is CANCELLED and the attempt `ready`; a running one → 409
    jobNotCancellable. A finished chain → 409 jobFinished; classifyPrompts → 409."""
    from jobs.exceptions import JobFinishedError, JobNotCancellableError
    from jobs.models import JobType
    from jobs.selectors import job_chain_get

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
        from serenity.models import Market, MarketStatus

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
            )
            job_services.chain_cancel(root_id=view.root.id)
            schedule_cleanup(attempt_id=attempt.id)
            _release_reservations(attempt_id=attempt.id)
            return
        if job_services.chain_cancel(root_id=view.root.id, only_unstarted=True) == 0:
            raise JobNotCancellableError()
        states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
        _release_reservations(attempt_id=attempt.id)


def _release_reservations(*, attempt_id: uuid.UUID) -> None:
    from serenity.models import Market, MarketStatus

    Market.objects.filter(
        reserved_by=attempt_id, status=MarketStatus.CREATING, semrush_project_id=None
    ).delete()
