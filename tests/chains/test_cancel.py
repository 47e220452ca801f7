"""The cancel route (SPEC §6.6)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from jobs.models import AsyncJob
from provisioning import tasks
from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market
from tests.chains.helpers import serenity_path, start_async_brand_with_market

pytestmark = pytest.mark.django_db(transaction=True)


def cancel(caller, accepted):
    return caller.post(f"{serenity_path(caller, accepted['id'])}/jobs/{accepted['jobId']}/cancel")


def test_cancel_before_promotion_fails_the_attempt_and_cancels_the_chain(sw_writer, sim, published):
    accepted = start_async_brand_with_market(sw_writer)
    sim.configure({"settleSeconds": 30})
    tasks.provision_workspace(accepted["jobId"])  # created, not ready yet
    # when
    response = cancel(sw_writer, accepted)
    # then
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["jobId"] == accepted["jobId"]
    assert body["status"] == "CANCELLED"
    assert body["error"] == {
        "code": "provisioningCancelled",
        "message": "Provisioning was cancelled.",
        "retryable": True,
    }
    attempt = ProvisioningAttempt.objects.get(job_id=accepted["jobId"])
    assert (attempt.status, attempt.reason) == ("failed", "cancelled")
    assert not AsyncJob.objects.filter(status="IN_PROGRESS").exists()
    assert Market.objects.filter(brand_id=accepted["id"]).count() == 0
    # a scheduled settle read that is delivered late does nothing
    later = AsyncJob.objects.get(pk=accepted["jobId"]).current
    workspace_calls = lambda: [  # noqa: E731
        r for r in sim.requests_log() if r["path"].endswith(("/status", "/child", "/family"))
    ]
    calls = len(workspace_calls())
    tasks.provision_workspace(str(later.pk))
    assert len(workspace_calls()) == calls


def test_cancel_after_promotion_cancels_the_unstarted_chained_job(
    sw_writer, sim, published, chained_job_delivered_separately
):
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    tasks.provision_workspace(accepted["jobId"])  # promoted
    # when
    response = cancel(sw_writer, accepted)
    # then the promoted workspace stays, the attempt is ready
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "CANCELLED"
    attempt = ProvisioningAttempt.objects.get(job_id=accepted["jobId"])
    assert attempt.status == "ready"
    assert (
        Brand.objects.get(pk=accepted["id"]).semrush_sub_workspace_id
        == sim.state()["workspaces"][0]["id"]
    )
    chained = AsyncJob.objects.get(pk=accepted["jobId"]).current
    tasks.create_market(str(chained.pk))
    assert sim.state()["projects"] == []


def test_cancel_of_a_running_chained_job_is_409(
    sw_writer, sim, published, chained_job_delivered_separately
):
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    tasks.provision_workspace(accepted["jobId"])
    chained = AsyncJob.objects.get(pk=accepted["jobId"]).current
    sim.add_fault({"method": "POST", "pathRegex": "/projects$", "delayMs": 800})

    def run():
        tasks.create_market(str(chained.pk))
        connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    while not [r for r in sim.requests_log() if r["path"].endswith("/projects")]:
        time.sleep(0.02)
    # when
    response = cancel(sw_writer, accepted)
    thread.join()
    # then
    assert response.status_code == 409
    assert response.json() == {
        "error": "jobNotCancellable",
        "message": "The job cannot be cancelled at this point.",
    }
    assert (
        sw_writer.get(
            f"{serenity_path(sw_writer, accepted['id'])}/jobs/{accepted['jobId']}"
        ).json()["status"]
        == "COMPLETED"
    )


def test_cancel_of_a_finished_job_is_409(sw_writer, sim, published):
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    tasks.provision_workspace(accepted["jobId"])
    tasks.create_market(str(AsyncJob.objects.get(pk=accepted["jobId"]).current.pk))
    response = cancel(sw_writer, accepted)
    assert response.status_code == 409
    assert response.json() == {"error": "jobFinished", "message": "The job has already finished."}


def test_reader_cannot_cancel(sw_writer, sim, published, serenity_org):
    from serenity.models import Role
    from tests.conftest import make_caller

    accepted = start_async_brand_with_market(sw_writer)
    reader = make_caller(serenity_org, Role.READER)
    response = cancel(reader, accepted)
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    assert ProvisioningAttempt.objects.get(job_id=accepted["jobId"]).status == "pending"
