"""Job polling (SPEC §4.6): the effective state of a whole chain in a bounded number of queries.

The root points at the chain's current step, so the effective state is one row away whatever
the chain's length: one query loads the asked job with its root and the root's current step,
one more lists the visible steps.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs.exceptions import JobNotFoundError
from jobs.models import AsyncJob, JobStatus, JobType
from kernel.pagination import Page, keyset_page


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


def job_chain_get(
    *,
    job_id: uuid.UUID,
    brand_id: uuid.UUID | None = None,
    organization_id: uuid.UUID | None = None,
) -> ChainView:
    """The chain of a job of this brand, or (`organization_id`, SPEC §12.2) of any brand of this
    org: a client-facing job (`JobType`), never a webhook delivery's row. Raises
    `JobNotFoundError` for an unknown job or a job of another brand or org (the same answer)."""
    scope = Q(brand_id=brand_id) if brand_id is not None else Q(organization_id=organization_id)
    assert brand_id is not None or organization_id is not None
    try:
        # `get()`, not `first()`: a primary key needs no ORDER BY (the model orders by age).
        job = AsyncJob.objects.select_related("root", "root__current", "current").get(
            scope, pk=job_id, job_type__in=JobType.values
        )
    except AsyncJob.DoesNotExist:
        raise JobNotFoundError() from None
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


# A runnable job due longer ago than this is overdue (the admin's "overdue" filter): no worker
# has taken it although it could have.
OVERDUE_AFTER_SECONDS = 30.0


def runnable_q(prefix: str = "", *, now: datetime) -> Q:
    """Due, unfinished and not held by a live claim (what the workers have yet to take), for
    the row at `prefix` (e.g. "current__")."""
    return Q(**{f"{prefix}status": JobStatus.IN_PROGRESS, f"{prefix}run_after__lte": now}) & (
        Q(**{f"{prefix}claim_token__isnull": True}) | Q(**{f"{prefix}lease_expires_at__lt": now})
    )


def overdue_chains_q(*, now: datetime | None = None) -> Q:
    """Root rows whose current step is runnable and was due more than OVERDUE_AFTER_SECONDS
    ago (a root without a current pointer stands for itself)."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=OVERDUE_AFTER_SECONDS)
    return (runnable_q("current__", now=now) & Q(current__run_after__lte=cutoff)) | (
        Q(current__isnull=True) & runnable_q(now=now) & Q(run_after__lte=cutoff)
    )


def step_status(job: AsyncJob) -> str:
    if job.status == JobStatus.IN_PROGRESS and job.started_at is None:
        return "PENDING"
    return str(job.status)


@dataclass(frozen=True)
class StepDocument:
    """One visible step of a chain, as polling lists it (SPEC §4.6)."""

    step: str
    status: str
    started_at: datetime | None
    finished_at: datetime | None
    # When a `PENDING` step is due (a scheduled settle read: the Retry-After of polling); None
    # for any other status.
    run_after: datetime | None
    # What an unfinished step waits for besides its time (e.g. "credential", SPEC §13.2).
    waiting_for: str | None = None


@dataclass(frozen=True)
class JobDocument:
    """A chain as clients see it (SPEC §4.6): the effective status of the whole chain, its
    `result` only when COMPLETED and its `error` only when FAILED or CANCELLED. `steps` is None
    where the document goes without them (the job list, webhook events)."""

    job_id: uuid.UUID
    job_type: str
    mode: str
    status: str
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    # When the chain ended (its last step's end); None while IN_PROGRESS.
    finished_at: datetime | None
    brand_id: uuid.UUID | None
    steps: list[StepDocument] | None = None


def chain_document(view: ChainView) -> JobDocument:
    document = job_document(
        job_id=view.asked.id, root=view.root, effective=view.effective, updated_at=view.updated_at
    )
    return replace(document, steps=[step_document(s) for s in view.steps])


def step_document(job: AsyncJob) -> StepDocument:
    status = step_status(job)
    return StepDocument(
        step=job.step,
        status=status,
        started_at=job.started_at,
        finished_at=job.finished_at,
        run_after=job.run_after if status == "PENDING" else None,
        waiting_for=job.waiting_for if job.status == JobStatus.IN_PROGRESS else None,
    )


def job_document(
    *, job_id: uuid.UUID, root: AsyncJob, effective: AsyncJob, updated_at: datetime
) -> JobDocument:
    """A chain's document without its steps: the job list's items (SPEC §10.3)."""
    status = str(effective.status)
    return JobDocument(
        job_id=job_id,
        job_type=root.job_type,
        mode=root.mode,
        status=status,
        result=effective.result if status == JobStatus.COMPLETED else None,
        error=effective.error if status in (JobStatus.FAILED, JobStatus.CANCELLED) else None,
        created_at=root.created_at,
        updated_at=updated_at,
        finished_at=None if status == JobStatus.IN_PROGRESS else effective.finished_at,
        brand_id=root.brand_id,
    )


def retry_after_seconds(effective: AsyncJob) -> int:
    """Whole seconds until the chain's next scheduled step (its current step's `run_after`),
    at least 1 and at most `SERENITY_RETRY_AFTER_MAX_SECONDS`: a step due now or running
    answers 1."""
    if effective.run_after is None:
        return 1
    wait = (effective.run_after - timezone.now()).total_seconds()
    return max(1, min(settings.SERENITY_RETRY_AFTER_MAX_SECONDS, math.ceil(wait)))


JOB_ORDER = ("-created_at", "-id")


@dataclass(frozen=True)
class JobFilters:
    """The job lists' filters (SPEC §10.3, §12.2); None: not filtered on."""

    status: str | None = None
    brand_id: uuid.UUID | None = None
    job_type: str | None = None
    created_after: datetime | None = None


def job_list(
    *, brand_id: uuid.UUID, status: str | None, cursor: str | None, limit: int
) -> Page[AsyncJob]:
    """One page of the brand's chains, newest first (`org_job_list`, scoped to one brand)."""
    return _root_page(Q(brand_id=brand_id), JobFilters(status=status), cursor, limit)


def org_job_list(
    *, organization_id: uuid.UUID, filters: JobFilters, cursor: str | None, limit: int
) -> Page[AsyncJob]:
    """One page of the org's chains across its brands, newest first (SPEC §12.2)."""
    return _root_page(Q(organization_id=organization_id), filters, cursor, limit)


def _root_page(scope: Q, filters: JobFilters, cursor: str | None, limit: int) -> Page[AsyncJob]:
    """One page of chains, newest first, by the ids clients hold (root jobs of a client-facing
    type: never a webhook delivery's row), each with `effective` (the chain's current step, as
    polling reports it) and `chain_updated_at`. Filters on the effective status. Two queries
    whatever the page size (the page, and nothing else: the current step is joined, the latest
    change a subquery)."""
    latest_step_change = (
        AsyncJob.objects.filter(root_id=OuterRef("pk"), run_after__isnull=False)
        .order_by("-updated_at")
        .values("updated_at")[:1]
    )
    roots = (
        AsyncJob.objects.filter(scope, root__isnull=True, job_type__in=JobType.values)
        .select_related("current")
        .annotate(
            effective_status=Coalesce("current__status", "status"),
            latest_step_change=Subquery(latest_step_change),
        )
    )
    if filters.status:
        roots = roots.filter(effective_status=filters.status)
    if filters.brand_id:
        roots = roots.filter(brand_id=filters.brand_id)
    if filters.job_type:
        roots = roots.filter(job_type=filters.job_type)
    if filters.created_after:
        roots = roots.filter(created_at__gt=filters.created_after)
    return keyset_page(
        roots,
        kind="jobs",
        ordering=JOB_ORDER,
        sort_key=lambda job: [job.created_at.isoformat(), str(job.pk)],
        cursor=cursor,
        limit=limit,
    )


def job_list_item(root: AsyncJob) -> JobDocument:
    """The document of a root row read by `job_list`."""
    changes = [root.updated_at, getattr(root, "latest_step_change", None)]
    return job_document(
        job_id=root.pk,
        root=root,
        effective=root.current or root,
        updated_at=max(c for c in changes if c is not None),
    )
