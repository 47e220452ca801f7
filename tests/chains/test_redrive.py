"""Bulk work that recovers, through a real worker and the simulator over HTTP (SPEC §13.2): a
redrive runs exactly the failed items again, on the brands the first run created, with no
upstream call for the items that completed and no duplicate brand or workspace; the failure
threshold cancels the rest of an onboarding, and a redrive completes it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from provisioning.models import Onboarding, ProvisioningAttempt
from serenity.models import Brand, Market
from tests.chains.test_onboarding import item, poll, url

pytestmark = pytest.mark.django_db(transaction=True)


def child_creates_fail(sim: Any, times: int) -> None:
    """The next `times` workspace creates are refused (a 400: nothing is created)."""
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/child$",
            "status": 400,
            "body": {"message": "bad request"},
            "times": times,
        }
    )


def no_duplicates(sim: Any, names: list[str]) -> None:
    """One brand per name, one workspace per brand (its pointer), one live project each."""
    assert sorted(Brand.objects.values_list("name", flat=True)) == sorted(names)
    titles = Counter(ws["title"] for ws in sim.state()["workspaces"])
    assert {title: n for title, n in titles.items() if n > 1} == {}
    pointers = list(Brand.objects.values_list("semrush_sub_workspace_id", flat=True))
    assert None not in pointers and len(set(pointers)) == len(names)
    assert Market.objects.filter(status="live").count() == len(names)
    assert len(sim.state()["projects"]) == len(names)


def test_a_redrive_completes_exactly_the_failed_items_and_calls_nothing_for_the_others(
    sw_writer, sim, worker
):
    # given an onboarding of six brands whose first two workspace creates were refused
    child_creates_fail(sim, 2)
    names = [f"Redriven {n}" for n in range(6)]
    accepted = sw_writer.post(url(sw_writer), {"brands": [item(n, ("US", "en")) for n in names]})
    first = poll(sw_writer, accepted.json()["onboardingId"])
    assert first["counts"] == {"inProgress": 0, "completed": 4, "failed": 2, "cancelled": 0}
    failed = [i for i in first["items"] if i["status"] == "FAILED"]
    done = {i["brandId"] for i in first["items"] if i["status"] == "COMPLETED"}
    done_workspaces = set(
        Brand.objects.filter(pk__in=done).values_list("semrush_sub_workspace_id", flat=True)
    )
    seen = len(sim.requests_log())
    # when it is redriven
    response = sw_writer.post(url(sw_writer, f"/{first['onboardingId']}/retry"))
    # then 202 with a new onboarding of the two failed items, which names the original
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body == {
        "onboardingId": body["onboardingId"],
        "status": "IN_PROGRESS",
        "total": 2,
        "retryOf": first["onboardingId"],
    }
    assert response["Location"] == url(sw_writer, f"/{body['onboardingId']}")
    redrive = poll(sw_writer, body["onboardingId"])
    assert redrive["status"] == "COMPLETED", redrive
    assert redrive["retryOf"] == first["onboardingId"]
    assert redrive["counts"] == {"inProgress": 0, "completed": 2, "failed": 0, "cancelled": 0}
    # on the brands the first run created (same ids), with the same brand data
    assert [(i["name"], i["brandId"]) for i in redrive["items"]] == [
        (i["name"], i["brandId"]) for i in failed
    ]
    # and no upstream call named a brand that had completed
    since = sim.requests_log()[seen:]
    assert since != []
    assert [c["path"] for c in since if any(ws in c["path"] for ws in done_workspaces)] == []
    assert len([c for c in since if c["method"] == "POST" and c["path"].endswith("/child")]) == 2
    # and nothing is duplicated: six brands, six workspaces, six live projects
    no_duplicates(sim, names)
    assert sw_writer.get(url(sw_writer, f"/{first['onboardingId']}")).json()["retryOf"] is None


def test_a_redrive_resumes_on_the_workspace_the_first_run_created(sw_writer, sim, worker):
    # given an onboarding whose one item failed reading its new workspace's status (the
    # workspace was created, never promoted)
    sim.add_fault(
        {"method": "GET", "pathRegex": "/status$", "status": 400, "body": {"message": "bad"}}
    )
    names = ["Resumed A", "Resumed B"]
    accepted = sw_writer.post(url(sw_writer), {"brands": [item(n, ("US", "en")) for n in names]})
    first = poll(sw_writer, accepted.json()["onboardingId"])
    [failed] = [i for i in first["items"] if i["status"] == "FAILED"]
    assert Brand.objects.get(pk=failed["brandId"]).semrush_sub_workspace_id is None
    workspaces_before = {ws["id"] for ws in sim.state()["workspaces"]}
    assert len(workspaces_before) == 2
    # when it is redriven
    response = sw_writer.post(url(sw_writer, f"/{first['onboardingId']}/retry"))
    assert response.status_code == 202, response.json()
    redrive = poll(sw_writer, response.json()["onboardingId"])
    # then the item completes in the workspace it had: no workspace is created or listed for it
    assert [(i["brandId"], i["status"]) for i in redrive["items"]] == [
        (failed["brandId"], "COMPLETED")
    ]
    assert {ws["id"] for ws in sim.state()["workspaces"]} == workspaces_before
    no_duplicates(sim, names)


def test_the_threshold_cancels_the_rest_and_a_redrive_completes_it(sw_writer, sim, worker):
    # given ten brands whose workspaces take 3 s to settle, the first two creates refused,
    # and a threshold of two failed items
    sim.configure({"settleSeconds": 3})
    child_creates_fail(sim, 2)
    names = [f"Threshold {n}" for n in range(10)]
    accepted = sw_writer.post(
        url(sw_writer),
        {"brands": [item(n, ("US", "en")) for n in names], "maxFailedItems": 2},
    )
    assert accepted.status_code == 202, accepted.json()
    # when two have failed
    first = poll(sw_writer, accepted.json()["onboardingId"])
    # then the onboarding is cancelled by the threshold, the other eight with it
    assert (first["status"], first["cancelledBy"], first["maxFailedItems"]) == (
        "CANCELLED",
        "failureThreshold",
        2,
    ), first
    assert first["counts"] == {"inProgress": 0, "completed": 0, "failed": 2, "cancelled": 8}
    assert not ProvisioningAttempt.objects.filter(status="pending").exists()
    # and a redrive takes all ten and completes them, without duplicates
    sim.configure({"settleSeconds": 0.2})
    response = sw_writer.post(url(sw_writer, f"/{first['onboardingId']}/retry"))
    assert response.status_code == 202, response.json()
    assert response.json()["total"] == 10
    redrive = poll(sw_writer, response.json()["onboardingId"])
    assert (redrive["status"], redrive["cancelledBy"], redrive["maxFailedItems"]) == (
        "COMPLETED",
        None,
        2,
    )
    assert redrive["counts"] == {"inProgress": 0, "completed": 10, "failed": 0, "cancelled": 0}
    no_duplicates(sim, names)
    # and the original is left as it was
    assert Onboarding.objects.get(pk=first["onboardingId"]).cancelled_by == "failureThreshold"
