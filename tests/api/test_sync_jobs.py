"""Sync work begins as async work does and leaves its job rows (SPEC §13.5): a sync request's
chain is written by the same begin, run at once in the request, and listed by the job routes
with `mode: sync`; it sends no webhook event."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from jobs.models import AsyncJob
from provisioning.models import AttemptReason, AttemptStatus, ProvisioningAttempt
from provisioning.semrush import SemrushClient
from serenity.models import Brand
from tests.support import assert_error
from tests.webhooks.helpers import register
from webhooks.models import WebhookDelivery


def org_jobs(caller: Any, brand_id: str) -> Any:
    response = caller.get(f"/v2/orgs/{caller.org.id}/serenity/jobs?brandId={brand_id}")
    assert response.status_code == 200, response.json()
    return response.json()["items"]


def brand_job(caller: Any, brand_id: str, job_id: str) -> Any:
    path = f"/v2/orgs/{caller.org.id}/brands/{brand_id}/serenity/jobs/{job_id}"
    response = caller.get(path)
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_sync_create_with_a_market_leaves_its_completed_job(sw_writer, sim):
    # when a brand with a market is created synchronously
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands",
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    # then 201 as ever, and its chain is listed for the brand: COMPLETED, sync, with the
    # market's answer
    assert response.status_code == 201, response.json()
    brand_id = response.json()["id"]
    [item] = org_jobs(sw_writer, brand_id)
    assert (item["jobType"], item["mode"], item["status"]) == (
        "provisionWorkspace",
        "sync",
        "COMPLETED",
    )
    assert item["result"]["status"] == 201
    assert item["result"]["body"]["brandId"] == brand_id
    # and its steps: the settle reads, then the market's create
    document = brand_job(sw_writer, brand_id, item["jobId"])
    steps = [(s["step"], s["status"]) for s in document["steps"]]
    assert steps[-1] == ("createMarket", "COMPLETED")
    assert {step for step, _ in steps[:-1]} == {"provisionWorkspace"}
    assert all(status == "COMPLETED" for _, status in steps)
    # and the brand's own list holds it too
    listed = sw_writer.get(f"/v2/orgs/{sw_writer.org.id}/brands/{brand_id}/serenity/jobs")
    assert [j["jobId"] for j in listed.json()["items"]] == [item["jobId"]]
    # and the attempt is that chain's
    [attempt] = ProvisioningAttempt.objects.filter(brand_id=brand_id)
    assert (attempt.status, str(attempt.job_id)) == (AttemptStatus.READY, item["jobId"])


def test_a_sync_failure_leaves_its_failed_job(sw_writer, sim, active_brand):
    # given the workspace's status read raising an unexpected error
    path = f"/v2/orgs/{sw_writer.org.id}/brands/{active_brand.id}/serenity/markets"
    with mock.patch.object(
        SemrushClient, "get_workspace_status", autospec=True, side_effect=RuntimeError("boom")
    ):
        # when a market is created synchronously
        response = sw_writer.post(path, {"market": "US", "languageCode": "en"})
    # then 500 as ever, and the chain is listed FAILED (sync), its attempt failed
    assert_error(response, 500, "internalServerError")
    [item] = org_jobs(sw_writer, str(active_brand.id))
    assert (item["mode"], item["status"], item["error"]["code"]) == ("sync", "FAILED", "jobFailed")
    document = brand_job(sw_writer, str(active_brand.id), item["jobId"])
    assert [(s["step"], s["status"]) for s in document["steps"]] == [
        ("provisionWorkspace", "FAILED")
    ]
    attempt = ProvisioningAttempt.objects.get(brand=active_brand)
    assert (attempt.status, attempt.reason) == (AttemptStatus.FAILED, AttemptReason.UNEXPECTED)


@pytest.mark.django_db(transaction=True)
def test_sync_work_sends_no_webhook_event(sw_writer, sim, settings):
    # given an endpoint taking every job event
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    register(sw_writer, "http://127.0.0.1:9/hook")
    brands = f"/v2/orgs/{sw_writer.org.id}/brands"
    # when a brand is created synchronously, one with a market fails, and one is deactivated
    created = sw_writer.post(brands, {"name": "Acme", "baseUrl": "https://acme.example"})
    assert created.status_code == 201, created.json()
    with mock.patch.object(
        SemrushClient, "create_subworkspace", autospec=True, side_effect=RuntimeError("boom")
    ):
        failed = sw_writer.post(brands, {"name": "Beta", "baseUrl": "https://beta.example"})
    assert_error(failed, 500, "internalServerError")
    brand_id = created.json()["id"]
    deactivated = sw_writer.post(f"{brands}/{brand_id}/serenity/deactivate")
    assert deactivated.status_code == 200, deactivated.json()
    # then their chains ended, sync, and no event was emitted for any
    roots = AsyncJob.objects.filter(root__isnull=True, job_type="provisionWorkspace")
    assert sorted((r.mode, r.step) for r in roots) == [
        ("sync", "deactivateBrand"),
        ("sync", "provisionWorkspace"),
        ("sync", "provisionWorkspace"),
    ]
    assert all(r.status != "IN_PROGRESS" for r in roots)
    assert not WebhookDelivery.objects.exists()
    assert Brand.objects.count() == 1
