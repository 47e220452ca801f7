"""Retention (SPEC §3): finished chains go after JOBS_RETENTION_DAYS; each brand's newest
provisioning chain and every unfinished chain stay."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobStep, JobType
from jobs.retention import jobs_purge_finished
from jobs.services import CHAINED_POSITION
from provisioning.models import AttemptStartedBy, AttemptStatus
from tests.factories import AsyncJobFactory, BrandFactory, ProvisioningAttemptFactory


def days_ago(days: float) -> Any:
    return timezone.now() - timedelta(days=days)


def chain(
    *,
    brand_id: uuid.UUID,
    created_days_ago: float,
    finished_days_ago: float | None = None,
    job_type: JobType = JobType.PROVISION_WORKSPACE,
    chained_status: JobStatus | None = JobStatus.COMPLETED,
) -> tuple[AsyncJob, AsyncJob | None]:
    """A root (settle read, COMPLETED) and an optional chained step, aged with QuerySet.update
    (`auto_now` would overwrite assigned values)."""
    org_id = uuid.uuid4()
    step = JobStep.PROVISION_WORKSPACE
    if job_type == JobType.CLASSIFY_PROMPTS:
        step = JobStep.CLASSIFY_PROMPTS
    chained = None
    if chained_status is not None and job_type == JobType.PROVISION_WORKSPACE:
        chained = AsyncJobFactory(
            organization_id=org_id,
            brand_id=brand_id,
            job_type=job_type,
            step=JobStep.CREATE_MARKET,
            status=chained_status,
            position=CHAINED_POSITION,
            run_after=None,
        )
    root = AsyncJobFactory(
        organization_id=org_id,
        brand_id=brand_id,
        job_type=job_type,
        step=step,
        status=JobStatus.COMPLETED,
        next=chained,
    )
    AsyncJob.objects.filter(pk=root.pk).update(current=chained or root)
    if chained is not None:
        AsyncJob.objects.filter(pk=chained.pk).update(root=root)
    created = days_ago(created_days_ago)
    finished = days_ago(finished_days_ago if finished_days_ago is not None else created_days_ago)
    AsyncJob.objects.filter(pk=root.pk).update(created_at=created, updated_at=created)
    if chained is not None:
        AsyncJob.objects.filter(pk=chained.pk).update(created_at=created, updated_at=finished)
    return root, chained


def remaining() -> set[uuid.UUID]:
    return set(AsyncJob.objects.values_list("id", flat=True))


def ids(*jobs: AsyncJob | None) -> set[uuid.UUID]:
    return {job.id for job in jobs if job is not None}


def test_old_finished_chains_go_but_each_brands_newest_provisioning_chain_stays(db, settings):
    # given
    settings.JOBS_RETENTION_DAYS = 7
    brand_a, brand_b = uuid.uuid4(), uuid.uuid4()
    older = chain(brand_id=brand_a, created_days_ago=10)
    newest_a = chain(brand_id=brand_a, created_days_ago=9)
    only_b = chain(brand_id=brand_b, created_days_ago=30)
    prompts = chain(brand_id=brand_a, created_days_ago=8, job_type=JobType.CLASSIFY_PROMPTS)
    recent = chain(brand_id=brand_a, created_days_ago=1, job_type=JobType.CLASSIFY_PROMPTS)
    # when
    deleted = jobs_purge_finished()
    # then
    assert deleted == 3
    assert remaining() == ids(*newest_a, *only_b, *recent)
    assert not remaining() & ids(*older, *prompts)


def test_an_unfinished_chain_stays_however_old(db, settings):
    # given: its root finished long ago, its chained step is still in progress
    settings.JOBS_RETENTION_DAYS = 7
    brand = uuid.uuid4()
    unfinished = chain(brand_id=brand, created_days_ago=20, chained_status=JobStatus.IN_PROGRESS)
    chain(brand_id=brand, created_days_ago=9)  # the brand's newest
    # when
    jobs_purge_finished()
    # then
    assert ids(*unfinished) <= remaining()


def test_a_chain_that_finished_within_the_retention_stays(db, settings):
    # given: an old root whose chained step finished yesterday (a long settle, a late retry)
    settings.JOBS_RETENTION_DAYS = 7
    brand = uuid.uuid4()
    late = chain(brand_id=brand, created_days_ago=10, finished_days_ago=1)
    chain(brand_id=brand, created_days_ago=9)  # the brand's newest
    # when
    jobs_purge_finished()
    # then
    assert ids(*late) <= remaining()


def test_purging_a_chain_keeps_its_attempt_as_history(db, settings):
    # given
    settings.JOBS_RETENTION_DAYS = 7
    brand = BrandFactory()
    old_root, _ = chain(brand_id=brand.id, created_days_ago=10)
    chain(brand_id=brand.id, created_days_ago=9)
    attempt = ProvisioningAttemptFactory(
        brand=brand,
        started_by=AttemptStartedBy.CREATE_BRAND,
        status=AttemptStatus.READY,
        job=old_root,
    )
    # when
    jobs_purge_finished()
    # then
    attempt.refresh_from_db()
    assert attempt.job_id is None
    assert not AsyncJob.objects.filter(pk=old_root.pk).exists()


def test_nothing_within_the_retention_is_purged(db, settings):
    settings.JOBS_RETENTION_DAYS = 7
    brand = uuid.uuid4()
    chain(brand_id=brand, created_days_ago=2)
    chain(brand_id=brand, created_days_ago=1)
    assert jobs_purge_finished() == 0
    assert AsyncJob.objects.count() == 4
