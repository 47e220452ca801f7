"""Workers shared fairly across orgs (SPEC §12.5): a delivery of a fair step runs the due job
whose org has the fewest steps running, so a second org's first step is not queued behind
another org's backlog of messages, whatever the pool and its size."""

from __future__ import annotations

import os
import signal
import time
import uuid
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone

from jobs.dispatch import job_fairest_due
from jobs.models import AsyncJob, JobStep
from serenity.models import Role
from tests.chains.helpers import brands_path
from tests.conftest import make_caller
from tests.factories import AsyncJobFactory, OrganizationFactory

FAIR = [JobStep.PROVISION_WORKSPACE, JobStep.CREATE_MARKET]


def due_job(org: uuid.UUID, **fields: Any) -> AsyncJob:
    values: dict[str, Any] = {
        "organization_id": org,
        "run_after": timezone.now() - timedelta(seconds=10),
    }
    values.update(fields)
    return AsyncJobFactory(**values)


def running_job(org: uuid.UUID) -> AsyncJob:
    return due_job(
        org, claim_token=uuid.uuid4(), lease_expires_at=timezone.now() + timedelta(seconds=60)
    )


def test_a_delivery_runs_the_due_job_of_the_org_with_the_fewest_steps_running(db):
    # given org A with one step running and a backlog of five due steps (older), and org B
    # with one due step and nothing running
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    running_job(org_a)
    backlog = [due_job(org_a, run_after=timezone.now() - timedelta(seconds=30)) for _ in range(5)]
    second = due_job(org_b)
    # when a delivery of A's oldest due step asks which job it runs
    chosen = job_fairest_due(job_id=backlog[0].id, steps=FAIR)
    # then it runs B's step, not its own
    assert chosen == second.id


def test_a_delivery_never_takes_a_sync_requests_row(db):
    # given org A's backlog, and org B's sync request sleeping before its next settle read
    # (its row due, unclaimed: the request claims it itself, SPEC §13.5)
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    running_job(org_a)
    backlog = [due_job(org_a, run_after=timezone.now() - timedelta(seconds=30)) for _ in range(5)]
    sync_row = due_job(org_b, mode="sync")
    # when a delivery of A's oldest due step asks which job it runs
    chosen = job_fairest_due(job_id=backlog[0].id, steps=FAIR)
    # then not B's sync row (the fairest otherwise): a job of its own org
    assert chosen != sync_row.id
    # and a delivery of the sync row itself (the dispatcher's, once the request died) runs it
    assert job_fairest_due(job_id=sync_row.id, steps=FAIR) == sync_row.id


def test_with_nothing_running_the_org_with_the_smaller_backlog_goes_first(db):
    # given org A's backlog of five due steps (older) and org B's one, nothing running (short
    # steps hold their claim only briefly)
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    backlog = [due_job(org_a, run_after=timezone.now() - timedelta(seconds=30)) for _ in range(5)]
    second = due_job(org_b)
    # when a delivery of A's oldest due step asks which job it runs
    chosen = job_fairest_due(job_id=backlog[0].id, steps=FAIR)
    # then it runs B's step
    assert chosen == second.id


def test_on_a_tie_a_delivery_runs_its_own_job(db):
    # given orgs A and B each with one step running and one due
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    running_job(org_a)
    running_job(org_b)
    own = due_job(org_a)
    due_job(org_b, run_after=timezone.now() - timedelta(seconds=60))
    # when / then: a delivery of A's due step runs it (no churn between equals)
    assert job_fairest_due(job_id=own.id, steps=FAIR) == own.id


def test_a_delivery_of_another_kind_of_step_runs_its_own_job(db):
    # given a due step of a kind that does not share the workers (not in `steps`), and another
    # org's due fair step
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    running_job(org_a)
    own = due_job(org_a, step=JobStep.CLASSIFY_PROMPTS)
    due_job(org_b)
    # when / then
    assert job_fairest_due(job_id=own.id, steps=FAIR) == own.id


def test_jobs_not_due_or_claimed_are_not_chosen(db):
    # given org B's steps: one due later, one claimed under a live lease
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    running_job(org_a)
    own = due_job(org_a)
    due_job(org_b, run_after=timezone.now() + timedelta(seconds=30))
    running_job(org_b)
    # when / then: nothing else is claimable, the delivery runs its own job
    assert job_fairest_due(job_id=own.id, steps=FAIR) == own.id


def test_with_one_org_s_work_due_a_delivery_runs_its_own_job_after_one_read(
    db, django_assert_num_queries
):
    # given only org A's work due: a step running and a backlog of five (older than its own)
    org_a = uuid.uuid4()
    running_job(org_a)
    for _ in range(5):
        due_job(org_a, run_after=timezone.now() - timedelta(seconds=30))
    own = due_job(org_a)
    # when a delivery of A's step asks which job it runs
    with django_assert_num_queries(1) as captured:
        chosen = job_fairest_due(job_id=own.id, steps=FAIR)
    # then its own, after one read of the orgs due (no ranking: nothing to share)
    assert chosen == own.id
    assert "DISTINCT" in captured.captured_queries[0]["sql"]


def test_with_one_org_s_work_due_a_delivery_whose_job_is_taken_runs_no_other(db):
    # given only org A's work due, the delivery's own step already running (a duplicate
    # message), and two more of A's steps due, each with a message of its own
    org_a = uuid.uuid4()
    own = running_job(org_a)
    due_job(org_a)
    due_job(org_a)
    # when / then: the delivery's own job, which it cannot claim (no ranking: the runner
    # then looks for a due job waiting for its message, `job_unclaimed_due`)
    assert job_fairest_due(job_id=own.id, steps=FAIR) == own.id


def test_a_delivery_whose_job_was_cancelled_runs_the_oldest_due_job_waiting_behind_it(
    db, django_capture_on_commit_callbacks
):
    # given a message left in the queue by org A's cancelled onboarding (its job finished), and
    # org B's due steps waiting for their messages behind it: its oldest, a newer one, an older
    # sync request's row, and one running
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    own = due_job(org_a, status="CANCELLED")
    oldest = due_job(org_b, run_after=timezone.now() - timedelta(seconds=20))
    due_job(org_b)
    due_job(org_b, mode="sync", run_after=timezone.now() - timedelta(seconds=60))
    running_job(org_b)
    # when the message is delivered
    ran, published = run_delivery(own.id, django_capture_on_commit_callbacks)
    # then it ran B's oldest due step (claimed: its own message will find it taken), and
    # published nothing
    assert ran == [oldest.id]
    assert published == []
    oldest.refresh_from_db()
    assert oldest.claim_token is not None


@pytest.mark.parametrize(
    "others",
    [
        pytest.param([], id="nothing else due"),
        pytest.param(["running", "later", "sync"], id="nothing else claimable"),
    ],
)
def test_a_delivery_whose_job_is_running_runs_nothing_when_no_other_job_waits(
    db, django_capture_on_commit_callbacks, others
):
    # given the delivery's own job running (a duplicate), and only `others`
    org_a = uuid.uuid4()
    own = running_job(org_a)
    made = {
        "running": lambda: running_job(org_a),
        "later": lambda: due_job(org_a, run_after=timezone.now() + timedelta(seconds=30)),
        "sync": lambda: due_job(org_a, mode="sync"),
    }
    for other in others:
        made[other]()
    # when / then: nothing ran, nothing was published
    assert run_delivery(own.id, django_capture_on_commit_callbacks) == ([], [])


def run_delivery(job_id: uuid.UUID, django_capture_on_commit_callbacks: Any) -> tuple[list, list]:
    """The jobs a delivery of `job_id` ran and published (the handler and the broker recorded)."""
    from jobs import runner
    from provisioning import tasks  # noqa: F401 - registers the fair steps

    ran: list[uuid.UUID] = []
    published: list[str] = []
    with (
        mock.patch.object(
            runner, "_run_claimed", side_effect=lambda run, _: ran.append(run.job.id)
        ),
        mock.patch(
            "jobs.services.publish_job",
            side_effect=lambda **kw: published.append(str(kw["job_id"])) or True,
        ),
        django_capture_on_commit_callbacks(execute=True),
    ):
        runner.run_step(job_id=str(job_id))
    return ran, published


def test_a_delivery_that_runs_another_org_s_job_gives_its_own_a_new_message(
    db, django_capture_on_commit_callbacks
):
    # given org A with a step running and one due (the delivery's own), and org B's step due
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    running_job(org_a)
    own = due_job(org_a)
    second = due_job(org_b)
    # when the delivery of A's step runs (the step's handler and the broker recorded)
    ran, published = run_delivery(own.id, django_capture_on_commit_callbacks)
    # then it ran B's step, and A's step (due, unclaimed) has a message of its own again
    assert ran == [second.id]
    assert published == [str(own.id)]
    own.refresh_from_db()
    assert own.claim_token is None and own.status == "IN_PROGRESS"


@pytest.mark.django_db(transaction=True)
def test_a_second_org_s_step_is_claimed_before_another_org_s_backlog(worker, sw_writer, sim):
    # given the session's worker (Celery's default prefork pool, --concurrency 2) stopped, org
    # A's 10 async brand creates queued (upstream answers each call in 0.4 s, so each step
    # holds its worker slot), then org B's one create queued behind them
    sim.configure({"settleSeconds": 0, "latencyMs": 400})
    org_b = OrganizationFactory(
        serenity_enabled=True,
        semrush_parent_workspace_id=sim.parent_id,
        workspace_mode="subworkspace",
    )
    second = make_caller(org_b, Role.WRITER)
    assert worker.proc is not None
    os.killpg(worker.proc.pid, signal.SIGSTOP)
    try:
        for n in range(10):
            created = sw_writer.post(
                brands_path(sw_writer),
                {"name": f"A{n}", "baseUrl": f"https://a{n}.example", "async": True},
            )
            assert created.status_code == 202, created.json()
        created = second.post(
            brands_path(second), {"name": "B", "baseUrl": "https://b.example", "async": True}
        )
        assert created.status_code == 202, created.json()
        b_job = created.json()["jobId"]
    finally:
        os.killpg(worker.proc.pid, signal.SIGCONT)
    # when the worker takes the messages (FIFO: A's ten, then B's)
    deadline = time.monotonic() + 60
    while AsyncJob.objects.get(pk=b_job).started_at is None and time.monotonic() < deadline:
        time.sleep(0.1)
    b_started = AsyncJob.objects.get(pk=b_job).started_at
    assert b_started is not None
    # then B's step was claimed as soon as a slot came free: at most the two A steps the pool
    # took first (and a third, had both slots claimed at once) started before it
    a_roots = AsyncJob.objects.filter(organization_id=sw_writer.org.id, root__isnull=True)
    assert a_roots.count() == 10
    assert a_roots.filter(started_at__lte=b_started).count() <= 3
