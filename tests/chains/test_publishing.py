"""Publishing confirmed through real workers (SPEC §12.1): an async chain confirms before it
ends; a sync request that could not wait leaves the confirmation to a background job, which a
deactivate meanwhile beats."""

from __future__ import annotations

import time

from jobs.models import AsyncJob
from provisioning.market_writes import CONFIRM_JOB_TYPE
from provisioning.models import ProvisioningAttempt
from serenity.models import Market
from tests.chains.helpers import create_brand, serenity_path, start_async_brand_with_market
from tests.conftest import poll_job
from tests.support import calls, delete_project, publish, read_project, wait_until_settled

US_EN = {"market": "US", "languageCode": "en"}


def _wait_for(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_an_async_create_completes_only_once_its_publish_is_confirmed(sw_writer, sim, worker):
    # given Semrush publishing for a second and a half
    sim.configure({"publishSeconds": 1.5})
    # when a brand with a market is created asynchronously
    accepted = start_async_brand_with_market(sw_writer)
    location = f"{serenity_path(sw_writer, accepted['id'])}/jobs/{accepted['jobId']}"
    # then, published but not yet confirmed, the job is still in progress
    _wait_for(lambda: Market.objects.filter(status="publishing").exists())
    assert sw_writer.get(location).json()["status"] == "IN_PROGRESS"
    final = poll_job(sw_writer, location)
    assert final["status"] == "COMPLETED", final
    assert final["result"]["status"] == 201
    assert final["result"]["body"]["published"] is True
    market = Market.objects.get(brand_id=accepted["id"])
    assert market.status == "live"
    # how long Semrush took by its `published_at` (millisecond precision; the service stamps the
    # publish's start once its answer is in and recorded in the ledger, a few ms after Semrush's)
    assert 1.47 <= market.publish_seconds < 2.5
    ws, pid = market.workspace_id, market.semrush_project_id
    made = calls(sim)
    after_publish = made[made.index(publish(ws, pid)) + 1 :]
    # read at once (nothing learned yet), then again after the back-off: live
    assert after_publish == [read_project(ws, pid), read_project(ws, pid)]


def test_a_single_market_whose_publish_fails_ends_the_job_failed(sw_writer, sim, worker):
    # given Semrush failing every publish
    sim.configure({"publishOutcome": "failed"})
    brand = create_brand(sw_writer, "Acme")
    wait_until_settled(sim, brand["semrushSubWorkspaceId"])
    # when a market is created asynchronously
    response = sw_writer.post(
        f"{serenity_path(sw_writer, brand['id'])}/markets", {**US_EN, "async": True}
    )
    final = poll_job(sw_writer, response["Location"])
    # then the job failed with publishFailed (retryable: a later create resumes the market)
    assert final["status"] == "FAILED", final
    assert final["result"] is None
    assert final["error"] == {
        "code": "publishFailed",
        "message": "Semrush could not publish the market's project; create the market again.",
        "retryable": True,
    }
    market = Market.objects.get(brand_id=brand["id"])
    assert (market.status, market.reserved_by) == ("publish_failed", None)
    # the workspace is fine: the attempt is ready
    assert set(
        ProvisioningAttempt.objects.filter(brand_id=brand["id"]).values_list("status", flat=True)
    ) == {"ready"}
    # and a later create resumes the same project, now live
    sim.configure({"publishOutcome": "live"})
    again = sw_writer.post(f"{serenity_path(sw_writer, brand['id'])}/markets", US_EN)
    assert again.status_code == 201, again.json()
    assert again.json()["projectId"] == market.semrush_project_id
    assert Market.objects.get(brand_id=brand["id"]).status == "live"


def test_a_slow_publish_goes_live_later_without_another_request(sw_writer, sim, worker, settings):
    # given a publish slower than a sync request waits
    settings.SERENITY_PUBLISH_SYNC_WAIT_SECONDS = 0
    brand = create_brand(sw_writer, "Acme")
    wait_until_settled(sim, brand["semrushSubWorkspaceId"])
    sim.configure({"publishSeconds": 1})
    # when the market is created synchronously
    response = sw_writer.post(f"{serenity_path(sw_writer, brand['id'])}/markets", US_EN)
    # then the answer says it is not published yet
    assert response.status_code == 201, response.json()
    assert response.json()["published"] is False
    market_path = f"{serenity_path(sw_writer, brand['id'])}/markets/2840/en"
    assert sw_writer.get(market_path).json()["status"] == "publishing"
    # and the background confirmation makes it live, with no request from the client
    _wait_for(lambda: sw_writer.get(market_path).json()["status"] == "live")
    job = AsyncJob.objects.get(job_type=CONFIRM_JOB_TYPE)
    _wait_for(lambda: AsyncJob.objects.get(pk=job.pk).status == "COMPLETED")
    job.refresh_from_db()
    assert job.result["body"]["published"] is True
    assert Market.objects.get(brand_id=brand["id"]).reserved_by is None


def test_a_deactivate_during_the_background_confirmation_wins(sw_writer, sim, worker, settings):
    # given a market left to its background confirmation, Semrush still publishing
    settings.SERENITY_PUBLISH_SYNC_WAIT_SECONDS = 0
    brand = create_brand(sw_writer, "Acme")
    wait_until_settled(sim, brand["semrushSubWorkspaceId"])
    sim.configure({"publishSeconds": 1})
    created = sw_writer.post(f"{serenity_path(sw_writer, brand['id'])}/markets", US_EN).json()
    assert created["published"] is False
    # when the brand is deactivated meanwhile
    response = sw_writer.post(f"{serenity_path(sw_writer, brand['id'])}/deactivate")
    assert response.status_code == 200, response.json()
    # then the confirmation ends without bringing the market back
    job = AsyncJob.objects.get(job_type=CONFIRM_JOB_TYPE)
    _wait_for(lambda: AsyncJob.objects.get(pk=job.pk).status != "IN_PROGRESS")
    market = Market.objects.get(brand_id=brand["id"])
    assert market.deleted_at is not None
    assert market.status != "live"
    assert AsyncJob.objects.get(pk=job.pk).status == "CANCELLED"
    assert delete_project(created["workspaceId"], created["projectId"]) in calls(sim)
    assert sim.state()["projects"] == []
