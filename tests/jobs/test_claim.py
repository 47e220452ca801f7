"""Claiming a job (SPEC §6.4): one conditional UPDATE; a duplicate or late delivery does nothing."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobStep, JobType
from jobs.services import job_claim, job_release, job_renew
from tests.factories import AsyncJobFactory


def make_job(**fields: Any) -> AsyncJob:
    values: dict[str, Any] = {
        "brand_id": uuid.uuid4(),
        "run_after": timezone.now() - timedelta(seconds=1),
    }
    values.update(fields)
    return AsyncJobFactory(**values)


def test_a_due_job_is_claimed_once_while_the_lease_is_live(db, settings):
    # given
    settings.JOBS_LEASE_SECONDS = 120
    job = make_job()
    # when
    first = job_claim(job_id=job.id)
    second = job_claim(job_id=job.id)
    # then: the claim returns the claimed row, as stored
    assert first is not None
    assert second is None
    job.refresh_from_db()
    assert first.claim_token is not None and job.claim_token == first.claim_token
    assert (first.run_count, first.lease_expires_at, first.started_at) == (
        job.run_count,
        job.lease_expires_at,
        job.started_at,
    )
    assert (first.step, first.metadata, first.next_id) == (job.step, job.metadata, job.next_id)
    assert job.run_count == 1
    assert job.started_at is not None
    assert job.lease_expires_at > timezone.now() + timedelta(seconds=100)


def test_a_job_whose_lease_expired_can_be_claimed_again(db):
    # given: a claim whose worker died
    job = make_job()
    first = job_claim(job_id=job.id)
    assert first is not None
    started_at = AsyncJob.objects.get(pk=job.id).started_at
    AsyncJob.objects.filter(pk=job.id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    # when
    second = job_claim(job_id=job.id)
    # then
    assert second is not None and second.claim_token != first.claim_token
    job.refresh_from_db()
    assert job.claim_token == second.claim_token
    assert job.run_count == 2
    assert job.started_at == started_at


def test_the_old_holder_can_neither_renew_nor_release_after_a_reclaim(db):
    job = make_job()
    first = job_claim(job_id=job.id)
    AsyncJob.objects.filter(pk=job.id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    second = job_claim(job_id=job.id)
    assert first is not None and second is not None
    assert job_renew(job_id=job.id, claim_token=first.claim_token) is False
    assert job_release(job_id=job.id, claim_token=first.claim_token, delay_seconds=5) is False
    assert job_renew(job_id=job.id, claim_token=second.claim_token) is True


def test_a_finished_job_cannot_be_claimed(db):
    for status in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED):
        job = make_job(status=status)
        assert job_claim(job_id=job.id) is None
        assert AsyncJob.objects.get(pk=job.id).run_count == 0


def test_a_job_that_is_not_runnable_yet_cannot_be_claimed(db):
    # given: a chained step waiting for its predecessor, and a settle read scheduled later
    waiting = make_job(run_after=None, step=JobStep.CREATE_MARKET)
    later = make_job(run_after=timezone.now() + timedelta(seconds=30))
    # when / then
    assert job_claim(job_id=waiting.id) is None
    assert job_claim(job_id=later.id) is None
    assert AsyncJob.objects.filter(claim_token__isnull=False).count() == 0


def test_an_unknown_job_cannot_be_claimed(db):
    assert job_claim(job_id=uuid.uuid4()) is None


def test_release_gives_the_claim_back_and_reschedules(db):
    # given
    job = make_job()
    claimed = job_claim(job_id=job.id)
    assert claimed is not None
    # when
    released = job_release(job_id=job.id, claim_token=claimed.claim_token, delay_seconds=30)
    # then: nobody can claim it before its new run_after
    assert released is True
    job.refresh_from_db()
    assert job.claim_token is None and job.lease_expires_at is None
    assert job.run_after > timezone.now() + timedelta(seconds=25)
    assert job_claim(job_id=job.id) is None


def test_keep_alive_writes_nothing_on_a_fresh_lease_and_extends_an_aging_one(
    db, settings, django_assert_num_queries
):
    # given: a claimed job
    from jobs.runner import StepRun

    settings.JOBS_LEASE_SECONDS = 90
    job = make_job()
    claimed = job_claim(job_id=job.id)
    assert claimed is not None and claimed.claim_token is not None
    run = StepRun(job=claimed, claim_token=claimed.claim_token)
    AsyncJob.objects.filter(pk=job.id).update(lease_expires_at=timezone.now())
    # when: less than a third of the lease has run
    with django_assert_num_queries(0):
        run.keep_alive()
    # then: no write
    assert AsyncJob.objects.get(pk=job.id).lease_expires_at <= timezone.now()
    # when: a third of the lease has run since the claim
    run.lease_from -= 31
    with django_assert_num_queries(1):
        run.keep_alive()
    # then: the lease runs a whole lease from now again, and the clock restarts
    assert AsyncJob.objects.get(pk=job.id).lease_expires_at > timezone.now() + timedelta(seconds=80)
    with django_assert_num_queries(0):
        run.keep_alive()


@pytest.mark.django_db(transaction=True)
def test_a_step_that_dies_while_ending_its_chain_leaves_it_whole_for_a_rerun(monkeypatch):
    # given a claimed root with a chained successor that has not run (autocommit, as a worker)
    from django.db import OperationalError, transaction

    from jobs import services
    from jobs.services import ChainSpec, StepSpec, job_chains_create, job_finish

    monkeypatch.setattr(services, "publish_job", lambda **kwargs: True)
    with transaction.atomic():
        root = job_chains_create(
            [
                ChainSpec(
                    organization_id=uuid.uuid4(),
                    brand_id=uuid.uuid4(),
                    job_type=JobType.PROVISION_WORKSPACE,
                    first=StepSpec(JobStep.PROVISION_WORKSPACE),
                    then=StepSpec(JobStep.CREATE_MARKET),
                )
            ]
        )[0]
    claimed = job_claim(job_id=root.id)
    assert claimed is not None
    token = claimed.claim_token

    def die(**kwargs: Any) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "_cancel_successors", die)
    # when the worker dies between finishing the root and cancelling its successor
    with pytest.raises(OperationalError):
        job_finish(job=root, claim_token=token, status=JobStatus.FAILED, error={"code": "x"})
    # then neither write stands: the root is still claimed (its lease will expire and it runs
    # again), and the successor is not left unfinished behind a finished root
    statuses = dict(AsyncJob.objects.values_list("position", "status"))
    assert statuses == {0: JobStatus.IN_PROGRESS, 1000: JobStatus.IN_PROGRESS}
    assert AsyncJob.objects.get(pk=root.id).claim_token == token
    monkeypatch.undo()
    assert job_finish(job=root, claim_token=token, status=JobStatus.FAILED, error={"code": "x"})
    statuses = dict(AsyncJob.objects.values_list("position", "status"))
    assert statuses == {0: JobStatus.FAILED, 1000: JobStatus.CANCELLED}
