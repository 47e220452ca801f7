"""One-step jobs that apps create as an outbox (e.g. webhook deliveries, SPEC §11.3).

The rows are written in the caller's transaction (with the business write that causes them)
and published after commit; the dispatcher publishes any whose message is lost, and a worker
claims each as any job (`jobs.runner`, the step's registered handler). A step that wants to run
again later gives its claim back with a delay (`jobs.endings.Defer`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from jobs.services import chain_origin, publish_on_commit
from kernel import tracing


def outbox_jobs_create(
    *,
    organization_id: uuid.UUID,
    job_type: str,
    step: str,
    jobs: Mapping[uuid.UUID, dict[str, Any]],
    publish_max: int | None = None,
    unpublished_until: datetime | None = None,
) -> None:
    """Create one runnable job per id (its `metadata` the mapped value) inside the caller's
    transaction; each is published after commit (only the first `publish_max`, for a step
    whose messages run any due job of its step, not only their own: `webhooks.slots`; the
    rest are marked published until `unpublished_until`, or now, so the dispatcher publishes
    one only if it is still due a lease after that). An id that exists already is left alone:
    a repeated emission creates nothing twice (its duplicate message finds nothing to claim or
    runs the one job)."""
    if not jobs:
        return
    now = timezone.now()
    origin = chain_origin()
    trace_context = tracing.traceparent()
    rows = [
        AsyncJob(
            id=job_id,
            organization_id=organization_id,
            brand_id=None,
            job_type=job_type,
            step=step,
            metadata={**metadata, **origin},
            trace_context=trace_context,
            current_id=job_id,
            position=0,
            run_after=now,
            published_at=(
                now
                if publish_max is None or index < publish_max or unpublished_until is None
                else unpublished_until
            ),
        )
        for index, (job_id, metadata) in enumerate(jobs.items())
    ]
    AsyncJob.objects.bulk_create(rows, ignore_conflicts=True)
    for row in rows if publish_max is None else rows[:publish_max]:
        publish_on_commit(job_id=row.id, step=step, premarked=True)


def outbox_job_run_now(*, job_id: uuid.UUID, step: str) -> bool:
    """Make an unfinished, unclaimed job due now and publish it after commit (an operator's or
    a client's "try again now"). False when the job is finished or a live worker holds it."""
    now = timezone.now()
    changed = (
        AsyncJob.objects.filter(pk=job_id, status=JobStatus.IN_PROGRESS)
        .filter(Q(claim_token__isnull=True) | Q(lease_expires_at__lt=now))
        .update(run_after=now, published_at=now, updated_at=now)
    )
    if changed:
        publish_on_commit(job_id=job_id, step=step, premarked=True)
    return changed == 1


def outbox_jobs_cancel(*, job_ids: list[uuid.UUID], error: dict[str, Any]) -> int:
    """End these unfinished jobs CANCELLED in one set-based write (their messages then find
    nothing to claim), except one a worker holds under a live lease: its step ends it (its
    domain write finds nothing left to do). Returns how many ended."""
    if not job_ids:
        return 0
    now = timezone.now()
    return (
        AsyncJob.objects.filter(pk__in=job_ids, status=JobStatus.IN_PROGRESS)
        .filter(Q(claim_token__isnull=True) | Q(lease_expires_at__lt=now))
        .update(
            status=JobStatus.CANCELLED,
            error=error,
            finished_at=now,
            updated_at=now,
            claim_token=None,
            lease_expires_at=None,
        )
    )
