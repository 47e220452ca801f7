"""Job polling (issue 4, acceptance 3): never COMPLETED before the chained work ran, and a
bounded number of queries whatever the chain's length."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import AsyncJob
from provisioning import tasks
from tests.chains.helpers import brands_path, serenity_path, start_async_brand_with_market

pytestmark = pytest.mark.django_db(transaction=True)


def run_current(root_id) -> AsyncJob:
    job = AsyncJob.objects.get(pk=root_id).current
    getattr(
        tasks,
        {"provisionWorkspace": "provision_workspace", "createMarket": "create_market"}[job.step],
    )(str(job.pk))
    return job


def test_root_is_in_progress_in_every_phase_until_the_chained_job_finished(
    sw_writer, sim, published, settings
):
    # given a workspace that needs three reads to settle
    sim.configure({"settleSeconds": 0.5})
    settings.SERENITY_PROVISION_BACKOFF_SECONDS = (0.0, 0.0, 0.0, 0.0, 0.0)
    accepted = start_async_brand_with_market(sw_writer)
    location = f"{serenity_path(sw_writer, accepted['id'])}/jobs/{accepted['jobId']}"
    seen = []
    # when each step runs, the root is polled between steps
    for _ in range(20):
        body = sw_writer.get(location).json()
        seen.append((body["status"], [s["step"] for s in body["steps"]]))
        if body["status"] != "IN_PROGRESS":
            break
        job = AsyncJob.objects.get(pk=accepted["jobId"]).current
        if job.step == "provisionWorkspace":
            import time

            time.sleep(0.2)
        run_current(accepted["jobId"])
    # then COMPLETED is only seen once the createMarket step has finished
    assert seen[-1][0] == "COMPLETED"
    assert all(status == "IN_PROGRESS" for status, _ in seen[:-1])
    assert seen[-1][1][-1] == "createMarket"
    assert len(seen[-1][1]) >= 3  # several settle reads, then the chained job
    assert all(steps[-1] != "createMarket" for _, steps in seen[:-2])


def test_polling_costs_the_same_queries_for_2_and_6_steps(sw_writer, sim, published, settings):
    settings.SERENITY_PROVISION_BACKOFF_SECONDS = (0.0, 0.0, 0.0, 0.0, 0.0)
    # a 2-step chain: one settle read, then the market
    sim.configure({"settleSeconds": 0})
    short = start_async_brand_with_market(sw_writer)
    run_current(short["jobId"])
    run_current(short["jobId"])
    # a 6-step chain: five reads (stuck), then a ready one and the market
    sim.configure({"settleOutcome": "stuck"})
    sw_writer.org.refresh_from_db()
    long = start_async_brand_with_market(sw_writer, name="Beta", baseUrl="https://b.example")
    for _ in range(4):
        run_current(long["jobId"])
    sim.configure({"settleOutcome": "created"})
    # the stuck workspace never settles: make it ready by marking it so upstream
    with mock.patch("provisioning.flows.provision.workspace_read_readiness") as read:
        from provisioning.workspace import Readiness

        read.return_value = Readiness.READY
        run_current(long["jobId"])
    run_current(long["jobId"])
    short_body = sw_writer.get(
        f"{serenity_path(sw_writer, short['id'])}/jobs/{short['jobId']}"
    ).json()
    long_body = sw_writer.get(f"{serenity_path(sw_writer, long['id'])}/jobs/{long['jobId']}").json()
    assert len(short_body["steps"]) == 2
    assert len(long_body["steps"]) == 6
    # when
    with CaptureQueriesContext(connection) as short_q:
        sw_writer.get(f"{serenity_path(sw_writer, short['id'])}/jobs/{short['jobId']}")
    with CaptureQueriesContext(connection) as long_q:
        sw_writer.get(f"{serenity_path(sw_writer, long['id'])}/jobs/{long['jobId']}")
    # then
    assert len(short_q.captured_queries) == len(long_q.captured_queries)


def test_unknown_job_and_job_of_another_brand_are_the_same_404(sw_writer, sim, published):
    accepted = start_async_brand_with_market(sw_writer)
    other = sw_writer.post(
        brands_path(sw_writer), {"name": "Other", "baseUrl": "https://o.example"}
    ).json()
    import uuid

    wrong_brand = sw_writer.get(f"{serenity_path(sw_writer, other['id'])}/jobs/{accepted['jobId']}")
    unknown = sw_writer.get(f"{serenity_path(sw_writer, accepted['id'])}/jobs/{uuid.uuid4()}")
    assert wrong_brand.status_code == unknown.status_code == 404
    assert (
        wrong_brand.json()
        == unknown.json()
        == {"error": "jobNotFound", "message": "Job not found."}
    )
    assert (
        sw_writer.get(f"{serenity_path(sw_writer, accepted['id'])}/jobs/not-a-uuid").json()["error"]
        == "invalidRequest"
    )


def test_in_progress_poll_sends_retry_after_and_pending_steps(sw_writer, sim, published):
    accepted = start_async_brand_with_market(sw_writer)
    response = sw_writer.get(f"{serenity_path(sw_writer, accepted['id'])}/jobs/{accepted['jobId']}")
    body = response.json()
    assert int(response["Retry-After"]) >= 1
    assert body["status"] == "IN_PROGRESS"
    assert body["result"] is None and body["error"] is None
    root = AsyncJob.objects.get(pk=accepted["jobId"])
    assert body["steps"] == [
        {
            "step": "provisionWorkspace",
            "status": "PENDING",
            "startedAt": None,
            "finishedAt": None,
            "runAfter": root.run_after.isoformat().replace("+00:00", "Z"),
            "waitingFor": None,
        }
    ]
    assert body["jobType"] == "provisionWorkspace"
    assert set(body) == {
        "jobId",
        "jobType",
        "brandId",
        "mode",
        "status",
        "result",
        "error",
        "steps",
        "createdAt",
        "updatedAt",
        "finishedAt",
    }
    assert body["finishedAt"] is None
    assert body["mode"] == "async"
