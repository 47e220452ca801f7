"""Every async endpoint: 202 + headers, polling to the effective result, and a result equal to
what the sync path answers for the same input (issue 4, acceptance 1 and 5)."""

from __future__ import annotations

import json

import pytest
from django.db.models import Q

from jobs.models import AsyncJob
from provisioning.models import ProvisioningAttempt
from serenity.models import Market
from tests.chains.helpers import (
    brands_path,
    create_brand,
    serenity_path,
    start_async_brand_with_market,
    without_ids,
)
from tests.conftest import poll_job
from tests.support import wait_until_settled


def assert_accepted(response, job_type: str = "provisionWorkspace") -> dict:
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body == {"jobId": body["jobId"], "jobType": job_type, "status": "IN_PROGRESS"}
    assert response["Location"].endswith(f"/serenity/jobs/{body['jobId']}")
    assert int(response["Retry-After"]) >= 1
    return body


def test_async_market_create_equals_sync(sw_writer, sim, worker):
    # given two ready brands (a sync bare create sets the pointer without waiting for the
    # workspace to settle: wait for it, or the first status read may find it not ready yet)
    a = create_brand(sw_writer, "Alpha")
    b = create_brand(sw_writer, "Beta")
    wait_until_settled(sim, b["semrushSubWorkspaceId"])
    payload = {"market": "de", "languageCode": "DE"}
    # when one creates the market synchronously and the other asynchronously
    sync = sw_writer.post(f"{serenity_path(sw_writer, a['id'])}/markets", payload)
    accepted = sw_writer.post(
        f"{serenity_path(sw_writer, b['id'])}/markets", {**payload, "async": True}
    )
    # then
    assert sync.status_code == 201, sync.json()
    assert_accepted(accepted)
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["result"]["status"] == 201
    assert final["result"]["outcome"] == "succeeded"
    assert without_ids(final["result"]["body"]) == without_ids(sync.json())
    assert final["result"]["body"]["brandId"] == b["id"]
    assert [s["step"] for s in final["steps"]] == ["provisionWorkspace", "createMarket"]
    assert all(s["status"] == "COMPLETED" for s in final["steps"])
    assert final["error"] is None
    market = Market.objects.get(brand_id=b["id"], deleted_at__isnull=True)
    assert market.status == "live"
    assert ProvisioningAttempt.objects.filter(brand_id=b["id"], status="pending").count() == 0


def test_async_market_create_on_taken_slice_is_409_before_any_job(sw_writer, sim, worker):
    brand = create_brand(sw_writer, "Alpha")
    path = f"{serenity_path(sw_writer, brand['id'])}/markets"
    assert sw_writer.post(path, {"market": "US", "languageCode": "en"}).status_code == 201
    jobs_before = AsyncJob.objects.count()
    # when
    response = sw_writer.post(path, {"market": "US", "languageCode": "en", "async": True})
    # then
    assert response.status_code == 409
    assert response.json()["error"] == "sliceExists"
    assert AsyncJob.objects.count() == jobs_before


@pytest.mark.parametrize("bad", ["true", 1, None, {}, [], "false", 0])
def test_malformed_async_flag_is_400_and_writes_nothing(sw_writer, sim, worker, bad):
    brand = create_brand(sw_writer, "Alpha")
    calls_before = len(sim.requests_log())
    counts = (AsyncJob.objects.count(), ProvisioningAttempt.objects.count(), Market.objects.count())
    for path, body in [
        (
            f"{serenity_path(sw_writer, brand['id'])}/markets",
            {"market": "US", "languageCode": "en"},
        ),
        (f"{serenity_path(sw_writer, brand['id'])}/activate", {}),
        (brands_path(sw_writer), {"name": "Other", "baseUrl": "https://o.example"}),
    ]:
        response = sw_writer.post(path, {**body, "async": bad})
        assert response.status_code == 400, (path, response.json())
        assert response.json()["error"] == "invalidRequest"
        assert "async" in response.json()["message"]
    assert (
        AsyncJob.objects.count(),
        ProvisioningAttempt.objects.count(),
        Market.objects.count(),
    ) == counts
    assert len(sim.requests_log()) == calls_before


def test_async_flat_market_create_is_one_create_market_job(sw_writer, sim, worker, serenity_org):
    # given a flat org
    type(serenity_org).objects.filter(pk=serenity_org.pk).update(workspace_mode="flat")
    sw_writer.org.refresh_from_db()
    brand = create_brand(sw_writer, "Flat")
    # when
    accepted = sw_writer.post(
        f"{serenity_path(sw_writer, brand['id'])}/markets",
        {"market": "US", "languageCode": "en", "async": True},
    )
    # then
    assert_accepted(accepted)
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "COMPLETED", final
    assert [s["step"] for s in final["steps"]] == ["createMarket"]
    assert final["result"]["status"] == 201
    assert final["result"]["body"]["workspaceId"] == sim.parent_id
    projects = sim.state()["projects"]
    assert [p["workspaceId"] for p in projects] == [sim.parent_id]


def test_async_activate_a_equals_sync(sw_writer, sim, worker):
    # given two draft brands with a baseUrl
    a = create_brand(sw_writer, "Alpha", status="pending")
    b = create_brand(sw_writer, "Beta", status="pending")
    # when
    sync = sw_writer.post(f"{serenity_path(sw_writer, a['id'])}/activate", {})
    accepted = sw_writer.post(f"{serenity_path(sw_writer, b['id'])}/activate", {"async": True})
    # then
    assert sync.status_code == 200, sync.json()
    assert_accepted(accepted)
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["result"] == {
        "status": 200,
        "body": {"brandId": b["id"], "status": "active", "markets": []},
        "outcome": "succeeded",
    }
    assert without_ids(final["result"]["body"]) == without_ids(sync.json())
    assert [s["step"] for s in final["steps"]][-1] == "activateBrandWorkspace"
    brand = sw_writer.get(f"{brands_path(sw_writer)}/{b['id']}").json()
    assert brand["status"] == "active"
    assert brand["semrushProvisioningStatus"] == "ready"


def test_async_activate_b_equals_sync(sw_writer, sim, worker):
    a = create_brand(sw_writer, "Alpha")
    b = create_brand(sw_writer, "Beta")
    sync = sw_writer.post(f"{serenity_path(sw_writer, a['id'])}/activate", {})
    accepted = sw_writer.post(f"{serenity_path(sw_writer, b['id'])}/activate", {"async": True})
    assert sync.status_code == 200, sync.json()
    assert_accepted(accepted)
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["result"]["status"] == 200
    assert without_ids(final["result"]["body"]) == without_ids(sync.json())


def test_async_activate_c_equals_sync(sw_writer, sim, worker):
    a = create_brand(sw_writer, "Alpha", baseUrl="https://example.com")
    b = create_brand(sw_writer, "Beta", baseUrl="https://example.com")
    body = {
        "brandDomain": "example.com",
        "markets": [{"market": "US", "languageCode": "en"}, {"market": "FR", "languageCode": "fr"}],
    }
    sync = sw_writer.post(f"{serenity_path(sw_writer, a['id'])}/activate", body)
    accepted = sw_writer.post(
        f"{serenity_path(sw_writer, b['id'])}/activate", {**body, "async": True}
    )
    assert sync.status_code == 200, sync.json()
    assert_accepted(accepted)
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["result"]["status"] == 200
    assert without_ids(final["result"]["body"]) == without_ids(sync.json())
    assert [m["status"] for m in final["result"]["body"]["markets"]] == [201, 201]
    assert [s["step"] for s in final["steps"]][-1] == "activateMarkets"


def test_async_brand_create_with_market_equals_sync_market_answer(sw_writer, sim, worker):
    accepted = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "async": True,
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    assert accepted.status_code == 202, accepted.json()
    body = accepted.json()
    assert body["semrushProvisioningStatus"] == "pending"
    assert body["jobStatus"] == "IN_PROGRESS"
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "COMPLETED", final
    ws = sim.state()["workspaces"][0]["id"]
    project = sim.state()["projects"][0]["id"]
    assert final["result"] == {
        "status": 201,
        "body": {
            "brandId": body["id"],
            "geoTargetId": 2840,
            "languageCode": "en",
            "workspaceId": ws,
            "projectId": project,
            "published": True,
        },
        "outcome": "succeeded",
    }


def test_brand_reads_show_pending_then_failed_with_reason(sw_writer, sim, worker):
    # given a workspace that will fail to settle
    sim.configure({"settleOutcome": "failed", "settleSeconds": 0.5})
    accepted = sw_writer.post(
        brands_path(sw_writer), {"name": "Doomed", "baseUrl": "https://d.example", "async": True}
    )
    brand_id = accepted.json()["id"]
    listed = sw_writer.get(brands_path(sw_writer)).json()["brands"]
    assert [b["semrushProvisioningStatus"] for b in listed] == ["pending"]
    # when
    final = poll_job(sw_writer, accepted["Location"])
    # then
    assert final["status"] == "FAILED"
    assert final["error"] == {
        "code": "subworkspaceCreationFailed",
        "message": "Semrush could not create the brand's workspace.",
        "retryable": False,
    }
    brand = sw_writer.get(f"{brands_path(sw_writer)}/{brand_id}").json()
    assert brand["semrushProvisioningStatus"] == "failed"
    assert brand["semrushProvisioningError"]["code"] == "terminal"
    assert brand["semrushSubWorkspaceId"] is None


def test_the_worker_logs_each_step_once_in_its_own_line(sw_writer, sim, worker):
    # given the worker's log so far
    offset = worker.log_path.stat().st_size
    # when a brand is created with a market, asynchronously
    accepted = start_async_brand_with_market(sw_writer)
    job_id = accepted["jobId"]
    final = poll_job(sw_writer, f"{serenity_path(sw_writer, accepted['id'])}/jobs/{job_id}")
    # then each step ended in one "step ended" line of ours, and Celery's own per-task lines
    # ("Task … received", "Task … succeeded in …") are not written (CELERY_TASK_LOG_LEVEL)
    assert final["status"] == "COMPLETED", final
    with worker.log_path.open("rb") as log:
        log.seek(offset)
        lines = [json.loads(line) for line in log.read().decode().splitlines() if line[:1] == "{"]
    ended = [line for line in lines if line["message"] == "step ended"]
    rows = AsyncJob.objects.filter(Q(pk=job_id) | Q(root_id=job_id))
    assert sorted(line["step_job_id"] for line in ended) == sorted(str(row.pk) for row in rows)
    assert {line["job_id"] for line in ended} == {job_id}
    assert ended[-1]["step"] == "createMarket"
    assert {line["outcome"] for line in ended} == {"ok"}
    assert [line for line in lines if line["logger"].startswith("celery.")] == []
