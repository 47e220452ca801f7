"""A workspace deleted upstream heals (SPEC §10.2): the brand's own pointer answering 403 is
confirmed against the parent's family, the pointer is cleared (only if it still holds that
workspace), the brand's markets are tombstoned and the work ends with `subworkspaceGone`; a
following activate provisions a new workspace."""

from __future__ import annotations

import pytest

from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market, Prompt
from tests.conftest import poll_job
from tests.factories import MarketFactory
from tests.support import (
    UM,
    assert_error,
    assert_settle_reads,
    calls,
    create_child,
    family,
    languages,
    list_projects,
    sim_create_project,
    sim_create_workspace,
    sim_request,
    status_read,
)


def b_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}"


@pytest.fixture
def brand(active_brand) -> Brand:  # type: ignore[no-untyped-def]
    return active_brand


def delete_upstream(sim, workspace_id: str) -> None:  # type: ignore[no-untyped-def]
    sim_request(sim, "DELETE", f"{UM}/v1/workspaces/{workspace_id}")


def test_gone_workspace_heals_market_create_then_activate_then_market_create(
    sw_writer, sim, brand, workspace
):
    # given a live market whose workspace was deleted outside the service
    project = sim_create_project(sim, workspace, name="DE-de", location_id=2276)
    old_market = MarketFactory(
        brand=brand,
        geo_target_id=2276,
        language_code="de",
        semrush_project_id=project,
        workspace_id=workspace,
    )
    delete_upstream(sim, workspace)
    setup = len(calls(sim))
    # when a market is created
    response = sw_writer.post(
        f"{b_path(sw_writer, brand)}/serenity/markets", {"market": "US", "languageCode": "en"}
    )
    # then subworkspaceGone after the catalogue, one status read and one family listing;
    # pointer cleared, markets tombstoned, the attempt failed (gone)
    assert_error(response, 502, "subworkspaceGone")
    assert calls(sim)[setup:] == [languages(), status_read(workspace), family(sim.parent_id)]
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id is None
    old_market.refresh_from_db()
    assert old_market.deleted_at is not None
    assert not Market.objects.filter(brand=brand, deleted_at__isnull=True).exists()
    assert list(
        ProvisioningAttempt.objects.filter(brand=brand).values_list("status", "reason")
    ) == [("failed", "gone")]

    # when a bare activate follows
    response = sw_writer.post(f"{b_path(sw_writer, brand)}/serenity/activate", {})
    # then a new workspace is provisioned and recorded
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(brand.id), "status": "active", "markets": []}
    new_pointer = Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id
    assert new_pointer is not None and new_pointer != workspace
    assert {ws["id"] for ws in sim.state()["workspaces"]} >= {new_pointer}
    read = sw_writer.get(b_path(sw_writer, brand)).json()
    assert read["semrushProvisioningStatus"] == "ready"

    # when the market is created again
    response = sw_writer.post(
        f"{b_path(sw_writer, brand)}/serenity/markets", {"market": "US", "languageCode": "en"}
    )
    # then
    assert response.status_code == 201, response.json()
    assert response.json()["workspaceId"] == new_pointer


def test_a_workspace_still_listed_is_not_healed(sw_writer, sim, brand, workspace):
    # given the status read answers 403 although the workspace is still in the family
    sim_request(
        sim,
        "POST",
        "/__sim/faults",
        {"method": "GET", "pathRegex": f"/workspaces/{workspace}/status$", "status": 403},
    )
    market = MarketFactory(
        brand=brand, geo_target_id=2276, language_code="de", workspace_id=workspace
    )
    # when
    response = sw_writer.post(
        f"{b_path(sw_writer, brand)}/serenity/markets", {"market": "US", "languageCode": "en"}
    )
    # then a refusal, and nothing is cleared
    assert_error(response, 403, "upstreamForbidden")
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id == workspace
    market.refresh_from_db()
    assert market.deleted_at is None


def test_prompts_to_a_market_whose_workspace_is_gone_answer_502(sw_writer, sim, brand, workspace):
    # given a live market in a workspace deleted outside the service
    project = sim_create_project(sim, workspace, name="US-en", location_id=2840)
    market = MarketFactory(
        brand=brand,
        geo_target_id=2840,
        language_code="en",
        semrush_project_id=project,
        workspace_id=workspace,
    )
    delete_upstream(sim, workspace)
    # when
    response = sw_writer.post(
        f"{b_path(sw_writer, brand)}/serenity/prompts",
        {"prompts": [{"text": "best shoes", "geoTargetId": 2840, "languageCode": "en"}]},
    )
    # then
    assert_error(response, 502, "subworkspaceGone")
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id is None
    market.refresh_from_db()
    assert market.deleted_at is not None
    assert Prompt.objects.count() == 0


@pytest.mark.parametrize("status", ["active", "pending"])
def test_bare_activate_on_a_gone_workspace_provisions_a_new_one(
    sw_writer, sim, brand, workspace, status
):
    # given a brand (branch B: active; branch A: pending) whose workspace was deleted outside
    # the service, with a live market in it
    Brand.objects.filter(pk=brand.pk).update(status=status)
    market = MarketFactory(
        brand=brand, geo_target_id=2276, language_code="de", workspace_id=workspace
    )
    delete_upstream(sim, workspace)
    setup = len(calls(sim))
    # when a bare activate is sent
    response = sw_writer.post(f"{b_path(sw_writer, brand)}/serenity/activate", {})
    # then one status read meets the 403, the family confirms the deletion (heal), and a new
    # workspace is created as for a brand without one, and settled
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(brand.id), "status": "active", "markets": []}
    made = calls(sim)[setup:]
    assert made[:4] == [
        status_read(workspace),
        family(sim.parent_id),
        family(sim.parent_id),
        create_child(sim.parent_id),
    ]
    fresh = Brand.objects.get(pk=brand.pk)
    assert_settle_reads(made[4:], str(fresh.semrush_sub_workspace_id))
    assert fresh.status == "active"
    assert fresh.semrush_sub_workspace_id not in (None, workspace)
    assert fresh.semrush_sub_workspace_id in {ws["id"] for ws in sim.state()["workspaces"]}
    market.refresh_from_db()
    assert market.deleted_at is not None
    assert list(
        ProvisioningAttempt.objects.filter(brand=brand).values_list("status", "reason")
    ) == [("ready", None)]


def test_bare_activate_keeps_a_live_workspace_with_one_status_read(
    sw_writer, sim, brand, workspace
):
    # given a live pointer
    setup = len(calls(sim))
    # when
    response = sw_writer.post(f"{b_path(sw_writer, brand)}/serenity/activate", {})
    # then one status read confirms it (SPEC §10.2), nothing else is called or changed
    assert response.status_code == 200, response.json()
    assert calls(sim)[setup:] == [status_read(workspace)]
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id == workspace


def test_a_not_ready_pointer_is_settled_and_kept_by_a_bare_activate(sw_writer, sim, brand):
    # given a pointer still settling
    settling = sim_create_workspace(sim, "Acme settling", settle=False)
    Brand.objects.filter(pk=brand.pk).update(semrush_sub_workspace_id=settling)
    setup = len(calls(sim))
    # when
    response = sw_writer.post(f"{b_path(sw_writer, brand)}/serenity/activate", {})
    # then its status is read until it is ready (the chain's rule, SPEC §12.3), and it stays
    assert response.status_code == 200, response.json()
    assert_settle_reads(calls(sim)[setup:], settling)
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id == settling


def test_async_bare_activate_on_a_gone_workspace_completes_with_a_new_one(
    sw_writer, sim, brand, workspace, worker
):
    # given
    delete_upstream(sim, workspace)
    # when
    accepted = sw_writer.post(f"{b_path(sw_writer, brand)}/serenity/activate", {"async": True})
    # then
    assert accepted.status_code == 202, accepted.json()
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["result"] == {
        "status": 200,
        "outcome": "succeeded",
        "body": {"brandId": str(brand.id), "status": "active", "markets": []},
    }
    new_pointer = Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id
    assert new_pointer not in (None, workspace)
    assert new_pointer in {ws["id"] for ws in sim.state()["workspaces"]}


def test_a_403_on_the_project_listing_of_the_brands_workspace_heals(
    sw_writer, sim, brand, workspace
):
    # given a workspace deleted upstream whose status read still answers (a stale cache)
    old_market = MarketFactory(
        brand=brand, geo_target_id=2276, language_code="de", workspace_id=workspace
    )
    delete_upstream(sim, workspace)
    sim_request(
        sim,
        "POST",
        "/__sim/faults",
        {
            "method": "GET",
            "pathRegex": f"/workspaces/{workspace}/status$",
            "status": 200,
            "body": {"status": "active"},
        },
    )
    setup = len(calls(sim))
    # when a market is created
    response = sw_writer.post(
        f"{b_path(sw_writer, brand)}/serenity/markets", {"market": "US", "languageCode": "en"}
    )
    # then the project listing's 403 is confirmed against the family and heals
    assert_error(response, 502, "subworkspaceGone")
    assert calls(sim)[setup:] == [
        languages(),
        status_read(workspace),
        list_projects(workspace),
        family(sim.parent_id),
    ]
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id is None
    old_market.refresh_from_db()
    assert old_market.deleted_at is not None
    assert not Market.objects.filter(brand=brand, deleted_at__isnull=True).exists()
    # and the attempt ends as the chain's does once its workspace was promoted (SPEC §6.3,
    # §12.3: the sync request runs the chain's steps): ready, the work's answer the 502
    assert list(
        ProvisioningAttempt.objects.filter(brand=brand).values_list("status", "reason")
    ) == [("ready", None)]


def test_async_market_create_on_a_gone_workspace_heals(sw_writer, sim, brand, workspace, worker):
    # given
    old_market = MarketFactory(
        brand=brand, geo_target_id=2276, language_code="de", workspace_id=workspace
    )
    delete_upstream(sim, workspace)
    # when
    accepted = sw_writer.post(
        f"{b_path(sw_writer, brand)}/serenity/markets",
        {"market": "US", "languageCode": "en", "async": True},
    )
    # then the chain fails with subworkspaceGone, the pointer is cleared, markets tombstoned
    assert accepted.status_code == 202, accepted.json()
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "FAILED", final
    assert final["error"]["code"] == "subworkspaceGone"
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id is None
    old_market.refresh_from_db()
    assert old_market.deleted_at is not None
    assert not Market.objects.filter(brand=brand, deleted_at__isnull=True).exists()
    assert list(
        ProvisioningAttempt.objects.filter(brand=brand).values_list("status", "reason")
    ) == [("failed", "gone")]


def test_a_403_on_a_project_create_in_the_brands_workspace_heals(sw_writer, sim, brand, workspace):
    # given a workspace deleted upstream whose status read and project listing still answer
    delete_upstream(sim, workspace)
    for path, body in (
        (f"/workspaces/{workspace}/status$", {"status": "active"}),
        (f"/workspaces/{workspace}/projects$", {"page": 1, "total": 0, "items": []}),
    ):
        sim_request(
            sim,
            "POST",
            "/__sim/faults",
            {"method": "GET", "pathRegex": path, "status": 200, "body": body},
        )
    # when a project activation creates a market there
    response = sw_writer.post(
        f"{b_path(sw_writer, brand)}/serenity/activate",
        {"brandDomain": "acme.example", "markets": [{"market": "US", "languageCode": "en"}]},
    )
    # then the market's entry is subworkspaceGone and the pointer is cleared
    assert response.status_code == 207, response.json()
    [entry] = response.json()["markets"]
    assert (entry["status"], entry["body"]["error"]) == (502, "subworkspaceGone")
    assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id is None
    assert not Market.objects.filter(brand=brand, deleted_at__isnull=True).exists()
