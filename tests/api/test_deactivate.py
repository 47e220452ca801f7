"""`POST B/serenity/deactivate` (SPEC §4.4): decommission, never the parent, never the shell."""

from __future__ import annotations

import pytest

from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market, Role, WorkspaceMode
from tests.conftest import make_caller
from tests.factories import (
    BrandFactory,
    MarketFactory,
    OrganizationFactory,
    ProvisioningAttemptFactory,
)
from tests.support import (
    assert_error,
    calls,
    delete_project,
    family,
    foreign_ids,
    list_projects,
    sim_create_project,
    status_read,
)


def deactivate_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}/serenity/deactivate"


@pytest.fixture
def brand(sw_writer, workspace) -> Brand:  # type: ignore[no-untyped-def]
    return BrandFactory(
        organization=sw_writer.org, name="Acme", status="active", semrush_sub_workspace_id=workspace
    )


def market(brand: Brand, geo: int, lang: str, project_id: str) -> Market:
    return MarketFactory(
        brand=brand,
        geo_target_id=geo,
        language_code=lang,
        name=f"{geo}-{lang}",
        semrush_project_id=project_id,
        workspace_id=brand.semrush_sub_workspace_id,
    )


def test_deactivate_empties_the_workspace_clears_the_pointer_and_tombstones(
    sw_writer, sim, brand, workspace
):
    # given two markets, a project in the workspace that no market knows, and another project
    # in the parent (another brand's, in a flat layout)
    us = sim_create_project(sim, workspace, name="US-en", location_id=2840)
    de = sim_create_project(sim, workspace, name="DE-de", location_id=2276)
    stray = sim_create_project(sim, workspace, name="Stray", location_id=2250)
    in_parent = sim_create_project(sim, sim.parent_id, name="Parent's")
    market(brand, 2840, "en", us)
    market(brand, 2276, "de", de)
    setup = len(calls(sim))
    # when
    response = sw_writer.post(deactivate_path(sw_writer, brand))
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(brand.id), "status": "pending"}
    made = calls(sim)[setup:]
    assert made[0] == list_projects(workspace)
    assert sorted(made[1:]) == sorted(
        [
            delete_project(workspace, us),
            delete_project(workspace, de),
            delete_project(workspace, stray),
        ]
    )
    # the parent is never touched, the shell is never deleted
    assert not [c for c in made if sim.parent_id in c[1]]
    assert [p["id"] for p in sim.state()["projects"]] == [in_parent]
    assert [w["id"] for w in sim.state()["workspaces"]] == [workspace]
    brand.refresh_from_db()
    assert (brand.status, brand.semrush_sub_workspace_id) == ("pending", None)
    assert Market.objects.filter(deleted_at__isnull=True).count() == 0
    assert Market.objects.count() == 2
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.started_by) == ("ready", "deactivate")
    # and reads show the brand as never provisioned
    read = sw_writer.get(f"/v2/orgs/{sw_writer.org.id}/brands/{brand.id}").json()
    assert (read["semrushSubWorkspaceId"], read["semrushProvisioningStatus"]) == (None, None)
    assert sw_writer.get(
        f"/v2/orgs/{sw_writer.org.id}/brands/{brand.id}/serenity/markets"
    ).json() == {"items": [], "nextCursor": None}


def test_decommission_failure_is_502_and_changes_nothing(sw_writer, sim, brand, workspace):
    # given deleting a project fails upstream (first try and both retries)
    us = sim_create_project(sim, workspace, name="US-en")
    market(brand, 2840, "en", us)
    sim.add_fault(
        {
            "method": "DELETE",
            "pathRegex": "/projects/",
            "status": 500,
            "times": 3,
            "body": {"message": "internal server error"},
        }
    )
    # when
    response = sw_writer.post(deactivate_path(sw_writer, brand))
    # then pointer, status and markets are untouched; the attempt failed upstream
    assert_error(
        response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim, own=[workspace])
    )
    brand.refresh_from_db()
    assert (brand.status, brand.semrush_sub_workspace_id) == ("active", workspace)
    assert Market.objects.filter(deleted_at__isnull=True).count() == 1
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.reason, attempt.started_by) == (
        "failed",
        "upstream",
        "deactivate",
    )
    assert [p["id"] for p in sim.state()["projects"]] == [us]


def test_deactivate_of_a_workspace_deleted_outside_counts_as_empty(sw_writer, sim):
    # given the brand's workspace no longer exists upstream (403 on the brand's own pointer)
    brand = BrandFactory(
        organization=sw_writer.org,
        status="active",
        semrush_sub_workspace_id="11111111-1111-1111-1111-111111111111",
    )
    # when
    response = sw_writer.post(deactivate_path(sw_writer, brand))
    # then
    assert response.status_code == 200, response.json()
    brand.refresh_from_db()
    assert (brand.status, brand.semrush_sub_workspace_id) == ("pending", None)


def test_deactivate_without_workspace_makes_no_upstream_call(sw_writer, sim):
    # given
    brand = BrandFactory(organization=sw_writer.org, status="active", semrush_sub_workspace_id=None)
    # when
    response = sw_writer.post(deactivate_path(sw_writer, brand))
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(brand.id), "status": "pending"}
    assert calls(sim) == []
    brand.refresh_from_db()
    assert brand.status == "pending"


def test_deactivate_refuses_a_pointer_equal_to_the_parent(sw_writer, sim):
    # given a misconfigured brand pointing at the parent
    brand = BrandFactory(organization=sw_writer.org, semrush_sub_workspace_id=sim.parent_id)
    sim_create_project(sim, sim.parent_id)
    setup = len(calls(sim))
    # when
    response = sw_writer.post(deactivate_path(sw_writer, brand))
    # then nothing in the parent is listed or deleted
    assert_error(response, 409, "workspaceMisconfigured", forbidden=foreign_ids(sim))
    assert calls(sim)[setup:] == []
    assert len(sim.state()["projects"]) == 1
    brand.refresh_from_db()
    assert brand.semrush_sub_workspace_id == sim.parent_id


def test_deactivate_while_sync_work_is_pending_is_409(sw_writer, sim, brand):
    # given another request's sync attempt (no job to cancel)
    ProvisioningAttemptFactory(brand=brand)
    setup = len(calls(sim))
    # when
    response = sw_writer.post(deactivate_path(sw_writer, brand))
    # then
    body = assert_error(response, 409, "semrush_provisioning_in_progress")
    assert body["details"] == {"jobId": None}
    assert calls(sim)[setup:] == []


def test_deactivate_works_when_serenity_is_off_for_the_brand(sw_writer, sim, brand, workspace):
    # given Serenity switched off for the brand (deactivate is exempt from serenityNotActive)
    Brand.objects.filter(pk=brand.pk).update(serenity_enabled=False)
    # when
    response = sw_writer.post(deactivate_path(sw_writer, brand))
    # then
    assert response.status_code == 200, response.json()


def test_deactivate_of_a_flat_brand_deletes_its_projects_in_the_parent(db, sim):
    # given a flat brand with a market in the parent, and another brand's project there too
    org = OrganizationFactory(
        serenity_enabled=True,
        semrush_parent_workspace_id=sim.parent_id,
        workspace_mode=WorkspaceMode.FLAT,
    )
    caller = make_caller(org, Role.WRITER)
    brand = BrandFactory(organization=org, semrush_sub_workspace_id=None)
    mine = sim_create_project(sim, sim.parent_id, name="Mine")
    other = sim_create_project(sim, sim.parent_id, name="Other")
    MarketFactory(brand=brand, semrush_project_id=mine, workspace_id=sim.parent_id)
    setup = len(calls(sim))
    # when
    response = caller.post(deactivate_path(caller, brand))
    # then only the brand's own project is deleted
    assert response.status_code == 200, response.json()
    assert calls(sim)[setup:] == [delete_project(sim.parent_id, mine)]
    assert [p["id"] for p in sim.state()["projects"]] == [other]
    assert Market.objects.filter(deleted_at__isnull=True).count() == 0


def test_reactivation_after_deactivate_adopts_the_emptied_workspace(sw_writer, sim):
    # given a provisioned brand with a live market, then deactivated
    brands = f"/v2/orgs/{sw_writer.org.id}/brands"
    created = sw_writer.post(
        brands,
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    assert created.status_code == 201, created.json()
    workspace = created.json()["semrushSubWorkspaceId"]
    serenity = f"{brands}/{created.json()['id']}/serenity"
    assert sw_writer.post(f"{serenity}/deactivate").status_code == 200
    setup = len(calls(sim))
    # when it is activated again (branch A: it is pending now)
    response = sw_writer.post(f"{serenity}/activate")
    # then the same, now empty, workspace is adopted: no second workspace. It is the candidate
    # of one of the brand's own earlier attempts, so it wins outright, without the emptiness
    # check (SPEC §10.2: the rule holds on every create-or-adopt path, sync included); one
    # status read finds it ready before it is promoted (the chain's rule, SPEC §12.3)
    assert response.status_code == 200, response.json()
    assert calls(sim)[setup:] == [family(sim.parent_id), status_read(workspace)]
    assert [w["id"] for w in sim.state()["workspaces"]] == [workspace]
    read = sw_writer.get(f"{brands}/{created.json()['id']}").json()
    assert (read["status"], read["semrushSubWorkspaceId"]) == ("active", workspace)
    # and the market can be created again
    again = sw_writer.post(f"{serenity}/markets", {"market": "US", "languageCode": "en"})
    assert again.status_code == 201, again.json()
    assert len(sim.state()["projects"]) == 1
