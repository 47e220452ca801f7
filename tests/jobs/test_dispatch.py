"""The dispatcher's selection (SPEC §6.4): every due job with no live message is re-published;
nothing else is. `publish_job` is replaced by a recorder: this tests which jobs are chosen."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs import dispatch
from jobs.models import AsyncJob, JobStatus, JobStep
from tests.jobs.test_claim import make_job


class Recorder:
    def __init__(self, *, accept: bool = True, mark_published: bool = False) -> None:
        self.accept = accept
        self.mark_published = mark_published
        self.calls: list[tuple[Any, str]] = []

    def __call__(self, *, job_id: Any, task_name: str, countdown: float = 0.0) -> bool:
        self.calls.append((job_id, task_name))
        if self.accept and self.mark_published:
            AsyncJob.objects.filter(pk=job_id).update(published_at=timezone.now())
        return self.accept

    @property
    def job_ids(self) -> set[Any]:
        return {job_id for job_id, _ in self.calls}


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    fake = Recorder()
    monkeypatch.setattr(dispatch, "publish_job", fake)
    return fake


def ago(seconds: float) -> Any:
    return timezone.now() - timedelta(seconds=seconds)


def test_dispatcher_republishes_exactly_the_due_jobs_without_a_live_message(db, settings, recorder):
    # given
    settings.JOBS_LEASE_SECONDS = 120
    never_published = make_job(published_at=None)
    lost = make_job(published_at=ago(121), step=JobStep.CREATE_MARKET)
    expired_lease = make_job(
        published_at=ago(300), claim_token=uuid.uuid4(), lease_expires_at=ago(1)
    )
    # and jobs that must be left alone
    make_job(published_at=ago(1))  # its message is on its way
    make_job(published_at=ago(300), claim_token=uuid.uuid4(), lease_expires_at=ago(-60))
    make_job(run_after=ago(-30), published_at=None)  # not due yet
    make_job(run_after=None, published_at=None, step=JobStep.CREATE_MARKET)  # waits for promotion
    for status in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED):
        make_job(status=status, published_at=None)
    # when
    published = dispatch.jobs_dispatch_due()
    # then
    assert published == 3
    assert sorted(recorder.calls, key=lambda c: str(c[0])) == sorted(
        [
            (never_published.id, "serenity.step.provisionWorkspace"),
            (lost.id, "serenity.step.createMarket"),
            (expired_lease.id, "serenity.step.provisionWorkspace"),
        ],
        key=lambda c: str(c[0]),
    )


def test_a_countdown_message_is_not_lost_before_its_due_time_plus_a_lease(db, settings, recorder):
    # given: a settle read due now whose countdown message was published for "now"
    settings.JOBS_LEASE_SECONDS = 120
    make_job(run_after=ago(1), published_at=ago(1))
    # when / then
    assert dispatch.jobs_dispatch_due() == 0
    assert recorder.calls == []


def test_dispatcher_stops_the_round_when_the_broker_is_down(db, monkeypatch):
    # given
    down = Recorder(accept=False)
    monkeypatch.setattr(dispatch, "publish_job", down)
    for age in (30, 20, 10):
        make_job(run_after=ago(age), published_at=None)
    # when
    published = dispatch.jobs_dispatch_due()
    # then: one failed attempt, the rest waits for the next round
    assert published == 0
    assert len(down.calls) == 1


def test_dispatcher_publishes_the_longest_due_job_first(db, recorder):
    oldest = make_job(run_after=ago(30), published_at=None)
    make_job(run_after=ago(10), published_at=None)
    dispatch.jobs_dispatch_due(limit=1)
    assert recorder.job_ids == {oldest.id}


def test_an_expired_lease_is_republished_once_per_lease_not_every_round(db, settings, monkeypatch):
    # given: a worker died holding the claim; the dispatcher re-publishes it
    settings.JOBS_LEASE_SECONDS = 120
    publisher = Recorder(mark_published=True)
    monkeypatch.setattr(dispatch, "publish_job", publisher)
    job = make_job(published_at=ago(300), claim_token=uuid.uuid4(), lease_expires_at=ago(1))
    assert dispatch.jobs_dispatch_due() == 1
    # when: the next rounds run before any worker picked the new message up
    dispatch.jobs_dispatch_due()
    dispatch.jobs_dispatch_due()
    # then: one message, until that one is itself overdue by a lease
    assert publisher.job_ids == {job.id} and len(publisher.calls) == 1
    AsyncJob.objects.filter(pk=job.id).update(published_at=ago(121))
    assert dispatch.jobs_dispatch_due() == 1


def test_dispatcher_publishes_due_jobs_round_robin_across_orgs(db, recorder):
    # given one org with a backlog of four re-scheduled steps, due for a while, and a second
    # org with one job that became due just now, and a third with two
    busy, single, pair = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    backlog = [
        make_job(organization_id=busy, run_after=ago(60 - i), published_at=None) for i in range(4)
    ]
    newcomer = make_job(organization_id=single, run_after=ago(0.5), published_at=None)
    two = [make_job(organization_id=pair, run_after=ago(30 - i), published_at=None) for i in (0, 1)]
    # when the dispatcher runs
    dispatch.jobs_dispatch_due()
    # then each org's oldest job goes out first, then each org's second, and so on
    assert [job_id for job_id, _ in recorder.calls] == [
        backlog[0].id,
        two[0].id,
        newcomer.id,
        backlog[1].id,
        two[1].id,
        backlog[2].id,
        backlog[3].id,
    ]


def test_round_robin_holds_under_the_dispatch_limit(db, recorder):
    # given a backlog larger than one round's limit, and another org's single job, due last
    busy, single = uuid.uuid4(), uuid.uuid4()
    for i in range(5):
        make_job(organization_id=busy, run_after=ago(60 - i), published_at=None)
    newcomer = make_job(organization_id=single, run_after=ago(0.5), published_at=None)
    # when one round may publish only two jobs
    dispatch.jobs_dispatch_due(limit=2)
    # then the second org's job is one of them
    assert newcomer.id in recorder.job_ids and len(recorder.calls) == 2
