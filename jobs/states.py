"""Job status transitions.

    IN_PROGRESS ──► COMPLETED
         │   └────► FAILED
         └────────► CANCELLED

A job is IN_PROGRESS from creation until it finishes; whether it has started is `started_at`,
whether it may run is `run_after` (NULL: a chained step still waiting for its predecessor).
Every transition is one conditional UPDATE on the row's id and its allowed source state (and,
for a worker, its claim token), so a stale writer changes nothing and learns it lost.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus

ALLOWED: dict[JobStatus, tuple[JobStatus, ...]] = {
    JobStatus.COMPLETED: (JobStatus.IN_PROGRESS,),
    JobStatus.FAILED: (JobStatus.IN_PROGRESS,),
    JobStatus.CANCELLED: (JobStatus.IN_PROGRESS,),
}


def transition(
    *,
    job_id: uuid.UUID,
    to: JobStatus,
    claim_token: uuid.UUID | None = None,
    result: Any = None,
    error: dict[str, Any] | None = None,
    only_unstarted: bool = False,
    **fields: Any,
) -> bool:
    """Move one job to a finished status. Returns whether this call changed the row.

    With `claim_token`, only the holder of that claim may write; `only_unstarted` refuses a job
    that a worker has begun (used by cancellation after promotion). `fields` are written in the
    same UPDATE (e.g. unlinking the job's successor).
    """
    now = timezone.now()
    # One `filter()` call: each further one clones the query again (this runs at every step's
    # end). One allowed source state is an equality rather than an IN.
    sources = ALLOWED[to]
    conditions: dict[str, Any] = (
        {"status": sources[0]} if len(sources) == 1 else {"status__in": sources}
    )
    if claim_token is not None:
        conditions["claim_token"] = claim_token
    rows = AsyncJob.objects.filter(pk=job_id, **conditions)
    values = {
        "status": to,
        "result": result,
        "error": error,
        "finished_at": now,
        "updated_at": now,
        "claim_token": None,
        "lease_expires_at": None,
        **fields,
    }
    if only_unstarted:
        # Not running: never claimed, or its claim's lease ran out (the worker died).
        rows = rows.filter(Q(claim_token__isnull=True) | Q(lease_expires_at__lt=now))
    return rows.update(**values) == 1
