"""The hand-over (JOBS_HAND_OVER_INLINE, on by default): the worker that promotes a workspace
claims and runs the chain's next step itself, instead of publishing it for any worker.

The steps run in-process (the Celery tasks called as functions), publishing recorded.
"""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.db import OperationalError
from django.utils import timezone

from jobs import services as job_services
from jobs.dispatch import jobs_dispatch_due
from jobs.models import AsyncJob
from provisioning import tasks
from provisioning.models import ProvisioningAttempt
from provisioning.semrush.client import SemrushClient
from serenity.models import Market
from tests.chains.helpers import serenity_path, start_async_brand_with_market
from tests.support import (
    calls,
    calls_since,
    create_child,
    create_project,
    family,
    languages,
    list_projects,
    mark,
    publish,
    read_project,
    set_tracked_url,
    status_read,
)

pytestmark = pytest.mark.django_db(transaction=True)


def chained_of(root_id: str) -> AsyncJob:
    return AsyncJob.objects.get(root_id=root_id, step="createMarket")


def test_one_delivery_runs_the_promotion_and_the_chained_step(sw_writer, sim, published):
    # given a workspace that is ready at once
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    assert published == [accepted["jobId"]]
    # when the root's one message is delivered
    tasks.provision_workspace(accepted["jobId"])
    # then the chained step ran in the same task, with no message of its own
    assert published == [accepted["jobId"]]
    chained = chained_of(accepted["jobId"])
    assert (chained.status, chained.run_count) == ("COMPLETED", 1)
    polled = sw_writer.get(
        f"{serenity_path(sw_writer, accepted['id'])}/jobs/{accepted['jobId']}"
    ).json()
    assert polled["status"] == "COMPLETED"
    assert (polled["result"]["status"], polled["result"]["outcome"]) == (201, "succeeded")
    assert polled["result"]["body"]["projectId"] == sim.state()["projects"][0]["id"]
    assert ProvisioningAttempt.objects.get(job_id=accepted["jobId"]).status == "ready"
    assert Market.objects.get(brand_id=accepted["id"]).status == "live"


def test_a_chained_step_cancelled_before_the_hand_over_claims_it_is_not_run(
    sw_writer, sim, published
):
    # given a cancel that lands between the promotion's commit and the hand-over's claim
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    cancel_path = f"{serenity_path(sw_writer, accepted['id'])}/jobs/{accepted['jobId']}/cancel"
    real_claim = job_services.job_claim
    cancels = []

    def claim(*, job_id):  # type: ignore[no-untyped-def]
        if job_id != AsyncJob.objects.get(pk=accepted["jobId"]).id:
            cancels.append(sw_writer.post(cancel_path))
        return real_claim(job_id=job_id)

    # when
    with mock.patch("jobs.runner.services.job_claim", side_effect=claim):
        tasks.provision_workspace(accepted["jobId"])
    # then the cancel won: the chained step never touched Semrush, the workspace stays
    assert [c.status_code for c in cancels] == [200]
    assert cancels[0].json()["status"] == "CANCELLED"
    chained = chained_of(accepted["jobId"])
    assert (chained.status, chained.run_count) == ("CANCELLED", 0)
    assert sim.state()["projects"] == []
    assert len(sim.state()["workspaces"]) == 1
    assert ProvisioningAttempt.objects.get(job_id=accepted["jobId"]).status == "ready"
    assert not Market.objects.filter(brand_id=accepted["id"]).exists()


def test_a_hand_over_lost_with_its_worker_is_published_by_the_dispatcher(
    sw_writer, sim, published, settings
):
    # given a worker that loses its database right after the promotion committed
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    real_claim = job_services.job_claim

    def claim(*, job_id):  # type: ignore[no-untyped-def]
        if job_id != AsyncJob.objects.get(pk=accepted["jobId"]).id:
            raise OperationalError("server closed the connection unexpectedly")
        return real_claim(job_id=job_id)

    with (
        mock.patch("jobs.runner.services.job_claim", side_effect=claim),
        pytest.raises(OperationalError),
    ):
        tasks.provision_workspace(accepted["jobId"])
    chained = chained_of(accepted["jobId"])
    assert (chained.status, chained.claim_token, chained.run_count) == ("IN_PROGRESS", None, 0)
    assert chained.run_after is not None
    # when a lease has passed, the dispatcher sends it (it was never published)
    AsyncJob.objects.filter(pk=chained.pk).update(
        published_at=timezone.now() - timedelta(seconds=settings.JOBS_LEASE_SECONDS + 1)
    )
    assert jobs_dispatch_due() == 1
    assert published[-1] == str(chained.pk)
    # and its delivery finishes the chain
    tasks.create_market(str(chained.pk))
    assert AsyncJob.objects.get(pk=chained.pk).status == "COMPLETED"
    assert len(sim.state()["projects"]) == 1


def test_an_attempt_cancelled_before_the_hand_over_claims_its_step_leaves_it_unrun(
    sw_writer, sim, published
):
    # given a deactivate's cancel of the attempt that lands between the promotion's commit and
    # the hand-over's claim (the handed-over step trusts the promotion's rows instead of reading
    # the attempt again)
    from provisioning.services import attempt_cancel

    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    attempt = ProvisioningAttempt.objects.get(job_id=accepted["jobId"])
    real_claim = job_services.job_claim
    cancelled = []

    def claim(*, job_id):  # type: ignore[no-untyped-def]
        if job_id != AsyncJob.objects.get(pk=accepted["jobId"]).id:
            cancelled.append(attempt_cancel(attempt_id=attempt.id))
        return real_claim(job_id=job_id)

    # when (the cleanup a cancel schedules is recorded, not sent to the session's worker)
    with (
        mock.patch("jobs.runner.services.job_claim", side_effect=claim),
        mock.patch("provisioning.services.schedule_cleanup") as cleanup,
    ):
        tasks.provision_workspace(accepted["jobId"])
    # then the chained job was cancelled with the attempt, in one transaction: it never ran and
    # never touched Semrush
    assert cancelled == [True]
    cleanup.assert_called_once_with(attempt_id=attempt.id)
    chained = chained_of(accepted["jobId"])
    assert (chained.status, chained.run_count) == ("CANCELLED", 0)
    assert sim.state()["projects"] == []
    attempt.refresh_from_db()
    assert (attempt.status, attempt.reason) == ("failed", "cancelled")
    assert not Market.objects.filter(brand_id=accepted["id"]).exists()


def test_the_market_step_does_not_look_for_projects_in_the_workspace_its_chain_just_made(
    sw_writer, sim, published
):
    # given a brand create with a market whose workspace is ready at once
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    # when the chain runs
    tasks.provision_workspace(accepted["jobId"])
    # then the market step went straight to the create: a workspace made moments ago by this
    # attempt holds no project to find
    workspace = sim.state()["workspaces"][0]["id"]
    project = sim.state()["projects"][0]["id"]
    assert [c for c in calls(sim) if c != languages()] == [
        family(sim.parent_id),
        create_child(sim.parent_id),
        status_read(workspace),
        create_project(workspace),
        set_tracked_url(workspace, project),
        publish(workspace, project),
        read_project(workspace, project),
    ]
    assert chained_of(accepted["jobId"]).status == "COMPLETED"
    assert Market.objects.get(brand_id=accepted["id"]).semrush_project_id == project


def test_a_re_run_of_the_market_step_resumes_the_project_its_dead_first_run_made(
    sw_writer, sim, published, chained_job_delivered_separately
):
    # given a promoted chain whose market step died right after creating its project upstream,
    # before recording it
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    tasks.provision_workspace(accepted["jobId"])
    chained = chained_of(accepted["jobId"])

    class Died(BaseException):
        pass

    real_create = SemrushClient.create_project

    def create_then_die(self, **kwargs):  # type: ignore[no-untyped-def]
        real_create(self, **kwargs)
        raise Died()

    with (
        mock.patch.object(SemrushClient, "create_project", create_then_die),
        pytest.raises(Died),
    ):
        tasks.create_market(str(chained.pk))
    assert len(sim.state()["projects"]) == 1
    assert Market.objects.get(brand_id=accepted["id"]).semrush_project_id is None
    # when its lease runs out and the step is delivered again
    AsyncJob.objects.filter(pk=chained.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    start = mark(sim)
    tasks.create_market(str(chained.pk))
    # then the second run looked for the slice's project, found the draft and resumed it
    workspace = sim.state()["workspaces"][0]["id"]
    project = sim.state()["projects"][0]["id"]
    assert [c for c in calls_since(sim, start) if c != languages()] == [
        list_projects(workspace),
        set_tracked_url(workspace, project),
        publish(workspace, project),
        read_project(workspace, project),
    ]
    assert len(sim.state()["projects"]) == 1
    chained.refresh_from_db()
    assert (chained.status, chained.run_count) == ("COMPLETED", 2)
    market = Market.objects.get(brand_id=accepted["id"])
    assert (market.status, market.semrush_project_id) == ("live", project)
