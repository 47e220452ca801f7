"""`B/serenity/markets`: list, read, create, delete, synchronous (SPEC §4.2)."""

from __future__ import annotations

import pytest
from django.utils import timezone

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
    assert_clean,
    assert_error,
    calls,
    create_project,
    db_counts,
    delete_project,
    foreign_ids,
    languages,
    list_projects,
    publish,
    read_project,
    set_tracked_url,
    sim_create_project,
    sim_create_workspace,
    sim_request,
    stamps,
    status_read,
)


def markets_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}/serenity/markets"


@pytest.fixture
def brand(sw_writer, workspace) -> Brand:  # type: ignore[no-untyped-def]
    """An active sub-workspace brand whose pointer is `workspace`."""
    return BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        base_url="https://www.acme.example/",
        aliases=["Acme Corp"],
        semrush_sub_workspace_id=workspace,
    )


def live_market(brand: Brand, *, geo: int = 2840, lang: str = "en", **fields: object) -> Market:
    values = {
        "semrush_project_id": "p-1",
        "workspace_id": brand.semrush_sub_workspace_id,
        **fields,
    }
    return MarketFactory(brand=brand, geo_target_id=geo, language_code=lang, **values)


# --- List and read --------------------------------------------------------------------------


def test_list_markets_returns_the_live_ones(sw_writer, sim, brand):
    # given a live market, a tombstoned one and one of another brand
    us = live_market(brand)
    live_market(brand, geo=2276, lang="de", name="DE-de", deleted_at=timezone.now())
    live_market(BrandFactory(organization=sw_writer.org))
    setup = len(calls(sim))
    # when
    response = sw_writer.get(markets_path(sw_writer, brand))
    # then
    assert response.status_code == 200
    assert response.json() == {
        "items": [
            {
                "brandId": str(brand.id),
                "market": "US",
                "geoTargetId": 2840,
                "languageCode": "en",
                "name": "US-en",
                "status": "live",
                "semrushProjectId": "p-1",
                "workspaceId": brand.semrush_sub_workspace_id,
                "publishError": None,
                "drift": None,
                **stamps(us),
            }
        ],
        "nextCursor": None,
    }
    assert calls(sim)[setup:] == []


def test_list_markets_is_empty_for_a_new_brand(sw_writer, sim, brand):
    # when
    response = sw_writer.get(markets_path(sw_writer, brand))
    # then
    assert (response.status_code, response.json()) == (200, {"items": [], "nextCursor": None})


def test_read_one_market(sw_writer, sim, brand):
    # given
    de = live_market(brand, geo=2276, lang="de", name="Germany")
    # when (the language in the path is case-insensitive)
    response = sw_writer.get(f"{markets_path(sw_writer, brand)}/2276/DE")
    # then
    assert response.status_code == 200
    assert response.json() == {
        "brandId": str(brand.id),
        "market": "DE",
        "geoTargetId": 2276,
        "languageCode": "de",
        "name": "Germany",
        "status": "live",
        "semrushProjectId": "p-1",
        "workspaceId": brand.semrush_sub_workspace_id,
        "publishError": None,
        "drift": None,
        **stamps(de),
    }


@pytest.mark.parametrize("path", ["2840/en", "2276/en", "2840/de"])
def test_read_an_unknown_or_deleted_market_is_404(sw_writer, sim, brand, path):
    # given only a tombstoned US-en and a live market of another brand
    live_market(brand, deleted_at=timezone.now())
    live_market(BrandFactory(organization=sw_writer.org), geo=2276, lang="en")
    # when
    response = sw_writer.get(f"{markets_path(sw_writer, brand)}/{path}")
    # then
    assert_error(response, 404, "marketNotFound")


def test_read_with_a_non_numeric_geo_target_id_is_400(sw_writer, sim, brand):
    # when
    response = sw_writer.get(f"{markets_path(sw_writer, brand)}/US/en")
    # then
    assert_error(response, 400, "invalidRequest")


# --- Create, sub-workspace mode ---------------------------------------------------------------


def test_create_settles_the_workspace_first_then_creates_and_publishes(sw_writer, sim):
    # given a brand whose workspace has not settled yet
    workspace = sim_create_workspace(sim, "Acme", settle=False)
    brand = BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        base_url="https://www.acme.example/",
        aliases=["Acme Corp", " acme "],
        semrush_sub_workspace_id=workspace,
    )
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "de", "languageCode": "DE"}
    )
    # then
    assert response.status_code == 201, response.json()
    [project] = sim.state()["projects"]
    pid = project["id"]
    assert response.json() == {
        "brandId": str(brand.id),
        "geoTargetId": 2276,
        "languageCode": "de",
        "workspaceId": workspace,
        "projectId": pid,
        "published": True,
    }
    assert project == {
        "id": pid,
        "workspaceId": workspace,
        "name": "DE-de",
        "locationId": 2276,
        "language": "de",
        "publishStatus": "live",
        "primaryUrl": "https://www.acme.example/",
    }
    made = calls(sim)[setup:]
    reads = [c for c in made if c == status_read(workspace)]
    # polled until ready: at least one read, and every read comes before the project POST
    assert len(reads) >= 1
    assert made[1 : 1 + len(reads)] == reads
    assert [c for c in made if c not in reads] == [
        languages(),
        list_projects(workspace),
        create_project(workspace),
        set_tracked_url(workspace, pid),
        publish(workspace, pid),
        read_project(workspace, pid),
    ]
    market = Market.objects.get()
    assert (market.status, market.semrush_project_id, market.workspace_id, market.reserved_by) == (
        "live",
        pid,
        workspace,
        None,
    )
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.started_by) == ("ready", "create-market")
    assert_clean(response, forbidden=foreign_ids(sim, own=[workspace, pid]))
    # the project tracks the brand's names (name, then aliases, de-duplicated) and its domain
    # (baseUrl's host without www.)
    upstream = sim_request(sim, "GET", f"{set_tracked_url(workspace, pid)[1]}?draft=true&type=ai")
    assert upstream["domain"] == "acme.example"
    assert upstream["settings"]["ai"]["brand_names"] == ["Acme", "Acme Corp"]


def test_create_resumes_a_draft_project_of_the_slice(sw_writer, sim, brand, workspace):
    # given the slice's project exists upstream as a draft (an earlier create that died)
    pid = sim_create_project(sim, workspace, name="US-en", location_id=2840)
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then the draft is finished, no second project is made
    assert response.status_code == 201, response.json()
    assert response.json()["projectId"] == pid
    assert [p["id"] for p in sim.state()["projects"]] == [pid]
    assert calls(sim)[setup:] == [
        languages(),
        status_read(workspace),
        list_projects(workspace),
        set_tracked_url(workspace, pid),
        publish(workspace, pid),
        read_project(workspace, pid),
    ]
    assert Market.objects.get().status == "live"


def test_create_when_the_slice_is_already_published_upstream_is_409(
    sw_writer, sim, brand, workspace
):
    # given a live project for the slice upstream that no market row knows
    pid = sim_create_project(sim, workspace, name="US-en", location_id=2840)
    sim_request(sim, "POST", publish(workspace, pid)[1])
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then
    assert_error(response, 409, "sliceExists", forbidden=foreign_ids(sim, own=[workspace]))
    assert db_counts()["markets"] == 0
    assert len(sim.state()["projects"]) == 1


def test_create_on_a_slice_with_a_market_is_409_slice_exists_with_no_upstream_call(
    sw_writer, sim, brand
):
    # given
    live_market(brand)
    before = db_counts()
    setup = len(calls(sim))
    # when (the market in any case, the language in any case)
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "us", "languageCode": "EN"}
    )
    # then
    assert_error(response, 409, "sliceExists")
    assert db_counts() == before
    assert calls(sim)[setup:] == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"market": "USA", "languageCode": "en"}, "invalidRequest"),
        ({"market": "1", "languageCode": "en"}, "invalidRequest"),
        ({"market": 840, "languageCode": "en"}, "invalidRequest"),
        ({"languageCode": "en"}, "invalidRequest"),
        ({"market": "US"}, "invalidRequest"),
        ({"market": "US", "languageCode": "e"}, "invalidRequest"),
        ({"market": "US", "languageCode": "en_US"}, "invalidRequest"),
        ({"market": "US", "languageCode": "en", "brandNames": []}, "invalidRequest"),
        ({"market": "US", "languageCode": "en", "brandNames": [" "]}, "invalidRequest"),
        ({"market": "US", "languageCode": "en", "async": "false"}, "invalidRequest"),
        ({"market": "XK", "languageCode": "en"}, "unknownMarket"),
        ({"market": "US", "languageCode": "qq"}, "unknownLanguage"),
    ],
    ids=lambda v: repr(v)[:50],
)
def test_create_with_a_bad_body_is_400_before_any_upstream_call(sw_writer, sim, brand, body, code):
    # given
    before = db_counts()
    setup = len(calls(sim))
    # when
    response = sw_writer.post(markets_path(sw_writer, brand), body)
    # then
    assert_error(response, 400, code)
    assert db_counts() == before
    assert calls(sim)[setup:] == []


def test_create_with_a_language_missing_from_the_catalogue_is_400(sw_writer, sim, brand):
    # given Greek, well-formed ISO 639 but not in the upstream catalogue
    before = db_counts()
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "GR", "languageCode": "el"}
    )
    # then only the catalogue was read, nothing was written
    assert_error(response, 400, "unknownLanguage")
    assert calls(sim)[setup:] == [languages()]
    assert db_counts() == before


def test_create_for_a_brand_without_workspace_is_409_incomplete(sw_writer, sim):
    # given a sub-workspace brand that has no pointer (never provisioned, or deactivated)
    brand = BrandFactory(organization=sw_writer.org, semrush_sub_workspace_id=None)
    before = db_counts()
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then nothing is created anywhere, least of all in the parent
    assert_error(response, 409, "semrush_provisioning_incomplete")
    assert db_counts() == before
    assert calls(sim) == []


def test_create_while_the_workspace_is_being_provisioned_is_409_in_progress(sw_writer, sim):
    # given a brand without pointer whose provisioning is pending
    brand = BrandFactory(organization=sw_writer.org, semrush_sub_workspace_id=None)
    ProvisioningAttemptFactory(brand=brand, started_by="create-brand")
    before = db_counts()
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then
    body = assert_error(response, 409, "semrush_provisioning_in_progress")
    assert body["details"] == {"jobId": None}
    assert db_counts() == before
    assert calls(sim) == []


def test_create_while_other_sync_work_holds_the_brand_is_409_in_progress(sw_writer, sim, brand):
    # given another request's pending attempt on a provisioned brand
    ProvisioningAttemptFactory(brand=brand)
    before = db_counts()
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then
    body = assert_error(response, 409, "semrush_provisioning_in_progress")
    assert body["details"] == {"jobId": None}
    assert db_counts() == before
    assert calls(sim)[setup:] == []


def test_create_for_a_brand_pointing_at_the_parent_is_409_misconfigured(sw_writer, sim):
    # given a brand whose pointer is the org's parent workspace
    brand = BrandFactory(organization=sw_writer.org, semrush_sub_workspace_id=sim.parent_id)
    before = db_counts()
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then
    assert_error(response, 409, "workspaceMisconfigured", forbidden=foreign_ids(sim))
    assert db_counts() == before
    assert calls(sim) == []


def test_create_in_an_org_without_parent_is_404_no_parent_workspace(db, sim):
    # given a Serenity-enabled org that has no parent workspace
    org = OrganizationFactory(serenity_enabled=True, semrush_parent_workspace_id=None)
    caller = make_caller(org, Role.WRITER)
    brand = BrandFactory(organization=org)
    # when
    response = caller.post(markets_path(caller, brand), {"market": "US", "languageCode": "en"})
    # then
    assert_error(response, 404, "noParentWorkspace")
    assert db_counts()["markets"] == 0
    assert calls(sim) == []


def test_create_with_failed_publish_keeps_the_project_for_a_later_resume(
    sw_writer, sim, brand, workspace
):
    # given publish fails upstream
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/publish$",
            "status": 500,
            "body": {"message": "internal server error"},
        }
    )
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then 502; the project stays on a publish_failed market that the next create resumes
    [project] = sim.state()["projects"]
    assert_error(
        response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim, own=[workspace])
    )
    market = Market.objects.get()
    assert (market.status, market.semrush_project_id) == ("publish_failed", project["id"])
    again = sw_writer.post(markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"})
    assert again.status_code == 201, again.json()
    assert again.json()["projectId"] == project["id"]
    assert len(sim.state()["projects"]) == 1


def test_create_refused_by_quota_is_409_quota_exceeded(sw_writer, sim, brand, workspace):
    # given upstream's disguised quota answer (a text 405) on publish
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/publish$",
            "status": 405,
            "body": "<html>405 Not Allowed</html>",
        }
    )
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then
    assert_error(response, 409, "quotaExceeded", forbidden=foreign_ids(sim, own=[workspace]))


# --- Create, flat mode -------------------------------------------------------------------------


def test_flat_brand_creates_its_market_in_the_parent(db, sim):
    # given a flat org's brand
    org = OrganizationFactory(
        serenity_enabled=True,
        semrush_parent_workspace_id=sim.parent_id,
        workspace_mode=WorkspaceMode.FLAT,
    )
    caller = make_caller(org, Role.WRITER)
    brand = BrandFactory(organization=org, base_url="https://acme.example")
    # when
    response = caller.post(markets_path(caller, brand), {"market": "US", "languageCode": "en"})
    # then
    assert response.status_code == 201, response.json()
    parent = sim.parent_id
    [project] = sim.state()["projects"]
    pid = project["id"]
    assert response.json() == {
        "brandId": str(brand.id),
        "geoTargetId": 2840,
        "languageCode": "en",
        "workspaceId": parent,
        "projectId": pid,
        "published": True,
    }
    assert calls(sim) == [
        languages(),
        create_project(parent),
        set_tracked_url(parent, pid),
        publish(parent, pid),
        read_project(parent, pid),
    ]
    assert db_counts()["attempts"] == 0
    again = caller.post(markets_path(caller, brand), {"market": "US", "languageCode": "en"})
    assert_error(again, 409, "sliceExists", forbidden=foreign_ids(sim, own=[parent, pid]))


# --- Delete ----------------------------------------------------------------------------------


def test_delete_removes_the_project_and_tombstones_the_market(sw_writer, sim, brand, workspace):
    # given a live market whose project exists upstream
    pid = sim_create_project(sim, workspace)
    market = live_market(brand, semrush_project_id=pid)
    setup = len(calls(sim))
    # when
    response = sw_writer.delete(f"{markets_path(sw_writer, brand)}/2840/en")
    # then
    assert (response.status_code, response.content) == (204, b"")
    assert calls(sim)[setup:] == [delete_project(workspace, pid)]
    assert sim.state()["projects"] == []
    market.refresh_from_db()
    assert market.deleted_at is not None
    # and a second delete is a no-op 204 with no upstream call
    again = sw_writer.delete(f"{markets_path(sw_writer, brand)}/2840/EN")
    assert again.status_code == 204
    assert calls(sim)[setup + 1 :] == []


def test_delete_of_a_project_already_gone_upstream_is_204(sw_writer, sim, brand, workspace):
    # given a market whose project no longer exists upstream (404 counts as success)
    market = live_market(brand, semrush_project_id="00000000-0000-0000-0000-000000000000")
    # when
    response = sw_writer.delete(f"{markets_path(sw_writer, brand)}/2840/en")
    # then
    assert response.status_code == 204
    market.refresh_from_db()
    assert market.deleted_at is not None


def test_delete_of_no_market_is_204_without_upstream_call(sw_writer, sim, brand):
    # given
    setup = len(calls(sim))
    # when
    response = sw_writer.delete(f"{markets_path(sw_writer, brand)}/2840/en")
    # then
    assert response.status_code == 204
    assert calls(sim)[setup:] == []


def test_delete_of_a_market_being_created_is_409_market_busy(sw_writer, sim, brand):
    # given a reservation held by a pending attempt
    attempt = ProvisioningAttemptFactory(brand=brand, started_by="create-market")
    market = live_market(brand, status="creating", semrush_project_id=None, reserved_by=attempt.id)
    setup = len(calls(sim))
    # when
    response = sw_writer.delete(f"{markets_path(sw_writer, brand)}/2840/en")
    # then
    assert_error(response, 409, "marketBusy")
    market.refresh_from_db()
    assert market.deleted_at is None
    assert calls(sim)[setup:] == []


def test_delete_failing_upstream_is_502_and_keeps_the_market(sw_writer, sim, brand, workspace):
    # given every delete attempt (the first and both retries) fails
    pid = sim_create_project(sim, workspace)
    market = live_market(brand, semrush_project_id=pid)
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
    response = sw_writer.delete(f"{markets_path(sw_writer, brand)}/2840/en")
    # then
    assert_error(
        response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim, own=[workspace])
    )
    market.refresh_from_db()
    assert market.deleted_at is None
    assert [p["id"] for p in sim.state()["projects"]] == [pid]


def test_flat_create_without_semrush_configuration_is_503_and_frees_the_slice(db, sim, settings):
    # given a flat brand, and no Semrush base URL configured
    org = OrganizationFactory(
        serenity_enabled=True,
        semrush_parent_workspace_id=sim.parent_id,
        workspace_mode=WorkspaceMode.FLAT,
    )
    caller = make_caller(org, Role.WRITER)
    brand = BrandFactory(organization=org)
    settings.SEMRUSH_BASE_URL = ""
    # when
    response = caller.post(markets_path(caller, brand), {"market": "US", "languageCode": "en"})
    # then no reservation is left to block the slice
    assert_error(response, 503, "configurationError")
    assert db_counts()["markets"] == 0


def test_create_without_semrush_configuration_is_503_with_nothing_written(
    sw_writer, sim, brand, settings
):
    # given
    before = db_counts()
    settings.SEMRUSH_BASE_URL = ""
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand), {"market": "US", "languageCode": "en"}
    )
    # then
    assert_error(response, 503, "configurationError")
    assert db_counts() == before


@pytest.mark.parametrize(
    "domain", ["https://acme.example", "acme.example/shop", "acme example", "", "acme.example:x"]
)
def test_create_with_a_brand_domain_that_is_not_a_host_is_400(sw_writer, sim, brand, domain):
    # given
    before = db_counts()
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand),
        {"market": "US", "languageCode": "en", "brandDomain": domain},
    )
    # then
    message = assert_error(response, 400, "invalidRequest")["message"]
    assert message.startswith("brandDomain"), message
    assert db_counts() == before
    assert calls(sim)[setup:] == []


def test_create_with_an_explicit_brand_domain_and_names(sw_writer, sim, brand, workspace):
    # when
    response = sw_writer.post(
        markets_path(sw_writer, brand),
        {
            "market": "US",
            "languageCode": "en",
            "brandDomain": "Shop.Acme.example",
            "brandNames": ["Acme Shop"],
            "name": "United States",
        },
    )
    # then
    assert response.status_code == 201, response.json()
    pid = response.json()["projectId"]
    upstream = sim_request(sim, "GET", f"{set_tracked_url(workspace, pid)[1]}?draft=true&type=ai")
    assert (upstream["name"], upstream["domain"]) == ("United States", "shop.acme.example")
    assert upstream["settings"]["ai"]["brand_names"] == ["Acme Shop"]
    assert Market.objects.get().name == "United States"
