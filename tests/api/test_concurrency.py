"""Concurrent sync writers (SPEC §3, §4.1, §4.2): the database decides, Semrush sees one create.

Each thread has its own API client and database connection; a barrier releases them together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from serenity.models import Brand, Market
from tests.factories import BrandFactory
from tests.support import assert_error, calls, create_child, foreign_ids, sim_create_workspace


def race(token: str, requests: list[Callable[[APIClient], Any]]) -> list[Any]:
    """Run each request in its own thread, released together; return the responses in order."""
    barrier = threading.Barrier(len(requests))
    responses: list[Any] = [None] * len(requests)
    errors: list[BaseException] = []

    def run(index: int, send: Callable[[APIClient], Any]) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        try:
            barrier.wait(timeout=10)
            responses[index] = send(client)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, r)) for i, r in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return responses


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_two_bare_creates_of_one_name_make_one_brand_and_one_workspace(sw_writer, sim, round_):
    # given two requests creating "Acme" (two different brands) in one org at the same time
    path = f"/v2/orgs/{sw_writer.org.id}/brands"

    def create(name: str) -> Callable[[APIClient], Any]:
        return lambda client: client.post(
            path, {"name": name, "baseUrl": "https://acme.example"}, format="json"
        )

    # when
    responses = race(sw_writer.token, [create("Acme"), create(" acme ")])
    # then one 201, one 409 brandExists that never touched Semrush
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201, 409], [r.json() for r in responses]
    [winner] = [r for r in responses if r.status_code == 201]
    [loser] = [r for r in responses if r.status_code == 409]
    assert_error(loser, 409, "brandExists", forbidden=foreign_ids(sim))
    [workspace] = sim.state()["workspaces"]
    assert sim.state()["projects"] == []
    assert [c for c in calls(sim) if c[0] == "POST"] == [create_child(sim.parent_id)]
    brand = Brand.objects.get()
    assert (
        brand.semrush_sub_workspace_id == workspace["id"] == winner.json()["semrushSubWorkspaceId"]
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_two_creates_of_one_market_slice_make_one_project(sw_writer, sim, round_):
    # given a provisioned brand
    workspace = sim_create_workspace(sim, "Acme")
    brand = BrandFactory(
        organization=sw_writer.org, name="Acme", semrush_sub_workspace_id=workspace
    )
    path = f"/v2/orgs/{sw_writer.org.id}/brands/{brand.id}/serenity/markets"

    def create(client: APIClient) -> Any:
        return client.post(path, {"market": "US", "languageCode": "en"}, format="json")

    # when two requests create US-en at once
    responses = race(sw_writer.token, [create, create])
    # then one 201 and one 409 sliceExists; exactly one project upstream and one market row
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201, 409], [r.json() for r in responses]
    [winner] = [r for r in responses if r.status_code == 201]
    [loser] = [r for r in responses if r.status_code == 409]
    assert_error(loser, 409, "sliceExists", forbidden=foreign_ids(sim, own=[workspace]))
    [project] = sim.state()["projects"]
    assert winner.json()["projectId"] == project["id"]
    [market] = Market.objects.all()
    assert (market.status, market.semrush_project_id) == ("live", project["id"])
    assert len([c for c in calls(sim) if c[0] == "POST" and c[1].endswith("/projects")]) == 1


@pytest.mark.django_db(transaction=True)
def test_a_market_create_during_a_brand_create_meets_its_pending_attempt(sw_writer, sim):
    # given a sync brand create with a market whose child create upstream is slow
    sim.add_fault({"method": "POST", "pathRegex": "/child$", "delayMs": 700})
    path = f"/v2/orgs/{sw_writer.org.id}/brands"
    body = {
        "name": "Acme",
        "baseUrl": "https://acme.example",
        "semrushMarket": {"market": "US", "languageCode": "en"},
    }
    created: list[Any] = []

    def create() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {sw_writer.token}")
        try:
            created.append(client.post(path, body, format="json"))
        finally:
            connection.close()

    thread = threading.Thread(target=create)
    thread.start()
    deadline = time.monotonic() + 5
    while not Brand.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    brand = Brand.objects.get()
    # when, while it is in flight, the brand is read and another market is created on it
    read = sw_writer.get(f"{path}/{brand.id}")
    other = sw_writer.post(
        f"{path}/{brand.id}/serenity/markets", {"market": "DE", "languageCode": "de"}
    )
    thread.join(timeout=30)
    # then the read shows the provisioning as pending, the market create is refused without
    # touching Semrush, and the brand create finishes
    assert read.json()["semrushProvisioningStatus"] == "pending"
    assert read.json()["semrushSubWorkspaceId"] is None
    refused = assert_error(
        other, 409, "semrush_provisioning_in_progress", forbidden=foreign_ids(sim)
    )
    assert refused["details"] == {"jobId": None}
    [response] = created
    assert response.status_code == 201, response.json()
    assert [(m.geo_target_id, m.status) for m in Market.objects.all()] == [(2840, "live")]
    assert len(sim.state()["projects"]) == 1
