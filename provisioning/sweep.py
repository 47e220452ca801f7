"""The stale sweep (SPEC §6.4): reconcile attempts pending past the threshold, empty the
freshly created candidates of failed attempts that nobody cleaned up, and clear leftover market
reservations (SPEC §3)."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from provisioning import services as attempts
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.workspace import cleanup_candidate
from serenity.models import Market, MarketStatus

logger = logging.getLogger("serenity.provisioning")


def attempts_sweep() -> dict[str, int]:
    reconciled = 0
    for attempt in attempts.stale_attempts():
        if attempts.attempt_reconcile_stale(attempt=attempt):
            reconciled += 1
    cleaned = 0
    for attempt in attempts.attempts_needing_cleanup():
        try:
            cleanup_candidate(attempt_id=attempt.id)
            cleaned += 1
        except Exception:
            logger.warning(
                "cleanup failed; will retry at the next sweep",
                exc_info=True,
                extra={"attempt_id": str(attempt.id)},
            )
    released = reservations_release_abandoned()
    return {"reconciled": reconciled, "cleaned": cleaned, "released": released}


def reservations_release_abandoned(*, limit: int = 500) -> int:
    """Clear `creating` (or `publishing`, SPEC §12.1) reservations left behind by work that
    ended without finishing them.

    Abandoned: unchanged for the stale threshold and its owner is not live (no pending attempt
    and no IN_PROGRESS job with that id; a sync request's own id has neither). The threshold
    leaves a worker whose attempt just ended the time to clean up after itself. One that recorded
    no project is deleted (the slice is free again); one whose project exists becomes
    `publish_failed` without an owner, so a create resumes that project and a DELETE can remove
    it (a `creating` market answers 409 marketBusy). Every write is conditional on the row being
    unchanged (still `creating`, same owner, same project id, not touched since), so a create
    that took the reservation over meanwhile wins. Returns how many were released.
    """
    cutoff = timezone.now() - timedelta(seconds=settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS)
    leftovers = list(
        Market.objects.filter(
            status__in=(MarketStatus.CREATING, MarketStatus.PUBLISHING),
            deleted_at__isnull=True,
            reserved_by__isnull=False,
            updated_at__lt=cutoff,
        ).values_list("pk", "reserved_by", "semrush_project_id", "status")[:limit]
    )
    live_owners = _live_owners({owner for _, owner, _, _ in leftovers if owner is not None})
    released = 0
    for market_id, owner, project_id, status in leftovers:
        if owner in live_owners:
            continue
        unchanged = Market.objects.filter(
            pk=market_id,
            status=status,
            reserved_by=owner,
            semrush_project_id=project_id,
            updated_at__lt=cutoff,
        )
        if project_id is None:
            _, per_model = unchanged.delete()
            released += per_model.get(Market._meta.label, 0)
        else:
            released += unchanged.update(
                status=MarketStatus.PUBLISH_FAILED, reserved_by=None, updated_at=timezone.now()
            )
    if released:
        logger.warning("sweep released abandoned market reservations", extra={"count": released})
    return released


def _live_owners(owners: set[uuid.UUID]) -> set[uuid.UUID]:
    """The owners still at work: a pending attempt or an IN_PROGRESS job with that id."""
    attempts = ProvisioningAttempt.objects.filter(pk__in=owners, status=AttemptStatus.PENDING)
    jobs = AsyncJob.objects.filter(pk__in=owners, status=JobStatus.IN_PROGRESS)
    return set(attempts.values_list("id", flat=True)) | set(jobs.values_list("id", flat=True))
