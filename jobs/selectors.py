"""Job polling (SPEC §4.6): the effective state of a whole chain in a bounded number of queries.

The root points at the chain's current step, so the effective state is one row away whatever
the chain's length: one query loads the asked job with its root and the root's current step,
one more lists the visible steps.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from jobs.exceptions import JobNotFoundError
from jobs.models import AsyncJob, JobStatus


@dataclass(frozen=True)
class ChainView:
    asked: AsyncJob
    root: AsyncJob
    effective: AsyncJob
    steps: list[AsyncJob]

    @property
    def status(self) -> str:
        return self.effective.status

    @property
    def updated_at(self) -> datetime:
        return max([self.root.updated_at, *(s.updated_at for s in self.steps)])


def job_chain_get(*, job_id: uuid.UUID, brand_id: uuid.UUID) -> ChainView:
    """Raises `JobNotFoundError` for an unknown job or a job of another brand (the same answer)."""
    job = (
        AsyncJob.objects.select_related("root", "root__current", "current")
        .filter(pk=job_id, brand_id=brand_id)
        .first()
    )
    if job is None:
        raise JobNotFoundError()
    root = job.root or job
    effective = root.current or root
    steps = list(
        AsyncJob.objects.filter(Q(pk=root.id) | Q(root_id=root.id))
        .filter(run_after__isnull=False)
        .order_by("position")
    )
    # The current step may have finished while its chained successor is still waiting to be
    # made runnable in the same transaction; that cannot be observed (one transaction), so the
    # current step's status is the chain's.
    return ChainView(asked=job, root=root, effective=effective, steps=steps)


def step_status(job: AsyncJob) -> str:
    if job.status == JobStatus.IN_PROGRESS and job.started_at is None:
        return "PENDING"
    return str(job.status)


def chain_payload(view: ChainView) -> dict[str, Any]:
    effective = view.effective
    status = str(effective.status)
    return {
        "jobId": str(view.asked.id),
        "jobType": view.root.job_type,
        "status": status,
        "result": effective.result if status == JobStatus.COMPLETED else None,
        "error": effective.error if status in (JobStatus.FAILED, JobStatus.CANCELLED) else None,
        "steps": [
            {
                "step": s.step,
                "status": step_status(s),
                "startedAt": _iso(s.started_at),
                "finishedAt": _iso(s.finished_at),
            }
            for s in view.steps
        ],
        "createdAt": _iso(view.root.created_at),
        "updatedAt": _iso(view.updated_at),
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None
