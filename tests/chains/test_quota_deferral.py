"""A chained step that cannot get an upstream permit soon enough is re-scheduled, not failed
(SPEC §10.6): a later `runAfter` and a countdown message for then, no worker slot held,
nothing sent upstream, the retry budget and the chain untouched; when it runs again it resumes.

The steps run in-process (the Celery tasks called as functions), publishing recorded; the
buckets are the test run's Redis, as in a worker."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from provisioning import quota, tasks
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.semrush import SemrushBusyError
from provisioning.upstream import client_for_org
from serenity.models import Market, MarketStatus
from tests.chains.helpers import serenity_path, start_async_brand_with_market
from tests.support import calls_since, create_project, languages, list_projects, mark

pytestmark = pytest.mark.django_db(transaction=True)


def pause_credential(token: str, seconds: float) -> None:
    """What a 429 with Retry-After does: every permit of the credential waits until then."""
    quota.store().pause(
        quota.credential_key(token),
        rate=settings.SEMRUSH_RATE_LIMIT_PER_SECOND,
        burst=settings.SEMRUSH_RATE_LIMIT_BURST,
        seconds=seconds,
    )


def end_pause(token: str) -> None:
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(quota.credential_key(token))


def make_due(job_id: str) -> None:
    AsyncJob.objects.filter(pk=job_id).update(run_after=timezone.now() - timedelta(seconds=1))


def job_state(job_id: str) -> dict[str, object]:
    job = AsyncJob.objects.get(pk=job_id)
    return {
        "status": job.status,
        "claimed": job.claim_token is not None,
        "published": job.published_at is not None,
        "run_count": job.run_count,
        "error": job.error,
        "result": job.result,
    }


def test_a_step_without_a_permit_within_a_second_is_rescheduled_not_failed(
    sw_writer, sim, published
):
    # given an async brand create, and the org's credential paused by upstream for 30 s
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    root_id = accepted["jobId"]
    pause_credential(sim.org_token, 30)
    start = mark(sim)
    before = timezone.now()
    # when its first step is delivered
    tasks.provision_workspace(root_id)
    # then it left the worker at once: released, due again at its place (about 30 s later),
    # with a countdown message for then, neither failed nor finished
    assert job_state(root_id) == {
        "status": JobStatus.IN_PROGRESS,
        "claimed": False,
        "published": False,  # the recorder stands in for the broker: nothing marks the row
        "run_count": 1,
        "error": None,
        "result": None,
    }
    assert published == [root_id, root_id]
    run_after = AsyncJob.objects.get(pk=root_id).run_after
    assert run_after is not None and run_after >= before + timedelta(seconds=29)
    # and nothing was sent upstream (no retry spent), the attempt is still pending
    assert calls_since(sim, start) == []
    attempt = ProvisioningAttempt.objects.get()
    assert attempt.status == AttemptStatus.PENDING and attempt.error is None
    # and a client polling sees the chain in progress
    polled = sw_writer.get(serenity_path(sw_writer, accepted["id"]) + f"/jobs/{root_id}").json()
    assert polled["status"] == "IN_PROGRESS" and polled["error"] is None

    # when the pause is over and its message is delivered
    end_pause(sim.org_token)
    make_due(root_id)
    tasks.provision_workspace(root_id)
    # then the chain completes as if nothing had happened
    polled = sw_writer.get(serenity_path(sw_writer, accepted["id"]) + f"/jobs/{root_id}").json()
    assert polled["status"] == "COMPLETED", polled
    assert polled["result"]["status"] == 201
    assert len(sim.state()["projects"]) == 1


def test_a_step_whose_permit_is_not_due_soon_gives_its_worker_slot_back_at_once(
    sw_writer, sim, published
):
    # given an async brand create, and its org's credential with its burst spent and 7 more
    # permits reserved: its next permit is due in about 0.8 s (not a pause, just a busy bucket)
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    root_id = accepted["jobId"]
    key = quota.credential_key(sim.org_token)
    limits = quota.limits_for(rate=None, burst=None)
    for _ in range(limits.burst + 7):
        assert quota.store().reserve(key, rate=limits.rate, burst=limits.burst, max_wait=60).granted
    start = mark(sim)
    before = timezone.now()
    # when its first step is delivered
    tasks.provision_workspace(root_id)
    # then it did not sleep in the worker for that permit: it was released at once, due again
    # at its place, nothing sent upstream, the attempt untouched
    state = job_state(root_id)
    assert (state["status"], state["claimed"], state["run_count"]) == (
        JobStatus.IN_PROGRESS,
        False,
        1,
    )
    assert published == [root_id, root_id]
    run_after = AsyncJob.objects.get(pk=root_id).run_after
    assert run_after is not None and run_after > before
    assert calls_since(sim, start) == []
    assert ProvisioningAttempt.objects.get().status == AttemptStatus.PENDING
    end_pause(sim.org_token)


def test_a_permit_refused_between_the_workspace_and_the_project_resumes_later(
    sw_writer, sim, published, chained_job_delivered_separately
):
    # given the workspace created and promoted by the first step
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    root_id = accepted["jobId"]
    tasks.provision_workspace(root_id)
    chained = AsyncJob.objects.get(root_id=root_id, step="createMarket")
    assert ProvisioningAttempt.objects.get().workspace_promoted is True
    # when the credential is paused, then the market step is delivered
    pause_credential(sim.org_token, 30)
    start = mark(sim)
    tasks.create_market(str(chained.id))
    # then the step is re-scheduled: the reservation kept, no project made, nothing failed
    assert job_state(str(chained.id))["status"] == JobStatus.IN_PROGRESS
    assert job_state(str(chained.id))["claimed"] is False
    assert calls_since(sim, start) == []
    market = Market.objects.get()
    assert market.status == MarketStatus.CREATING and market.semrush_project_id is None
    assert ProvisioningAttempt.objects.get().status == AttemptStatus.PENDING
    # when it runs again once due
    end_pause(sim.org_token)
    make_due(str(chained.id))
    again = mark(sim)
    tasks.create_market(str(chained.id))
    # then it does not look for a project first (a re-schedule leaves none unrecorded: only a
    # lost worker's re-run must look, SPEC §11.1's fewer calls)
    workspace_id = ProvisioningAttempt.objects.get().candidate_workspace_id
    made = [c for c in calls_since(sim, again) if c != languages()]
    assert made[0] == create_project(workspace_id)
    assert list_projects(workspace_id) not in made
    # and the market is created once, and the chain answers as the sync path would
    polled = sw_writer.get(serenity_path(sw_writer, accepted["id"]) + f"/jobs/{root_id}").json()
    assert polled["status"] == "COMPLETED" and polled["result"]["status"] == 201, polled
    assert len(sim.state()["projects"]) == 1
    assert Market.objects.get().status == MarketStatus.LIVE
    assert ProvisioningAttempt.objects.get().status == AttemptStatus.READY


def deactivated_before_the_project_create(caller, sim, brand_id: str):  # type: ignore[no-untyped-def]
    """While active: the step's next project create lands just after a deactivate of the brand
    (which empties the workspace and tombstones the reservation), and the credential is then
    paused by upstream for 30 s (the soak's race)."""
    from provisioning import markets

    real_create = markets._project_create

    def deactivated_first(**kwargs):  # type: ignore[no-untyped-def]
        deactivated = caller.post(serenity_path(caller, brand_id) + "/deactivate")
        assert deactivated.status_code == 200, deactivated.json()
        made = real_create(**kwargs)
        pause_credential(sim.org_token, 30)
        return made

    return mock.patch.object(markets, "_project_create", side_effect=deactivated_first)


def test_a_project_made_after_a_deactivate_is_deleted_even_when_its_clean_up_waits_for_quota(
    sw_writer, sim, published, chained_job_delivered_separately
):
    # given a promoted chain whose market step creates its project just after a deactivate
    # emptied the workspace and tombstoned the reservation (the soak's race), and the
    # credential then paused by upstream for 30 s
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    tasks.provision_workspace(accepted["jobId"])
    chained = AsyncJob.objects.get(root_id=accepted["jobId"], step="createMarket")
    workspace_id = ProvisioningAttempt.objects.get().candidate_workspace_id
    with deactivated_before_the_project_create(sw_writer, sim, accepted["id"]):
        tasks.create_market(str(chained.id))
    # (the step could not record its project, and its next call waits for the quota)
    assert len(sim.state()["projects"]) == 1
    assert job_state(str(chained.id))["status"] == JobStatus.IN_PROGRESS
    # when it runs again while the credential is still paused
    make_due(str(chained.id))
    start = mark(sim)
    tasks.create_market(str(chained.id))
    # then it does not end before its clean-up: re-scheduled again, nothing sent
    state = job_state(str(chained.id))
    assert (state["status"], state["claimed"]) == (JobStatus.IN_PROGRESS, False)
    assert calls_since(sim, start) == []
    assert len(sim.state()["projects"]) == 1
    # and once the pause is over it deletes the project nobody recorded, then ends
    end_pause(sim.org_token)
    make_due(str(chained.id))
    start = mark(sim)
    tasks.create_market(str(chained.id))
    assert not sim.state()["projects"], sim.state()["projects"]
    assert calls_since(sim, start)[0] == list_projects(workspace_id)
    assert [c[0] for c in calls_since(sim, start)] == ["GET", "DELETE"]
    assert job_state(str(chained.id))["status"] == JobStatus.CANCELLED
    assert not Market.objects.filter(deleted_at__isnull=True).exists()


def test_a_429_pauses_the_credential_for_everyone_and_the_step_resumes(
    sw_writer, sim, published, chained_job_delivered_separately, settings
):
    # given the workspace promoted, and upstream about to answer the project create 429 with
    # Retry-After 10 s (longer than a started step waits for a permit)
    sim.configure({"settleSeconds": 0, "retryAfterSeconds": 10})
    accepted = start_async_brand_with_market(sw_writer)
    root_id = accepted["jobId"]
    tasks.provision_workspace(root_id)
    chained = AsyncJob.objects.get(root_id=root_id, step="createMarket")
    workspace_id = ProvisioningAttempt.objects.get().candidate_workspace_id
    sim.add_fault({"method": "POST", "pathRegex": r"/projects$", "status": 429})
    start = mark(sim)
    before = timezone.now()
    # when the market step runs
    tasks.create_market(str(chained.id))
    # then the 429 was sent once and not retried in the worker: the step is re-scheduled
    # for when the pause ends, in the middle of its work (the reservation kept for the re-run)
    assert calls_since(sim, start)[-1] == create_project(workspace_id)
    assert [c for c in calls_since(sim, start) if c == create_project(workspace_id)] == [
        create_project(workspace_id)
    ]
    state = job_state(str(chained.id))
    assert state["status"] == JobStatus.IN_PROGRESS and state["claimed"] is False
    assert state["error"] is None
    run_after = AsyncJob.objects.get(pk=chained.id).run_after
    assert run_after is not None and run_after >= before + timedelta(seconds=9)
    assert Market.objects.get().status == MarketStatus.CREATING
    # and every other caller of that credential is held too, without sending anything
    settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 0.2
    other = mark(sim)
    with pytest.raises(SemrushBusyError) as raised:
        client_for_org(sw_writer.org).list_family(parent_id=sim.parent_id)
    # (told to come back about when the pause ends: its place in the queue, whole seconds)
    assert raised.value.retry_after is not None and 9 <= raised.value.retry_after <= 12
    assert calls_since(sim, other) == []
    # when the pause is over and the step runs again
    end_pause(sim.org_token)
    make_due(str(chained.id))
    tasks.create_market(str(chained.id))
    # then it resumes and completes with one project
    polled = sw_writer.get(serenity_path(sw_writer, accepted["id"]) + f"/jobs/{root_id}").json()
    assert polled["status"] == "COMPLETED" and polled["result"]["status"] == 201, polled
    assert len(sim.state()["projects"]) == 1


def two_market_activation(caller, sim) -> tuple[str, str, AsyncJob]:  # type: ignore[no-untyped-def]
    """A brand with its workspace, and an async activate of two markets (US, then DE) whose
    workspace step has run: (brand id, root job id, the chained activate-markets job)."""
    sim.configure({"settleSeconds": 0})
    created = caller.post(
        f"/v2/orgs/{caller.org.id}/brands", {"name": "Acme", "baseUrl": "https://a.example"}
    )
    assert created.status_code == 201, created.json()
    brand_id = created.json()["id"]
    accepted = caller.post(
        serenity_path(caller, brand_id) + "/activate",
        {
            "async": True,
            "brandDomain": "a.example",
            "markets": [
                {"market": "US", "languageCode": "en"},
                {"market": "DE", "languageCode": "de"},
            ],
        },
    )
    assert accepted.status_code == 202, accepted.json()
    root_id = accepted.json()["jobId"]
    tasks.provision_workspace(root_id)
    return brand_id, root_id, AsyncJob.objects.get(root_id=root_id, step="activateMarkets")


def test_an_activate_step_that_stands_down_deletes_the_project_it_could_not_record(
    sw_writer, sim, published, chained_job_delivered_separately
):
    # given an async activate of two markets whose first project is made just after a
    # deactivate emptied the workspace, and the credential then paused by upstream
    brand_id, root_id, chained = two_market_activation(sw_writer, sim)
    workspace_id = ProvisioningAttempt.objects.get(job_id=root_id).candidate_workspace_id
    with deactivated_before_the_project_create(sw_writer, sim, brand_id):
        tasks.activate_markets(str(chained.id))
    assert len(sim.state()["projects"]) == 1
    assert job_state(str(chained.id))["status"] == JobStatus.IN_PROGRESS
    # when it runs again after the pause
    end_pause(sim.org_token)
    make_due(str(chained.id))
    start = mark(sim)
    tasks.activate_markets(str(chained.id))
    # then it stands down having deleted that project (one listing for both markets)
    assert not sim.state()["projects"], sim.state()["projects"]
    assert [c[0] for c in calls_since(sim, start)] == ["GET", "DELETE"]
    assert calls_since(sim, start)[0] == list_projects(workspace_id)
    assert job_state(str(chained.id))["status"] == JobStatus.CANCELLED


def test_an_activate_step_deferred_after_reserving_its_markets_resumes_them(
    sw_writer, sim, published, chained_job_delivered_separately
):
    # given a brand with its workspace, and an async activate of two markets, promoted
    brand_id, root_id, chained = two_market_activation(sw_writer, sim)
    # when the first market's project is made, then upstream pauses the credential (a 429
    # on the tracked URL with Retry-After 10 s) and the step is re-scheduled mid-way
    sim.configure({"retryAfterSeconds": 10})
    sim.add_fault({"method": "PATCH", "pathRegex": r"/projects/[^/]+$", "status": 429})
    tasks.activate_markets(str(chained.id))
    assert job_state(str(chained.id))["status"] == JobStatus.IN_PROGRESS
    assert [m.status for m in Market.objects.order_by("geo_target_id")] == [MarketStatus.CREATING]
    # and when it runs again after the pause
    end_pause(sim.org_token)
    make_due(str(chained.id))
    tasks.activate_markets(str(chained.id))
    # then both markets are live, each with one project, and the chain answers 200
    polled = sw_writer.get(serenity_path(sw_writer, brand_id) + f"/jobs/{root_id}").json()
    assert polled["status"] == "COMPLETED", polled
    assert polled["result"]["status"] == 200, polled["result"]
    assert [m["status"] for m in polled["result"]["body"]["markets"]] == [201, 201]
    assert sorted(m.status for m in Market.objects.all()) == [MarketStatus.LIVE] * 2
    assert len(sim.state()["projects"]) == 2


def test_an_activate_step_deferred_after_publishing_a_market_does_not_publish_it_again(
    sw_writer, sim, published, chained_job_delivered_separately
):
    # given an async activate of two markets, promoted
    brand_id, root_id, chained = two_market_activation(sw_writer, sim)
    # when the first market's project is made and published, then upstream answers the second
    # market's project create 429 with Retry-After 10 s: the step is re-scheduled mid-way
    sim.configure({"retryAfterSeconds": 10})
    sim.add_fault({"method": "POST", "pathRegex": r"/projects$"})  # the first create passes
    sim.add_fault({"method": "POST", "pathRegex": r"/projects$", "status": 429})
    tasks.activate_markets(str(chained.id))
    assert job_state(str(chained.id))["status"] == JobStatus.IN_PROGRESS
    [first] = sim.state()["projects"]
    assert first["publishStatus"] == "live"
    # (the market rows wait for the step's ending, SPEC §11.5; the first one records that its
    # project was published, SPEC §12.1)
    assert sorted(m.status for m in Market.objects.all()) == [
        MarketStatus.CREATING,
        MarketStatus.PUBLISHING,
    ]
    # and when it runs again after the pause
    end_pause(sim.org_token)
    make_due(str(chained.id))
    again = mark(sim)
    tasks.activate_markets(str(chained.id))
    # then the first market's project is not published again, only read to confirm it (the
    # step recorded it `publishing`)
    assert [c[0] for c in calls_since(sim, again) if first["id"] in c[1]] == ["GET"]
    # and both markets are live, each with one project, and the chain answers 200
    polled = sw_writer.get(serenity_path(sw_writer, brand_id) + f"/jobs/{root_id}").json()
    assert polled["status"] == "COMPLETED", polled
    assert polled["result"]["status"] == 200, polled["result"]
    assert [m["status"] for m in polled["result"]["body"]["markets"]] == [201, 201]
    assert polled["result"]["body"]["markets"][0]["body"]["projectId"] == first["id"]
    assert sorted(m.status for m in Market.objects.all()) == [MarketStatus.LIVE] * 2
    assert len(sim.state()["projects"]) == 2
