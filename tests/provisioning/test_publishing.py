"""Publishing confirmed (SPEC §12.1), in a sync request and in the functions the chains use:
against the simulator over HTTP, with its asynchronous publishing (`publishSeconds`,
`publishOutcome`)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import AsyncJob
from provisioning import quota
from provisioning.market_writes import CONFIRM_JOB_TYPE, CONFIRM_STEP
from provisioning.markets import market_publish_confirm
from provisioning.publishing import (
    Live,
    Unconfirmed,
    _interval,
    publish_confirm,
    publish_seconds_learned,
)
from provisioning.selectors import learning_forget
from provisioning.upstream import client_for_org
from serenity.models import Market
from tests.chains.helpers import create_brand, serenity_path
from tests.support import (
    calls,
    create_project,
    publish,
    read_project,
    wait_until_settled,
)

pytestmark = pytest.mark.django_db(transaction=True)

US_EN = {"market": "US", "languageCode": "en"}


def _ready_brand(caller, sim, name: str = "Acme") -> dict:  # type: ignore[no-untyped-def]
    brand = create_brand(caller, name)
    wait_until_settled(sim, brand["semrushSubWorkspaceId"])
    return brand


def _market(brand: dict) -> Market:
    return Market.objects.get(brand_id=brand["id"], deleted_at__isnull=True)


def test_a_publish_that_fails_upstream_leaves_the_market_publish_failed(sw_writer, sim):
    # given a ready brand, and Semrush failing every publish
    brand = _ready_brand(sw_writer, sim)
    sim.configure({"publishOutcome": "failed"})
    path = f"{serenity_path(sw_writer, brand['id'])}/markets"
    # when the market is created synchronously
    response = sw_writer.post(path, US_EN)
    # then the answer says the publish failed, and the market is never `live`
    assert response.status_code == 502
    assert response.json() == {
        "error": "publishFailed",
        "message": "Semrush could not publish the market's project; create the market again.",
    }
    market = _market(brand)
    assert market.status == "publish_failed"
    assert market.reserved_by is None
    assert market.publish_error == {
        "code": "publishFailed",
        "message": "Semrush could not publish the market's project; create the market again.",
        "reason": "simulated publish failure",
    }
    read = sw_writer.get(f"{path}/2840/en").json()
    assert read["status"] == "publish_failed"
    assert read["publishError"] == {
        "code": "publishFailed",
        "message": "Semrush could not publish the market's project; create the market again.",
    }
    # Semrush's own reason is kept for operators only
    assert "simulated" not in str(read)


def test_a_later_create_of_the_slice_resumes_a_failed_publish(sw_writer, sim):
    # given a market whose publish failed upstream
    brand = _ready_brand(sw_writer, sim)
    sim.configure({"publishOutcome": "failed"})
    path = f"{serenity_path(sw_writer, brand['id'])}/markets"
    assert sw_writer.post(path, US_EN).status_code == 502
    project_id = _market(brand).semrush_project_id
    ws = brand["semrushSubWorkspaceId"]
    sim.configure({"publishOutcome": "live"})
    before = len(calls(sim))
    # when the slice is created again
    response = sw_writer.post(path, US_EN)
    # then the same project is published again (no second project) and confirmed live
    assert response.status_code == 201, response.json()
    assert response.json()["projectId"] == project_id
    assert response.json()["published"] is True
    made = calls(sim)[before:]
    assert create_project(ws) not in made
    assert made[-2:] == [publish(ws, project_id), read_project(ws, project_id)]
    market = _market(brand)
    assert (market.status, market.publish_error) == ("live", None)
    assert [p["id"] for p in sim.state()["projects"]] == [project_id]


def test_a_slow_publish_answers_published_false_and_hands_over_to_a_job(
    sw_writer, sim, settings, django_capture_on_commit_callbacks
):
    # given a publish that takes longer than a sync request waits
    settings.SERENITY_PUBLISH_SYNC_WAIT_SECONDS = 0.5
    brand = _ready_brand(sw_writer, sim)
    sim.configure({"publishSeconds": 30})
    path = f"{serenity_path(sw_writer, brand['id'])}/markets"
    # when the market is created synchronously
    with django_capture_on_commit_callbacks():
        response = sw_writer.post(path, US_EN)
    # then the answer is honest, the market `publishing`, and a confirmation job owns it
    assert response.status_code == 201, response.json()
    assert response.json()["published"] is False
    market = _market(brand)
    assert market.status == "publishing"
    job = AsyncJob.objects.get(pk=market.reserved_by)
    assert (job.job_type, job.step, job.status) == (CONFIRM_JOB_TYPE, CONFIRM_STEP, "IN_PROGRESS")
    assert job.brand_id is None  # not one of the brand's jobs: the client never asked for it
    assert job.metadata["marketId"] == str(market.pk)
    # the brand is not leased by it: another market can be created meanwhile
    assert sw_writer.post(path, {"market": "DE", "languageCode": "de"}).status_code == 201
    # and the slice is not resumable while its confirmation runs
    again = sw_writer.post(path, US_EN)
    assert (again.status_code, again.json()["error"]) == (409, "sliceExists")


def test_a_sync_request_reads_at_most_three_times(sw_writer, sim, settings):
    # given a publish slower than three reads
    settings.SERENITY_PUBLISH_BACKOFF_SECONDS = 0.05
    brand = _ready_brand(sw_writer, sim)
    sim.configure({"publishSeconds": 30})
    ws = brand["semrushSubWorkspaceId"]
    # when
    response = sw_writer.post(f"{serenity_path(sw_writer, brand['id'])}/markets", US_EN)
    # then exactly three reads follow the publish
    assert response.json()["published"] is False
    pid = response.json()["projectId"]
    made = calls(sim)
    after_publish = made[made.index(publish(ws, pid)) + 1 :]
    assert after_publish == [read_project(ws, pid)] * 3


def _publishing_market(sw_writer, sim, settings) -> Market:  # type: ignore[no-untyped-def]
    settings.SERENITY_PUBLISH_SYNC_WAIT_SECONDS = 0
    # The rate out of the way: the confirmation's reads come within a second of the market's
    # own calls, and the limiter grants no more than the rate within a second.
    settings.SEMRUSH_RATE_LIMIT_PER_SECOND = 1000
    brand = _ready_brand(sw_writer, sim)
    response = sw_writer.post(f"{serenity_path(sw_writer, brand['id'])}/markets", US_EN)
    assert response.json()["published"] is False
    return Market.objects.select_related("brand__organization").get(
        brand_id=brand["id"], deleted_at__isnull=True
    )


def test_the_background_confirmation_reads_again_later_then_goes_live(sw_writer, sim, settings):
    # given a market handed to its confirmation job, Semrush publishing for a second
    sim.configure({"publishSeconds": 1})
    market = _publishing_market(sw_writer, sim, settings)
    client = client_for_org(market.brand.organization)
    # when the confirmation runs (as a step) before Semrush has published
    with quota.step_permits():
        early = market_publish_confirm(
            client=client, market=market, owner=market.reserved_by, owned_workspace=True
        )
    # then it reads again later, writing nothing
    assert early.market_writes == ()
    assert early.confirm_in == settings.SERENITY_PUBLISH_BACKOFF_SECONDS
    # when it runs again once Semrush has published
    time.sleep(1.1)
    with quota.step_permits():
        done = market_publish_confirm(
            client=client, market=market, owner=market.reserved_by, owned_workspace=True
        )
    # then it answers the create's answer, `published`, with the `live` write
    assert done.confirm_in is None
    assert done.status == 201
    assert done.body["published"] is True
    [write] = done.market_writes
    assert (write.end.value, write.live_status, write.owner) == ("live", "live", market.reserved_by)
    # (the sample: how long Semrush took by its `published_at`, not the read's later age)
    assert 0.9 <= write.publish_seconds < 1.1


def test_a_publish_still_running_at_the_timeout_fails_as_publish_timeout(sw_writer, sim, settings):
    # given a publish that never ends, started longer ago than the publish timeout
    sim.configure({"publishSeconds": 3600})
    market = _publishing_market(sw_writer, sim, settings)
    settings.SERENITY_PUBLISH_TIMEOUT_SECONDS = 60
    market.publish_started_at = timezone.now() - timedelta(seconds=61)
    # when the confirmation reads it
    with quota.step_permits():
        outcome = market_publish_confirm(
            client=client_for_org(market.brand.organization),
            market=market,
            owner=market.reserved_by,
            owned_workspace=True,
        )
    # then the market is to end publish_failed with publishTimeout, the job FAILED
    assert outcome.status == 504
    assert outcome.body["error"] == "publishTimeout"
    assert outcome.job_failure is not None and outcome.job_failure.code == "publishTimeout"
    [write] = outcome.market_writes
    assert write.end.value == "publishFailed"
    assert write.publish_error == {
        "code": "publishTimeout",
        "message": "Semrush did not publish the market's project in time; create it again.",
    }


def test_the_first_read_waits_the_learned_publish_time(sw_writer, sim, settings):
    # given a parent whose publishes took 4 s (the learned median), and a fresh publish
    sim.configure({"publishSeconds": 30})
    market = _publishing_market(sw_writer, sim, settings)
    brand = market.brand
    for seconds in (3.0, 4.0, 5.0):
        Market.objects.create(
            brand=brand,
            geo_target_id=2276 + int(seconds),
            language_code="de",
            name="x",
            status="live",
            publish_seconds=seconds,
            publish_started_at=timezone.now(),
        )
    assert publish_seconds_learned(parent_id=sim.parent_id) is None  # cached: no history
    learning_forget()
    assert publish_seconds_learned(parent_id=sim.parent_id) == 4.0
    before = len(calls(sim))
    # when a step confirms a publish that began just now
    with quota.step_permits():
        confirmation = publish_confirm(
            client=client_for_org(brand.organization),
            workspace_id=str(market.workspace_id),
            project_id=str(market.semrush_project_id),
            owned=True,
            started_at=timezone.now(),
            parent_id=sim.parent_id,
        )
    # then it makes no read yet: it comes back when the publish is expected to be done
    assert isinstance(confirmation, Unconfirmed)
    assert 3.9 < confirmation.retry_in <= 4.0
    assert calls(sim)[before:] == []


def test_a_sync_confirmation_sleeps_until_the_learned_time_then_reads(sw_writer, sim, settings):
    # given a learned time of 1 s and a project that is live
    brand = _ready_brand(sw_writer, sim)
    assert sw_writer.post(f"{serenity_path(sw_writer, brand['id'])}/markets", US_EN).json()[
        "published"
    ]
    market = _market(brand)
    slept: list[float] = []
    Market.objects.filter(pk=market.pk).update(publish_seconds=1.0)
    learning_forget()
    # when a sync caller confirms a publish that began just now
    confirmation = publish_confirm(
        client=client_for_org(sw_writer.org),
        workspace_id=str(market.workspace_id),
        project_id=str(market.semrush_project_id),
        owned=True,
        started_at=timezone.now(),
        parent_id=sim.parent_id,
        sleep=slept.append,
    )
    # then it slept about the learned time once, and one read found it live
    assert isinstance(confirmation, Live)
    assert confirmation.status == "live"
    assert len(slept) == 1 and 0.9 < slept[0] <= 1.0


def test_a_read_held_back_samples_how_long_semrush_took_not_how_late_it_was(
    sw_writer, sim, settings
):
    # given a market whose publish Semrush finishes in 0.3 s
    sim.configure({"publishSeconds": 0.3})
    market = _publishing_market(sw_writer, sim, settings)
    assert market.publish_started_at is not None
    # when its confirmation reads 1.5 s after Semrush had published (held back by the quota)
    time.sleep(1.8)
    with quota.step_permits():
        confirmation = publish_confirm(
            client=client_for_org(market.brand.organization),
            workspace_id=str(market.workspace_id),
            project_id=str(market.semrush_project_id),
            owned=True,
            started_at=market.publish_started_at,
            parent_id=sim.parent_id,
        )
    # then the sample is the project's `published_at` less the publish's start, not the read's
    # age: a learned time grown by the quota's delays would hold every later first read back
    assert isinstance(confirmation, Live)
    assert 0.2 <= confirmation.seconds < 1.0


def test_failed_reads_count_as_still_publishing(sw_writer, sim, settings):
    # given a publishing market whose project reads answer 503
    sim.configure({"publishSeconds": 30})
    market = _publishing_market(sw_writer, sim, settings)
    sim.add_fault({"method": "GET", "pathRegex": r"/projects/[^/]+$", "status": 503, "times": 10})
    # when a step confirms it
    with quota.step_permits():
        confirmation = publish_confirm(
            client=client_for_org(market.brand.organization),
            workspace_id=str(market.workspace_id),
            project_id=str(market.semrush_project_id),
            owned=True,
            started_at=timezone.now(),
            parent_id=sim.parent_id,
        )
    # then it will read again, it does not fail the market
    assert confirmation == Unconfirmed(retry_in=settings.SERENITY_PUBLISH_BACKOFF_SECONDS)


def test_reads_back_off_as_long_as_the_publish_has_run(settings):
    settings.SERENITY_PUBLISH_BACKOFF_SECONDS = 2.0
    assert [_interval(e) for e in (0.1, 2.0, 4.5, 8.0, 300.0)] == [2.0, 2.0, 4.5, 8.0, 60.0]


def test_a_publish_failure_in_activate_c_is_that_markets_entry(sw_writer, sim):
    # given an active brand with a workspace, and Semrush failing every publish
    brand = _ready_brand(sw_writer, sim)
    sim.configure({"publishOutcome": "failed"})
    # when branch C activates two markets
    response = sw_writer.post(
        f"{serenity_path(sw_writer, brand['id'])}/activate",
        {"brandDomain": "acme.example", "markets": [US_EN, {"market": "DE", "languageCode": "de"}]},
    )
    # then each entry says so (502 publishFailed), the answer is 207, nothing is live
    assert response.status_code == 207, response.json()
    failed = {
        "status": 502,
        "body": {
            "error": "publishFailed",
            "message": "Semrush could not publish the market's project; create the market again.",
        },
    }
    assert response.json()["markets"] == [
        {"market": "US", "languageCode": "en", **failed},
        {"market": "DE", "languageCode": "de", **failed},
    ]
    statuses = set(
        Market.objects.filter(brand_id=brand["id"]).values_list("status", flat=True).distinct()
    )
    assert statuses == {"publish_failed"}
    assert not AsyncJob.objects.filter(job_type=CONFIRM_JOB_TYPE).exists()
