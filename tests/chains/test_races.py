"""Races of the provisioning chain (issue 4, acceptance 2), each with a forced interleaving.

Most tests drive the chain's steps in-process (calling the Celery tasks as functions, with
publishing recorded instead of sent) so that the interleaving is exact; threads, barriers and
simulator delays force the rest.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import AsyncJob
from provisioning import tasks
from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market
from tests.chains.helpers import (
    brands_path,
    create_brand,
    serenity_path,
    start_async_brand_with_market,
)
from tests.conftest import make_caller
from tests.factories import OrganizationFactory

pytestmark = pytest.mark.django_db(transaction=True)


def run(job_id) -> None:
    """Run a job's step in this process, as a worker would."""
    job = AsyncJob.objects.get(pk=job_id)
    task = {
        "provisionWorkspace": tasks.provision_workspace,
        "createMarket": tasks.create_market,
        "activateMarkets": tasks.activate_markets,
        "activateBrandWorkspace": tasks.activate_brand_workspace,
    }[job.step]
    task(str(job_id))


def current_step(root_id):
    return AsyncJob.objects.get(pk=root_id).current


def promoted_chain(caller, sim) -> tuple[dict, AsyncJob]:
    """An async brand create with a market run up to its promotion (workspaces settle at once):
    the 202's body and the chained create-market job, not run yet."""
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(caller)
    run(accepted["jobId"])  # promotes
    return accepted, current_step(accepted["jobId"])


def poll(caller, brand_id, job_id):
    response = caller.get(f"{serenity_path(caller, brand_id)}/jobs/{job_id}")
    assert response.status_code == 200
    return response.json()


def project_posts(sim) -> list[dict]:
    return [
        r for r in sim.requests_log() if r["method"] == "POST" and r["path"].endswith("/projects")
    ]


def in_thread(fn, *args):
    result = {}

    def target():
        try:
            result["value"] = fn(*args)
        except Exception as exc:  # pragma: no cover - surfaced by the assertion below
            result["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, result


def test_two_async_begins_on_one_brand_one_wins(sw_writer, sim, published):
    # given a ready brand and two clients
    brand = create_brand(sw_writer, "Alpha")
    path = f"{serenity_path(sw_writer, brand['id'])}/markets"
    barrier = threading.Barrier(2)
    answers = []

    def begin(market):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {sw_writer.token}")
        barrier.wait()
        answers.append(
            client.post(
                path, {"market": market, "languageCode": "en", "async": True}, format="json"
            )
        )
        connection.close()

    threads = [threading.Thread(target=begin, args=(m,)) for m in ("US", "GB")]
    # when
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # then
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [202, 409]
    winner = next(a for a in answers if a.status_code == 202).json()
    loser = next(a for a in answers if a.status_code == 409).json()
    assert loser == {
        "error": "semrush_provisioning_in_progress",
        "message": "A Semrush provisioning job is already in progress for this brand.",
        "details": {"jobId": winner["jobId"]},
    }
    assert ProvisioningAttempt.objects.filter(brand_id=brand["id"], status="pending").count() == 1
    assert Market.objects.filter(brand_id=brand["id"]).count() == 1


def test_sync_request_meets_live_async_attempt(sw_writer, sim, published):
    brand = create_brand(sw_writer, "Alpha")
    path = f"{serenity_path(sw_writer, brand['id'])}/markets"
    accepted = sw_writer.post(path, {"market": "US", "languageCode": "en", "async": True}).json()
    calls = len(sim.requests_log())
    # when a sync request arrives while the chain is pending
    response = sw_writer.post(path, {"market": "GB", "languageCode": "en"})
    # then
    assert response.status_code == 409
    assert response.json()["error"] == "semrush_provisioning_in_progress"
    assert response.json()["details"] == {"jobId": accepted["jobId"]}
    assert len(sim.requests_log()) == calls


def test_stale_attempt_is_reconciled_at_the_next_begin(sw_writer, sim, published, settings):
    brand = create_brand(sw_writer, "Alpha")
    path = f"{serenity_path(sw_writer, brand['id'])}/markets"
    first = sw_writer.post(path, {"market": "US", "languageCode": "en", "async": True}).json()
    # given the chain was abandoned: no job of it will run again (SPEC §11.1: staleness is
    # liveness; a chain with a runnable job is alive however old)
    AsyncJob.objects.filter(pk=first["jobId"]).update(run_after=None)
    # when
    second = sw_writer.post(path, {"market": "GB", "languageCode": "en", "async": True})
    # then
    assert second.status_code == 202, second.json()
    old = ProvisioningAttempt.objects.get(job_id=first["jobId"])
    assert (old.status, old.reason) == ("failed", "stale")
    polled = poll(sw_writer, brand["id"], first["jobId"])
    assert polled["status"] == "FAILED"
    assert polled["error"] == {
        "code": "provisioningStale",
        "message": "Provisioning was abandoned and has been reconciled.",
        "retryable": True,
    }


def test_deactivate_between_status_read_and_promote(sw_writer, sim, published):
    # given an async bare create whose status read is slow upstream
    accepted = sw_writer.post(
        brands_path(sw_writer), {"name": "Alpha", "baseUrl": "https://a.example", "async": True}
    ).json()
    sim.configure({"settleSeconds": 0})
    sim.add_fault({"method": "GET", "pathRegex": "/status$", "delayMs": 1500})
    thread, _ = in_thread(run, accepted["jobId"])
    while not [r for r in sim.requests_log() if r["path"].endswith("/status")]:
        time.sleep(0.02)
    # when deactivate runs while the read is in flight
    response = sw_writer.post(f"{serenity_path(sw_writer, accepted['id'])}/deactivate")
    thread.join()
    # then the worker does not promote, and its fresh candidate is left empty
    assert response.status_code == 200, response.json()
    brand = Brand.objects.get(pk=accepted["id"])
    assert brand.semrush_sub_workspace_id is None
    attempt = ProvisioningAttempt.objects.get(job_id=accepted["jobId"])
    assert (attempt.status, attempt.reason, attempt.workspace_promoted) == (
        "failed",
        "cancelled",
        False,
    )
    assert sim.state()["projects"] == []
    assert poll(sw_writer, accepted["id"], accepted["jobId"])["status"] == "CANCELLED"


def test_promote_between_deactivate_load_and_cancel_is_decommissioned(sw_writer, sim, published):
    # given an async create with a market, about to be promoted
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    from provisioning import services

    real_cancel = services.attempt_cancel

    def cancel_after_promotion_and_market(*, attempt_id):
        # the worker promotes and runs the chained job after deactivate loaded the brand
        run(accepted["jobId"])
        run(current_step(accepted["jobId"]).pk)
        return real_cancel(attempt_id=attempt_id)

    # when
    with mock.patch.object(
        services, "attempt_cancel", side_effect=cancel_after_promotion_and_market
    ):
        response = sw_writer.post(f"{serenity_path(sw_writer, accepted['id'])}/deactivate")
    # then the fresh pointer wins: the promoted workspace is emptied
    assert response.status_code == 200, response.json()
    assert Brand.objects.get(pk=accepted["id"]).semrush_sub_workspace_id is None
    assert sim.state()["projects"] == []
    assert Market.objects.filter(brand_id=accepted["id"], deleted_at__isnull=True).count() == 0


def test_deactivate_between_promote_and_chained_job(
    sw_writer, sim, published, chained_job_delivered_separately
):
    accepted, chained = promoted_chain(sw_writer, sim)
    assert chained.step == "createMarket"
    # when
    response = sw_writer.post(f"{serenity_path(sw_writer, accepted['id'])}/deactivate")
    posts_before = len(project_posts(sim))
    run(chained.pk)  # a late delivery of the chained job
    # then
    assert response.status_code == 200
    assert len(project_posts(sim)) == posts_before == 0
    polled = poll(sw_writer, accepted["id"], accepted["jobId"])
    assert polled["status"] == "CANCELLED"
    assert polled["error"]["code"] == "provisioningCancelled"


def test_deactivate_while_chained_job_creates_its_project(
    sw_writer, sim, published, chained_job_delivered_separately
):
    accepted, chained = promoted_chain(sw_writer, sim)
    sim.add_fault({"method": "POST", "pathRegex": "/projects$", "delayMs": 1000})
    thread, _ = in_thread(run, chained.pk)
    while not project_posts(sim):
        time.sleep(0.02)
    # when
    response = sw_writer.post(f"{serenity_path(sw_writer, accepted['id'])}/deactivate")
    thread.join()
    # then
    assert response.status_code == 200, response.json()
    assert sim.state()["projects"] == []
    assert Market.objects.filter(brand_id=accepted["id"], deleted_at__isnull=True).count() == 0
    assert poll(sw_writer, accepted["id"], accepted["jobId"])["status"] == "CANCELLED"


def test_duplicate_delivery_of_a_step_runs_once(sw_writer, sim, published):
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    sim.add_fault({"method": "GET", "pathRegex": "/family$", "delayMs": 300})
    barrier = threading.Barrier(2)

    def deliver():
        barrier.wait()
        run(accepted["jobId"])

    threads = [in_thread(deliver)[0] for _ in range(2)]
    for t in threads:
        t.join()
    chained = current_step(accepted["jobId"])
    threads = [in_thread(run, chained.pk)[0] for _ in range(2)]
    for t in threads:
        t.join()
    run(accepted["jobId"])  # a late redelivery of the finished first step
    state = sim.state()
    assert len(state["workspaces"]) == 1
    assert len(state["projects"]) == 1
    assert poll(sw_writer, accepted["id"], accepted["jobId"])["status"] == "COMPLETED"


def test_two_attempts_promoting_one_workspace(sim, published, db):
    # given two orgs sharing a parent, and brand A already owning workspace W with a project
    org_a = OrganizationFactory(semrush_parent_workspace_id=sim.parent_id)
    org_b = OrganizationFactory(semrush_parent_workspace_id=sim.parent_id)
    a, b = make_caller(org_a), make_caller(org_b)
    sim.configure({"settleSeconds": 0})
    created = a.post(
        brands_path(a),
        {
            "name": "Shared",
            "baseUrl": "https://s.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    ).json()
    workspace = created["semrushSubWorkspaceId"]
    accepted = b.post(
        brands_path(b), {"name": "Shared", "baseUrl": "https://s.example", "async": True}
    ).json()
    # and B's attempt adopted the same workspace before A promoted it
    ProvisioningAttempt.objects.filter(job_id=accepted["jobId"]).update(
        candidate_workspace_id=workspace, freshly_created=False
    )
    # when B's step tries to promote it
    run(accepted["jobId"])
    # then B is superseded, and A's workspace keeps its project
    attempt = ProvisioningAttempt.objects.get(job_id=accepted["jobId"])
    assert attempt.status == "failed"
    assert Brand.objects.get(pk=accepted["id"]).semrush_sub_workspace_id is None
    assert Brand.objects.get(pk=created["id"]).semrush_sub_workspace_id == workspace
    assert [p["workspaceId"] for p in sim.state()["projects"]] == [workspace]


def test_add_market_while_provisioning_failed_or_decommissioned(sw_writer, sim, published):
    accepted = sw_writer.post(
        brands_path(sw_writer), {"name": "Alpha", "baseUrl": "https://a.example", "async": True}
    ).json()
    markets = f"{serenity_path(sw_writer, accepted['id'])}/markets"
    body = {"market": "US", "languageCode": "en"}
    # while provisioning
    for async_flag in (False, True):
        response = sw_writer.post(markets, {**body, "async": async_flag})
        assert response.status_code == 409
        assert response.json()["error"] == "semrush_provisioning_in_progress"
        assert response.json()["details"] == {"jobId": accepted["jobId"]}
    # after it failed
    sim.configure({"settleOutcome": "failed", "settleSeconds": 0})
    ws = sim.state()  # nothing created yet
    assert ws["workspaces"] == []
    run(accepted["jobId"])
    for async_flag in (False, True):
        response = sw_writer.post(markets, {**body, "async": async_flag})
        assert response.status_code == 409
        assert response.json()["error"] == "semrush_provisioning_incomplete"
    # after a decommission of a healthy brand
    sim.configure({"settleOutcome": "created"})
    healthy = create_brand(sw_writer, "Beta")
    assert (
        sw_writer.post(f"{serenity_path(sw_writer, healthy['id'])}/deactivate").status_code == 200
    )
    response = sw_writer.post(f"{serenity_path(sw_writer, healthy['id'])}/markets", body)
    assert response.status_code == 409
    assert response.json()["error"] == "semrush_provisioning_incomplete"
    # never anything in the parent
    assert [p for p in sim.state()["projects"] if p["workspaceId"] == sim.parent_id] == []
    assert not [
        r for r in sim.requests_log() if sim.parent_id in r["path"] and "/projects" in r["path"]
    ]


def test_async_begin_whose_guard_read_missed_a_pending_attempt_is_409_not_500(
    sw_writer, sim, published
):
    # given a chain in flight on a ready brand
    brand = create_brand(sw_writer, "Alpha")
    path = f"{serenity_path(sw_writer, brand['id'])}/markets"
    first = sw_writer.post(path, {"market": "US", "languageCode": "en", "async": True}).json()
    # when a second begin's locked read misses it (the constraint is the last line of defence)
    from provisioning import guard

    real_read = guard.pending_attempt_for
    reads = []

    def blind_read(brand_id):
        reads.append(brand_id)
        return None if len(reads) == 1 else real_read(brand_id)

    with mock.patch.object(guard, "pending_attempt_for", side_effect=blind_read):
        response = sw_writer.post(path, {"market": "GB", "languageCode": "en", "async": True})
    # then the unique constraint answers the guard's 409, and nothing was written
    assert response.status_code == 409
    assert response.json()["error"] == "semrush_provisioning_in_progress"
    assert response.json()["details"] == {"jobId": first["jobId"]}
    assert ProvisioningAttempt.objects.filter(brand_id=brand["id"]).count() == 2  # create + chain
    assert Market.objects.filter(brand_id=brand["id"]).count() == 1


def test_a_promotion_superseded_by_a_pointer_set_meanwhile_stands_down_whole(
    sw_writer, sim, published
):
    # given an async bare create whose status read is slow upstream
    accepted = sw_writer.post(
        brands_path(sw_writer), {"name": "Alpha", "baseUrl": "https://a.example", "async": True}
    ).json()
    sim.configure({"settleSeconds": 0})
    sim.add_fault({"method": "GET", "pathRegex": "/status$", "delayMs": 800})
    thread, _ = in_thread(run, accepted["jobId"])
    while not [r for r in sim.requests_log() if r["path"].endswith("/status")]:
        time.sleep(0.02)
    # when the brand gets another workspace meanwhile (a writer outside this chain)
    Brand.objects.filter(pk=accepted["id"]).update(semrush_sub_workspace_id="elsewhere")
    thread.join()
    # then the promotion stands down whole: not promoted, chain failed, fresh candidate emptied
    assert Brand.objects.get(pk=accepted["id"]).semrush_sub_workspace_id == "elsewhere"
    attempt = ProvisioningAttempt.objects.get(job_id=accepted["jobId"])
    assert (attempt.status, attempt.workspace_promoted, attempt.freshly_created) == (
        "failed",
        False,
        True,
    )
    assert attempt.cleanup_done is True
    assert poll(sw_writer, accepted["id"], accepted["jobId"])["status"] == "FAILED"


def test_a_project_made_by_a_step_that_died_unrecorded_is_deleted_when_it_runs_again(
    sw_writer, sim, published, chained_job_delivered_separately, settings
):
    # given a promoted chain whose create-market step is claimed by a worker that then dies
    from jobs.services import job_claim
    from provisioning.semrush import semrush_client_for

    accepted, chained = promoted_chain(sw_writer, sim)
    assert job_claim(job_id=chained.pk) is not None
    workspace = Brand.objects.get(pk=accepted["id"]).semrush_sub_workspace_id
    # and a deactivate empties the workspace before the dead worker's project create lands
    response = sw_writer.post(f"{serenity_path(sw_writer, accepted['id'])}/deactivate")
    assert response.status_code == 200, response.json()
    client = semrush_client_for()
    from provisioning.catalogue import catalogue_language_id

    english = catalogue_language_id(client.list_languages(), "en")
    assert english is not None
    client.create_project(
        workspace_id=workspace,
        name="United States",
        location_id=2840,
        language=english,
        brand_names=["Alpha"],
        brand_domain="a.example",
    )
    assert len(sim.state()["projects"]) == 1
    # when its lease runs out and the step is delivered again
    AsyncJob.objects.filter(pk=chained.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    run(chained.pk)
    # then the chain stays over, and the project nobody recorded is gone
    assert AsyncJob.objects.get(pk=chained.pk).status == "CANCELLED"
    assert sim.state()["projects"] == []
    assert len(sim.state()["workspaces"]) == 1


def test_a_chain_that_fails_before_promotion_ends_and_frees_its_market_in_one_commit(
    sw_writer, sim, published
):
    # given an async brand create with a market, whose workspace create Semrush refuses
    sim.add_fault({"method": "POST", "pathRegex": "/child$", "status": 400, "times": 2})
    accepted = start_async_brand_with_market(sw_writer)
    market = Market.objects.get(brand_id=accepted["id"])
    # when the worker dies as the step frees the market's reservation (its last write)
    with (
        mock.patch("provisioning.services.release_reservations", side_effect=SystemExit("killed")),
        pytest.raises(SystemExit),
    ):
        run(accepted["jobId"])
    # then nothing of the failure committed: no finished job holds a reservation nobody frees
    attempt = ProvisioningAttempt.objects.get(brand_id=accepted["id"])
    assert attempt.status == "pending"
    assert AsyncJob.objects.get(pk=accepted["jobId"]).status == "IN_PROGRESS"
    assert Market.objects.get(pk=market.pk).status == "creating"
    # and when the step is delivered again after its lease, it ends the chain whole
    AsyncJob.objects.filter(pk=accepted["jobId"]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    run(accepted["jobId"])
    attempt.refresh_from_db()
    assert (attempt.status, attempt.reason) == ("failed", "upstream")
    assert AsyncJob.objects.get(pk=accepted["jobId"]).status == "FAILED"
    assert not Market.objects.filter(pk=market.pk).exists()


def test_a_chained_step_that_stands_down_ends_and_frees_its_market_in_one_commit(
    sw_writer, sim, published, chained_job_delivered_separately
):
    # given a promoted chain whose brand no longer points at the workspace when its
    # create-market step runs (the step stands down: nothing is created)
    accepted, chained = promoted_chain(sw_writer, sim)
    Brand.objects.filter(pk=accepted["id"]).update(semrush_sub_workspace_id=None)
    market = Market.objects.get(brand_id=accepted["id"])
    # when the worker dies as the step frees the market's reservation (its last write)
    with (
        mock.patch("provisioning.services.release_reservations", side_effect=SystemExit("killed")),
        pytest.raises(SystemExit),
    ):
        run(chained.pk)
    # then nothing of its end committed
    attempt = ProvisioningAttempt.objects.get(brand_id=accepted["id"])
    assert attempt.status == "pending"
    assert AsyncJob.objects.get(pk=chained.pk).status == "IN_PROGRESS"
    assert Market.objects.get(pk=market.pk).status == "creating"
    # and when the step is delivered again after its lease, it ends whole
    AsyncJob.objects.filter(pk=chained.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    run(chained.pk)
    attempt.refresh_from_db()
    assert attempt.status == "ready"
    assert AsyncJob.objects.get(pk=chained.pk).status == "CANCELLED"
    assert not Market.objects.filter(pk=market.pk).exists()
