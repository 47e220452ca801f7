"""A sync request that cannot get its upstream permits within SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS
answers 503 `upstreamBusy` with `Retry-After` (SPEC §10.6): it writes nothing beyond what a
failed attempt records, and leaves nothing upstream that no brand accounts for."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings

from provisioning import quota
from tests.support import (
    assert_error,
    calls,
    calls_with_status,
    db_counts_but_ended_sync_jobs,
)

pytestmark = pytest.mark.django_db(transaction=True)

EMPTY = {"brands": 0, "markets": 0, "attempts": 0, "jobs": 0, "prompts": 0}
BUSY = {
    "error": "upstreamBusy",
    "message": "Semrush is busy with this organization's requests; retry later.",
}


@pytest.fixture(autouse=True)
def short_sync_wait(settings):  # type: ignore[no-untyped-def]
    settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 0.3


@pytest.fixture
def own_bucket(sim):  # type: ignore[no-untyped-def]
    key = quota.credential_key(sim.org_token)
    yield key
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(key)


def brands_path(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands"


def test_a_sync_create_with_no_permit_in_time_is_503_upstream_busy_and_writes_nothing(
    sw_writer, sim, own_bucket
):
    # given upstream paused the org's credential for 30 s
    quota.store().pause(own_bucket, rate=10, burst=20, seconds=30)
    # when a sync brand create comes in
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"}
    )
    # then 503 upstreamBusy, with when to come back
    assert_error(response, 503, "upstreamBusy")
    assert response.json() == BUSY
    assert response["Retry-After"] == "30"
    # and nothing was written, nothing sent upstream
    assert db_counts_but_ended_sync_jobs() == EMPTY
    assert calls(sim) == []


def test_a_permit_refused_after_the_project_was_made_leaves_nothing_behind(
    sw_writer, sim, own_bucket
):
    # given upstream will answer the publish 429 with Retry-After 2 s (longer than the request
    # may still wait), after the workspace and the market's project were made
    sim.configure({"settleSeconds": 0, "retryAfterSeconds": 2})
    sim.add_fault({"method": "POST", "pathRegex": r"/publish$", "status": 429})
    # when a sync brand create with a market comes in
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://a.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    # then 503 upstreamBusy with Retry-After
    assert_error(response, 503, "upstreamBusy")
    assert response.json() == BUSY
    assert response["Retry-After"] == "2"
    # and the publish was sent once (not retried past the request's patience)
    publishes = [c for c in calls_with_status(sim) if c[1].endswith("/publish")]
    assert [status for _, _, status in publishes] == [429]
    # and the request undid what it made: the project deleted, the workspace left empty (an
    # empty workspace is no orphan), the brand row gone with its attempt and market
    state = sim.state()
    assert state["projects"] == []
    assert len(state["workspaces"]) == 1
    assert db_counts_but_ended_sync_jobs() == EMPTY


def test_within_the_wait_a_sync_request_waits_and_succeeds(sw_writer, sim, own_bucket, settings):
    # given the org's credential paused for a moment shorter than the sync wait
    settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 5.0
    quota.store().pause(own_bucket, rate=10, burst=20, seconds=0.3)
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"}
    )
    # then
    assert response.status_code == 201, response.json()
