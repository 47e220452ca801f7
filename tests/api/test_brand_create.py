"""`POST /v2/orgs/{orgId}/brands`, synchronous (SPEC §4.1), against the simulator over HTTP."""

from __future__ import annotations

import pytest

from jobs.models import AsyncJob
from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market, Role, WorkspaceMode
from tests.conftest import make_caller
from tests.factories import BrandFactory, OrganizationFactory
from tests.support import (
    assert_clean,
    assert_error,
    assert_settle_reads,
    calls,
    create_child,
    create_project,
    db_counts,
    delete_project,
    family,
    foreign_ids,
    languages,
    publish,
    read_project,
    set_tracked_url,
    stamps,
    status_read,
    sync_chains,
)


def brands_path(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands"


def brand_body(brand: Brand, **values: object) -> dict[str, object]:
    """The brand payload with the row's id and timestamps; every other field is given."""
    return {
        "id": str(brand.id),
        "organizationId": str(brand.organization_id),
        **values,
        "drift": None,
        **stamps(brand),
    }


@pytest.fixture
def plain_writer(db, sim):  # type: ignore[no-untyped-def]
    """A writer of an org that is not a Serenity org (no flag, no parent)."""
    org = OrganizationFactory(serenity_enabled=False, semrush_parent_workspace_id=None)
    return make_caller(org, Role.WRITER)


@pytest.fixture
def flat_writer(db, sim):  # type: ignore[no-untyped-def]
    org = OrganizationFactory(
        serenity_enabled=True,
        semrush_parent_workspace_id=sim.parent_id,
        workspace_mode=WorkspaceMode.FLAT,
    )
    return make_caller(org, Role.WRITER)


# --- Plain rows -----------------------------------------------------------------------------


def test_non_serenity_org_gets_a_plain_brand_row(plain_writer, sim):
    # given an org that is not a Serenity org
    # when a brand is created (async is ignored where nothing is provisioned)
    response = plain_writer.post(
        brands_path(plain_writer),
        {
            "name": "  Acme  ",
            "baseUrl": "https://acme.example",
            "urls": ["https://acme.example/shop"],
            "aliases": ["ACME Corp"],
            "async": True,
        },
    )
    # then a plain active row, no attempt, no job, no upstream call
    assert response.status_code == 201, response.json()
    brand = Brand.objects.get()
    assert response.json() == brand_body(
        brand,
        name="Acme",
        status="active",
        baseUrl="https://acme.example",
        urls=["https://acme.example/shop"],
        aliases=["ACME Corp"],
        serenityEnabled=None,
        semrushSubWorkspaceId=None,
        semrushProvisioningStatus=None,
        semrushProvisioningError=None,
    )
    assert db_counts() == {"brands": 1, "markets": 0, "attempts": 0, "jobs": 0, "prompts": 0}
    assert calls(sim) == []


def test_non_serenity_org_without_base_url_stores_a_pending_brand(plain_writer, sim):
    # when
    response = plain_writer.post(brands_path(plain_writer), {"name": "Acme"})
    # then
    assert response.status_code == 201, response.json()
    assert response.json()["status"] == "pending"
    assert calls(sim) == []


def test_non_serenity_org_refuses_a_semrush_market(plain_writer, sim):
    # when
    response = plain_writer.post(
        brands_path(plain_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    # then
    assert_error(response, 403, "serenityNotEnabled")
    assert db_counts()["brands"] == 0
    assert calls(sim) == []


def test_draft_is_a_plain_row_without_provisioning_even_with_async(sw_writer, sim):
    # given a Serenity org; when a draft is created with a baseUrl and async
    response = sw_writer.post(
        brands_path(sw_writer),
        {"name": "Acme", "status": "pending", "baseUrl": "https://acme.example", "async": True},
    )
    # then 201, a pending plain row: nothing provisioned, nothing enqueued
    assert response.status_code == 201, response.json()
    brand = Brand.objects.get()
    assert response.json() == brand_body(
        brand,
        name="Acme",
        status="pending",
        baseUrl="https://acme.example",
        urls=[],
        aliases=[],
        serenityEnabled=None,
        semrushSubWorkspaceId=None,
        semrushProvisioningStatus=None,
        semrushProvisioningError=None,
    )
    assert db_counts() == {"brands": 1, "markets": 0, "attempts": 0, "jobs": 0, "prompts": 0}
    assert calls(sim) == []


def test_draft_with_a_market_is_invalid(sw_writer, sim):
    # when
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "status": "pending",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    # then
    assert_error(response, 400, "invalidRequest")
    assert db_counts()["brands"] == 0
    assert calls(sim) == []


@pytest.mark.parametrize(
    "body",
    [
        {"name": "Acme", "status": "active"},
        {"name": "Acme", "semrushMarket": {"market": "US", "languageCode": "en"}},
        {"name": "Acme", "status": "active", "baseUrl": None},
    ],
    ids=["explicit-active", "with-market", "null-base-url"],
)
def test_base_url_is_required(sw_writer, sim, body):
    # when
    response = sw_writer.post(brands_path(sw_writer), body)
    # then
    assert_error(response, 400, "baseUrlRequired")
    assert db_counts()["brands"] == 0
    assert calls(sim) == []


@pytest.mark.parametrize("name", ["Acme", "acme", "  ACME  ", "\tAcMe "])
def test_duplicate_name_is_409_brand_exists_trimmed_and_case_insensitive(sw_writer, sim, name):
    # given a brand named Acme
    BrandFactory(organization=sw_writer.org, name="Acme")
    before = db_counts()
    # when another brand with the same name (after trimming, ignoring case) is created
    response = sw_writer.post(
        brands_path(sw_writer), {"name": name, "baseUrl": "https://acme.example"}
    )
    # then 409 without touching Semrush
    assert_error(response, 409, "brandExists")
    assert db_counts() == before
    assert calls(sim) == []


def test_a_deleted_brand_frees_its_name(plain_writer, sim):
    # given a deleted brand named Acme
    BrandFactory(organization=plain_writer.org, name="Acme", status="deleted")
    # when
    response = plain_writer.post(brands_path(plain_writer), {"name": "acme"})
    # then
    assert response.status_code == 201, response.json()


# --- Malformed bodies ----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["true", 1, 0, None, {}, []], ids=repr)
def test_malformed_async_is_400_and_nothing_is_written(sw_writer, sim, value):
    # when
    response = sw_writer.post(
        brands_path(sw_writer),
        {"name": "Acme", "baseUrl": "https://acme.example", "async": value},
    )
    # then
    body = assert_error(response, 400, "invalidRequest")
    assert body["message"].startswith("async:")
    assert db_counts() == {"brands": 0, "markets": 0, "attempts": 0, "jobs": 0, "prompts": 0}
    assert calls(sim) == []


def test_body_that_is_not_json_is_400(sw_writer, sim):
    # when
    response = sw_writer.client.post(
        brands_path(sw_writer), data='{"name": "Acme",', content_type="application/json"
    )
    # then
    assert_error(response, 400, "invalidRequest")
    assert db_counts()["brands"] == 0


@pytest.mark.parametrize("raw", ['["Acme"]', '"Acme"', "42", "null"])
def test_body_that_is_not_a_json_object_is_400(sw_writer, sim, raw):
    # when
    response = sw_writer.client.post(
        brands_path(sw_writer), data=raw, content_type="application/json"
    )
    # then
    assert_error(response, 400, "invalidRequest")
    assert db_counts()["brands"] == 0


def test_non_json_content_type_is_415(sw_writer, sim):
    # when
    response = sw_writer.client.post(
        brands_path(sw_writer), data="name=Acme", content_type="application/x-www-form-urlencoded"
    )
    # then
    assert_error(response, 415, "unsupportedMediaType")
    assert db_counts()["brands"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": 42}, "name"),
        ({"name": "Acme", "baseUrl": "acme.example"}, "baseUrl"),
        ({"name": "Acme", "baseUrl": "ftp://acme.example"}, "baseUrl"),
        ({"name": "Acme", "status": "deleted"}, "status"),
        ({"name": "Acme", "urls": "https://acme.example"}, "urls"),
        ({"name": "Acme", "aliases": [1]}, "aliases"),
        (
            {"name": "Acme", "baseUrl": "https://a.example", "semrushMarket": {"market": "US"}},
            "semrushMarket.languageCode",
        ),
        ({"name": "Acme", "baseUrl": "https://a.example", "semrushMarket": "US"}, "semrushMarket"),
    ],
    ids=lambda v: repr(v)[:60],
)
def test_malformed_fields_are_400_naming_the_field(sw_writer, sim, body, field):
    # when
    response = sw_writer.post(brands_path(sw_writer), body)
    # then
    message = assert_error(response, 400, "invalidRequest")["message"]
    assert message.startswith(f"{field}"), message
    assert db_counts()["brands"] == 0
    assert calls(sim) == []


@pytest.mark.parametrize(
    ("market", "language", "code"),
    [
        ("USA", "en", "invalidRequest"),
        ("U1", "en", "invalidRequest"),
        ("XK", "en", "unknownMarket"),
        ("US", "english", "invalidRequest"),
        ("US", "zz", "unknownLanguage"),
    ],
)
def test_bad_market_in_brand_create_is_400_before_anything(sw_writer, sim, market, language, code):
    # when
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": market, "languageCode": language},
        },
    )
    # then
    assert_error(response, 400, code)
    assert db_counts()["brands"] == 0
    assert calls(sim) == []


def test_language_missing_from_the_catalogue_is_400_before_any_workspace(sw_writer, sim):
    # given Greek: a well-formed ISO 639 code that the upstream catalogue does not list
    # when
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "GR", "languageCode": "el"},
        },
    )
    # then only the catalogue was read; no workspace was made, nothing is left behind
    assert_error(response, 400, "unknownLanguage", forbidden=foreign_ids(sim))
    assert calls(sim) == [languages()]
    assert db_counts() == {"brands": 0, "markets": 0, "attempts": 0, "jobs": 0, "prompts": 0}
    assert sim.state()["workspaces"] == []


# --- Sub-workspace orgs ---------------------------------------------------------------------


def test_bare_create_makes_one_child_and_settles_it(sw_writer, sim):
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://acme.example"}
    )
    # then the workspace is created, settled and recorded as the pointer (promoted once ready,
    # as a chain promotes it: SPEC §12.3)
    assert response.status_code == 201, response.json()
    [workspace] = sim.state()["workspaces"]
    assert workspace["title"] == "Acme"
    assert workspace["parentId"] == sim.parent_id
    brand = Brand.objects.get()
    assert brand.semrush_sub_workspace_id == workspace["id"]
    assert response.json() == brand_body(
        brand,
        name="Acme",
        status="active",
        baseUrl="https://acme.example",
        urls=[],
        aliases=[],
        serenityEnabled=None,
        semrushSubWorkspaceId=workspace["id"],
        semrushProvisioningStatus="ready",
        semrushProvisioningError=None,
    )
    made = calls(sim)
    assert made[:2] == [family(sim.parent_id), create_child(sim.parent_id)]
    assert_settle_reads(made[2:], workspace["id"])
    [attempt] = ProvisioningAttempt.objects.all()
    assert (attempt.status, attempt.started_by) == ("ready", "create-brand")
    # its chain, run at once (SPEC §13.5)
    assert attempt.job_id == AsyncJob.objects.get(root__isnull=True, mode="sync").id
    assert sync_chains() == [("sync", "COMPLETED")]
    assert_clean(response, forbidden=foreign_ids(sim, own=[workspace["id"]]))


def test_bare_create_without_base_url_provisions_a_pending_brand(sw_writer, sim):
    # when
    response = sw_writer.post(brands_path(sw_writer), {"name": "Acme"})
    # then
    assert response.status_code == 201, response.json()
    [workspace] = sim.state()["workspaces"]
    assert response.json()["status"] == "pending"
    assert response.json()["semrushSubWorkspaceId"] == workspace["id"]
    made = calls(sim)
    assert made[:2] == [family(sim.parent_id), create_child(sim.parent_id)]
    assert_settle_reads(made[2:], workspace["id"])


def test_create_with_market_settles_creates_and_publishes(sw_writer, sim):
    # given workspaces that are ready at once (one status read)
    sim.configure({"settleSeconds": 0})
    # when
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://www.acme.example/",
            "aliases": ["Acme Corp"],
            "semrushMarket": {"market": "us", "languageCode": "EN"},
        },
    )
    # then
    assert response.status_code == 201, response.json()
    [workspace] = sim.state()["workspaces"]
    [project] = sim.state()["projects"]
    ws, pid = workspace["id"], project["id"]
    assert project == {
        "id": pid,
        "workspaceId": ws,
        "name": "US-en",
        "locationId": 2840,
        "language": "en",
        "publishStatus": "live",
        "primaryUrl": "https://www.acme.example/",
    }
    brand = Brand.objects.get()
    market = Market.objects.get()
    assert response.json() == brand_body(
        brand,
        name="Acme",
        status="active",
        baseUrl="https://www.acme.example/",
        urls=[],
        aliases=["Acme Corp"],
        serenityEnabled=None,
        semrushSubWorkspaceId=ws,
        semrushProvisioningStatus="ready",
        semrushProvisioningError=None,
        market={
            "brandId": str(brand.id),
            "market": "US",
            "geoTargetId": 2840,
            "languageCode": "en",
            "name": "US-en",
            "status": "live",
            "semrushProjectId": pid,
            "workspaceId": ws,
            "publishError": None,
            "drift": None,
            **stamps(market),
        },
    )
    assert calls(sim) == [
        languages(),
        family(sim.parent_id),
        create_child(sim.parent_id),
        status_read(ws),
        # (no listing of the workspace it has just created: it holds no project yet)
        create_project(ws),
        set_tracked_url(ws, pid),
        publish(ws, pid),
        read_project(ws, pid),
    ]
    assert [a.status for a in ProvisioningAttempt.objects.all()] == ["ready"]
    assert_clean(response, forbidden=foreign_ids(sim, own=[ws, pid]))


def test_create_with_market_whose_publish_fails_empties_the_new_workspace(sw_writer, sim):
    # given publish fails upstream (a POST: never replayed)
    sim.configure({"settleSeconds": 0})
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
        brands_path(sw_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    # then 502, the workspace this request created is emptied (its shell stays), no row is left
    [workspace] = sim.state()["workspaces"]
    assert_error(response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim))
    assert sim.state()["projects"] == []
    made = [c for c in calls(sim) if c[0] == "POST" and c[1].endswith("/projects")]
    assert made == [create_project(workspace["id"])]
    assert [c for c in calls(sim) if c[0] == "DELETE"] != []
    assert all(
        c[1].startswith(delete_project(workspace["id"], "")[1])
        for c in calls(sim)
        if c[0] == "DELETE"
    )
    # (its chain's rows stay, ended with the market's failed answer, as async work's: §13.5)
    assert db_counts() == {"brands": 0, "markets": 0, "attempts": 0, "jobs": 2, "prompts": 0}
    assert sync_chains() == [("sync", "COMPLETED")]


def test_failed_child_create_leaves_nothing(sw_writer, sim):
    # given creating a child fails upstream without creating anything
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/child$",
            "status": 500,
            "body": {"message": "internal server error"},
        }
    )
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://acme.example"}
    )
    # then the ambiguous POST is reconciled against the family (no match), 502, nothing written
    assert_error(response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim))
    assert calls(sim) == [
        family(sim.parent_id),
        create_child(sim.parent_id),
        family(sim.parent_id),
    ]
    assert db_counts() == {"brands": 0, "markets": 0, "attempts": 0, "jobs": 1, "prompts": 0}
    assert sync_chains() == [("sync", "FAILED")]
    # and the name is free again
    again = sw_writer.post(brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"})
    assert again.status_code == 201, again.json()


# --- Flat orgs ------------------------------------------------------------------------------


def test_flat_org_bare_create_is_a_plain_row(flat_writer, sim):
    # when
    response = flat_writer.post(
        brands_path(flat_writer), {"name": "Acme", "baseUrl": "https://acme.example"}
    )
    # then
    assert response.status_code == 201, response.json()
    assert response.json()["semrushSubWorkspaceId"] is None
    assert response.json()["semrushProvisioningStatus"] is None
    assert Brand.objects.get().workspace_mode == "flat"
    assert db_counts()["attempts"] == 0
    assert calls(sim) == []


def test_flat_org_with_market_creates_the_project_in_the_parent(flat_writer, sim):
    # when
    response = flat_writer.post(
        brands_path(flat_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "DE", "languageCode": "de", "name": "Germany"},
        },
    )
    # then the market lives in the org's parent; no sub-workspace exists
    assert response.status_code == 201, response.json()
    parent = sim.parent_id
    [project] = sim.state()["projects"]
    pid = project["id"]
    assert sim.state()["workspaces"] == []
    assert (project["workspaceId"], project["name"], project["locationId"]) == (
        parent,
        "Germany",
        2276,
    )
    brand = Brand.objects.get()
    market = Market.objects.get()
    assert response.json() == brand_body(
        brand,
        name="Acme",
        status="active",
        baseUrl="https://acme.example",
        urls=[],
        aliases=[],
        serenityEnabled=None,
        semrushSubWorkspaceId=None,
        semrushProvisioningStatus=None,
        semrushProvisioningError=None,
        market={
            "brandId": str(brand.id),
            "market": "DE",
            "geoTargetId": 2276,
            "languageCode": "de",
            "name": "Germany",
            "status": "live",
            "semrushProjectId": pid,
            "workspaceId": parent,
            "publishError": None,
            "drift": None,
            **stamps(market),
        },
    )
    assert calls(sim) == [
        languages(),
        create_project(parent),
        set_tracked_url(parent, pid),
        publish(parent, pid),
        read_project(parent, pid),
    ]
    assert db_counts()["attempts"] == 0


def test_flat_org_market_failure_deletes_the_project_and_the_row(flat_writer, sim):
    # given publish fails
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/publish$",
            "status": 503,
            "body": {"message": "service unavailable"},
        }
    )
    # when
    response = flat_writer.post(
        brands_path(flat_writer),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "DE", "languageCode": "de"},
        },
    )
    # then
    assert_error(response, 502, "serenityUpstreamError", forbidden=foreign_ids(sim))
    assert sim.state()["projects"] == []
    assert db_counts() == {"brands": 0, "markets": 0, "attempts": 0, "jobs": 1, "prompts": 0}
    assert sync_chains() == [("sync", "COMPLETED")]


@pytest.mark.parametrize("mode", ["subworkspace", "flat"])
def test_missing_semrush_configuration_is_503_and_leaves_no_row(db, sim, settings, mode):
    # given a Serenity org, and no Semrush base URL configured
    org = OrganizationFactory(
        serenity_enabled=True, semrush_parent_workspace_id=sim.parent_id, workspace_mode=mode
    )
    caller = make_caller(org, Role.WRITER)
    settings.SEMRUSH_BASE_URL = ""
    # when
    response = caller.post(
        brands_path(caller),
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    # then
    assert_error(response, 503, "configurationError")
    assert db_counts() == {"brands": 0, "markets": 0, "attempts": 0, "jobs": 0, "prompts": 0}
    assert calls(sim) == []
