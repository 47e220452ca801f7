"""`POST B/serenity/activate`, synchronous: branches A, B and C (SPEC §4.3)."""

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
    assert_clean,
    assert_error,
    assert_settle_reads,
    calls,
    create_child,
    create_project,
    db_counts,
    family,
    foreign_ids,
    languages,
    list_projects,
    publish,
    read_project,
    set_tracked_url,
    status_read,
)


def activate_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}/serenity/activate"


@pytest.fixture
def draft_brand(sw_writer) -> Brand:  # type: ignore[no-untyped-def]
    """A pending brand that was never provisioned."""
    return BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="pending",
        base_url="https://acme.example",
        semrush_sub_workspace_id=None,
    )


# --- Branch A: pending → active --------------------------------------------------------------


def test_a_provisions_the_workspace_settles_it_and_activates(sw_writer, sim, draft_brand):
    # when
    response = sw_writer.post(activate_path(sw_writer, draft_brand))
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(draft_brand.id), "status": "active", "markets": []}
    [workspace] = sim.state()["workspaces"]
    # The workspace is promoted once ready, as a chain promotes it (SPEC §12.3)
    made = calls(sim)
    assert made[:2] == [family(sim.parent_id), create_child(sim.parent_id)]
    assert_settle_reads(made[2:], workspace["id"])
    draft_brand.refresh_from_db()
    assert (draft_brand.status, draft_brand.semrush_sub_workspace_id) == ("active", workspace["id"])
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.started_by) == ("ready", "activate")


def test_a_with_a_workspace_already_makes_one_status_read(sw_writer, sim, workspace):
    # given a pending brand that already has its workspace (e.g. a bare create without baseUrl
    # whose baseUrl was patched in later); markets in the body are ignored on branch A
    brand = BrandFactory(
        organization=sw_writer.org, status="pending", semrush_sub_workspace_id=workspace
    )
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        activate_path(sw_writer, brand), {"markets": [{"market": "DE", "languageCode": "de"}]}
    )
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(brand.id), "status": "active", "markets": []}
    # One status read confirms the pointer is still there upstream (SPEC §10.2: a gone
    # workspace heals); skip mode does not wait for it to be ready.
    assert calls(sim)[setup:] == [status_read(workspace)]
    assert Market.objects.count() == 0


def test_a_without_base_url_is_400_before_any_upstream_call(sw_writer, sim):
    # given
    brand = BrandFactory(
        organization=sw_writer.org, status="pending", base_url=None, semrush_sub_workspace_id=None
    )
    before = db_counts()
    # when
    response = sw_writer.post(activate_path(sw_writer, brand), {"brandDomain": "acme.example"})
    # then
    assert_error(response, 400, "baseUrlRequired")
    assert db_counts() == before
    assert calls(sim) == []
    brand.refresh_from_db()
    assert brand.status == "pending"


def test_a_failing_upstream_is_502_activation_incomplete(sw_writer, sim, draft_brand):
    # given the family read fails on every try
    sim.add_fault(
        {
            "method": "GET",
            "pathRegex": "/family$",
            "status": 500,
            "times": 3,
            "body": {"message": "internal server error"},
        }
    )
    # when
    response = sw_writer.post(activate_path(sw_writer, draft_brand))
    # then the A-shaped 502; the brand stays pending and nothing was created upstream
    assert response.status_code == 502
    assert response.json() == {
        "brandId": str(draft_brand.id),
        "status": "pending",
        "error": "serenityActivationIncomplete",
        "message": "The brand could not be activated.",
        "markets": [],
    }
    assert_clean(response, forbidden=foreign_ids(sim))
    assert calls(sim) == [family(sim.parent_id)] * 3
    assert sim.state()["workspaces"] == []
    draft_brand.refresh_from_db()
    assert (draft_brand.status, draft_brand.semrush_sub_workspace_id) == ("pending", None)
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.reason) == ("failed", "upstream")


# --- Branch B: bare re-activation -------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [None, {}, {"brandNames": ["Acme"]}], ids=["absent", "{}", "names"]
)
def test_b_reaffirms_active_with_one_status_read(sw_writer, sim, active_brand, workspace, body):
    # given
    setup = len(calls(sim))
    # when
    response = sw_writer.post(activate_path(sw_writer, active_brand), body)
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(active_brand.id), "status": "active", "markets": []}
    # One status read confirms the pointer (SPEC §10.2: a gone workspace heals).
    assert calls(sim)[setup:] == [status_read(workspace)]
    assert [a.status for a in ProvisioningAttempt.objects.all()] == ["ready"]


def test_b_without_workspace_creates_one_and_settles_it(sw_writer, sim):
    # given an active brand with no workspace (it was provisioned before Serenity was on)
    brand = BrandFactory(organization=sw_writer.org, name="Acme", semrush_sub_workspace_id=None)
    # when
    response = sw_writer.post(activate_path(sw_writer, brand))
    # then
    assert response.status_code == 200, response.json()
    [workspace] = sim.state()["workspaces"]
    made = calls(sim)
    assert made[:2] == [family(sim.parent_id), create_child(sim.parent_id)]
    assert_settle_reads(made[2:], workspace["id"])
    brand.refresh_from_db()
    assert brand.semrush_sub_workspace_id == workspace["id"]


# --- Branch C: project activation -------------------------------------------------------------


def test_c_creates_and_publishes_every_market(sw_writer, sim, active_brand, workspace):
    # given
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        activate_path(sw_writer, active_brand),
        {
            "brandDomain": "acme.example",
            "brandNames": ["Acme", "ACME Inc"],
            "markets": [
                {"market": "us", "languageCode": "EN"},
                {"market": "DE", "languageCode": "de", "name": "Germany"},
            ],
        },
    )
    # then
    assert response.status_code == 200, response.json()
    projects = {p["name"]: p for p in sim.state()["projects"]}
    us, de = projects["US-en"]["id"], projects["Germany"]["id"]
    brand_id = str(active_brand.id)
    assert response.json() == {
        "brandId": brand_id,
        "status": "active",
        "baseUrl": "https://acme.example",
        "markets": [
            {
                "market": "US",
                "languageCode": "en",
                "status": 201,
                "body": {
                    "brandId": brand_id,
                    "geoTargetId": 2840,
                    "languageCode": "en",
                    "workspaceId": workspace,
                    "projectId": us,
                    "published": True,
                },
            },
            {
                "market": "DE",
                "languageCode": "de",
                "status": 201,
                "body": {
                    "brandId": brand_id,
                    "geoTargetId": 2276,
                    "languageCode": "de",
                    "workspaceId": workspace,
                    "projectId": de,
                    "published": True,
                },
            },
        ],
    }
    assert calls(sim)[setup:] == [
        status_read(workspace),
        languages(),
        list_projects(workspace),
        create_project(workspace),
        set_tracked_url(workspace, us),
        publish(workspace, us),
        read_project(workspace, us),
        list_projects(workspace),
        create_project(workspace),
        set_tracked_url(workspace, de),
        publish(workspace, de),
        read_project(workspace, de),
    ]
    assert sorted((m.geo_target_id, m.language_code, m.status) for m in Market.objects.all()) == [
        (2276, "de", "live"),
        (2840, "en", "live"),
    ]
    assert_clean(response, forbidden=foreign_ids(sim, own=[workspace, us, de]))


def test_c_defaults_to_us_english(sw_writer, sim, active_brand, workspace):
    # when
    response = sw_writer.post(
        activate_path(sw_writer, active_brand), {"brandDomain": "acme.example"}
    )
    # then
    assert response.status_code == 200, response.json()
    assert [(m["market"], m["languageCode"], m["status"]) for m in response.json()["markets"]] == [
        ("US", "en", 201)
    ]


def test_c_counts_an_already_live_market_as_live(sw_writer, sim, active_brand, workspace):
    # given US-en is live already
    MarketFactory(brand=active_brand, semrush_project_id="p-1", workspace_id=workspace)
    # when
    response = sw_writer.post(
        activate_path(sw_writer, active_brand),
        {"brandDomain": "acme.example", "markets": [{"market": "US", "languageCode": "en"}]},
    )
    # then
    assert response.status_code == 200, response.json()
    [entry] = response.json()["markets"]
    assert entry["status"] == 409
    assert entry["body"]["error"] == "sliceExists"
    assert sim.state()["projects"] == []


def test_c_with_one_failing_market_is_207(sw_writer, sim, active_brand, workspace):
    # given Greek is not in the upstream catalogue
    # when
    response = sw_writer.post(
        activate_path(sw_writer, active_brand),
        {
            "brandDomain": "acme.example",
            "markets": [
                {"market": "US", "languageCode": "en"},
                {"market": "GR", "languageCode": "el"},
            ],
        },
    )
    # then the failed market is recorded in its entry, the other is live
    assert response.status_code == 207, response.json()
    body = response.json()
    assert [(m["market"], m["languageCode"], m["status"]) for m in body["markets"]] == [
        ("US", "en", 201),
        ("GR", "el", 400),
    ]
    assert body["markets"][1]["body"] == {
        "error": "unknownLanguage",
        "message": "languageCode: el is not in the upstream catalogue.",
        "details": {"field": "languageCode"},
    }
    assert (body["brandId"], body["status"], body["baseUrl"]) == (
        str(active_brand.id),
        "active",
        "https://acme.example",
    )
    assert [(m.geo_target_id, m.status) for m in Market.objects.all()] == [(2840, "live")]
    [project] = sim.state()["projects"]
    assert_clean(response, forbidden=foreign_ids(sim, own=[workspace, project["id"]]))


# --- Refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"markets": []},
        {"markets": [{"market": "US", "languageCode": "en"}] * 2},
        {
            "markets": [
                {"market": "US", "languageCode": "en"},
                {"market": "us", "languageCode": "EN"},
            ]
        },
        {"markets": [{"market": "US"}]},
        {"markets": [{"market": "USA", "languageCode": "en"}]},
        {"markets": {"market": "US", "languageCode": "en"}},
        {"brandDomain": 42},
        {"brandNames": []},
        {"async": "true"},
        {"async": None},
    ],
    ids=lambda b: repr(b)[:60],
)
def test_invalid_body_is_400_with_nothing_written(sw_writer, sim, active_brand, body):
    # given
    before = db_counts()
    setup = len(calls(sim))
    # when
    response = sw_writer.post(activate_path(sw_writer, active_brand), body)
    # then
    assert_error(response, 400, "invalidRequest")
    assert db_counts() == before
    assert calls(sim)[setup:] == []


def test_more_than_fifty_markets_is_400(sw_writer, sim, active_brand, settings):
    # given 51 distinct slices
    import pycountry

    countries = [c.alpha_2 for c in pycountry.countries if c.alpha_2 != "XK"][:51]
    markets = [{"market": code, "languageCode": "en"} for code in countries]
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        activate_path(sw_writer, active_brand), {"brandDomain": "acme.example", "markets": markets}
    )
    # then
    assert_error(response, 400, "invalidRequest")
    assert calls(sim)[setup:] == []
    # and fifty pass validation
    assert settings.SERENITY_MAX_ACTIVATE_MARKETS == 50


def test_unknown_market_code_is_400_unknown_market(sw_writer, sim, active_brand):
    # when
    response = sw_writer.post(
        activate_path(sw_writer, active_brand),
        {"brandDomain": "acme.example", "markets": [{"market": "XK", "languageCode": "en"}]},
    )
    # then
    assert_error(response, 400, "unknownMarket")


def test_activate_while_work_is_pending_is_409(sw_writer, sim, active_brand):
    # given another sync request holds the brand
    ProvisioningAttemptFactory(brand=active_brand, started_by="create-market")
    before = db_counts()
    setup = len(calls(sim))
    # when
    response = sw_writer.post(activate_path(sw_writer, active_brand), {"brandDomain": "a.example"})
    # then
    body = assert_error(response, 409, "semrush_provisioning_in_progress")
    assert body["details"] == {"jobId": None}
    assert db_counts() == before
    assert calls(sim)[setup:] == []


def test_activate_with_the_parent_as_pointer_is_409(sw_writer, sim):
    # given
    brand = BrandFactory(organization=sw_writer.org, semrush_sub_workspace_id=sim.parent_id)
    # when
    response = sw_writer.post(activate_path(sw_writer, brand), {"brandDomain": "acme.example"})
    # then
    assert_error(response, 409, "workspaceMisconfigured", forbidden=foreign_ids(sim))
    assert calls(sim) == []
    assert db_counts()["attempts"] == 0


def test_activate_without_semrush_configuration_is_503_and_leaves_no_lease(
    sw_writer, sim, active_brand, settings
):
    # given
    settings.SEMRUSH_BASE_URL = ""
    # when
    response = sw_writer.post(activate_path(sw_writer, active_brand), {"brandDomain": "a.example"})
    # then the brand is not left leased to a pending attempt
    assert_error(response, 503, "configurationError")
    assert ProvisioningAttempt.objects.filter(status="pending").count() == 0


def test_c_without_workspace_creates_settles_then_creates_markets(sw_writer, sim):
    # given an active brand with no workspace yet
    brand = BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        base_url="https://acme.example",
        semrush_sub_workspace_id=None,
    )
    # when
    response = sw_writer.post(activate_path(sw_writer, brand), {"brandDomain": "acme.example"})
    # then the workspace is created, polled until ready, recorded, and the market made in it
    assert response.status_code == 200, response.json()
    [workspace] = sim.state()["workspaces"]
    [project] = sim.state()["projects"]
    ws, pid = workspace["id"], project["id"]
    made = calls(sim)
    reads = [c for c in made if c == status_read(ws)]
    assert len(reads) >= 1
    assert made == [
        family(sim.parent_id),
        create_child(sim.parent_id),
        *reads,
        languages(),
        list_projects(ws),
        create_project(ws),
        set_tracked_url(ws, pid),
        publish(ws, pid),
        read_project(ws, pid),
    ]
    brand.refresh_from_db()
    assert brand.semrush_sub_workspace_id == ws
    assert response.json()["markets"][0]["body"]["workspaceId"] == ws


def test_c_for_a_flat_brand_creates_markets_in_the_parent(db, sim):
    # given a flat org's active brand
    org = OrganizationFactory(
        serenity_enabled=True,
        semrush_parent_workspace_id=sim.parent_id,
        workspace_mode=WorkspaceMode.FLAT,
    )
    caller = make_caller(org, Role.WRITER)
    brand = BrandFactory(organization=org, semrush_sub_workspace_id=None)
    # when
    response = caller.post(activate_path(caller, brand), {"brandDomain": "acme.example"})
    # then no workspace and no attempt: the project lives in the parent
    assert response.status_code == 200, response.json()
    [project] = sim.state()["projects"]
    assert project["workspaceId"] == sim.parent_id
    assert sim.state()["workspaces"] == []
    assert not [c for c in calls(sim) if "/status" in c[1] or "/family" in c[1]]
    assert ProvisioningAttempt.objects.count() == 0


@pytest.mark.parametrize("raw", ["[]", "null", '"x"', "[{}]", "{bad"])
def test_a_body_that_is_not_a_json_object_is_400(sw_writer, sim, active_brand, raw):
    # given
    setup = len(calls(sim))
    # when
    response = sw_writer.client.post(
        activate_path(sw_writer, active_brand), data=raw, content_type="application/json"
    )
    # then
    assert_error(response, 400, "invalidRequest")
    assert calls(sim)[setup:] == []
    assert db_counts()["attempts"] == 0


def test_an_empty_body_is_valid(sw_writer, sim, active_brand):
    # when the request has no body at all, with a JSON content type
    response = sw_writer.client.post(
        activate_path(sw_writer, active_brand), data="", content_type="application/json"
    )
    # then it is branch B
    assert response.status_code == 200, response.json()


def test_a_form_body_is_415(sw_writer, sim, active_brand):
    # when
    response = sw_writer.client.post(
        activate_path(sw_writer, active_brand),
        data="brandDomain=acme.example",
        content_type="application/x-www-form-urlencoded",
    )
    # then
    assert_error(response, 415, "unsupportedMediaType")
    assert db_counts()["attempts"] == 0


def test_fifty_distinct_markets_pass_validation(sw_writer, sim, workspace):
    # given a pending brand with its workspace (branch A ignores markets once they are valid)
    import pycountry

    brand = BrandFactory(
        organization=sw_writer.org, status="pending", semrush_sub_workspace_id=workspace
    )
    countries = [c.alpha_2 for c in pycountry.countries][:50]
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        activate_path(sw_writer, brand),
        {"markets": [{"market": code, "languageCode": "en"} for code in countries]},
    )
    # then
    assert response.status_code == 200, response.json()
    # Only the status read that confirms the pointer (SPEC §10.2).
    assert calls(sim)[setup:] == [status_read(workspace)]


def test_activate_in_an_org_without_parent_is_404_no_parent_workspace(db, sim):
    # given a Serenity-enabled org with no parent workspace
    org = OrganizationFactory(serenity_enabled=True, semrush_parent_workspace_id=None)
    caller = make_caller(org, Role.WRITER)
    brand = BrandFactory(organization=org, status="pending", semrush_sub_workspace_id=None)
    # when
    response = caller.post(activate_path(caller, brand))
    # then
    assert_error(response, 404, "noParentWorkspace")
    assert calls(sim) == []
    assert db_counts()["attempts"] == 0
