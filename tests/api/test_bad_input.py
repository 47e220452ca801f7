"""Bad input never answers 500, and bodies are read on every route (SPEC §10.2)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from jobs.models import AsyncJob
from provisioning.models import ProvisioningAttempt
from serenity.models import Brand
from tests.factories import BrandFactory, MarketFactory
from tests.support import assert_error, calls, sim_create_workspace


def b_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}"


@pytest.fixture
def brand(sw_writer, sim) -> Brand:  # type: ignore[no-untyped-def]
    workspace = sim_create_workspace(sim, "Acme")
    return BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="active",
        base_url="https://acme.example",
        semrush_sub_workspace_id=workspace,
    )


def raw_post(caller, path: str, body: bytes, content_type: str):  # type: ignore[no-untyped-def]
    return caller.client.generic("POST", path, body, content_type=content_type)


def unchanged(brand: Brand) -> None:
    fresh = Brand.objects.get(pk=brand.pk)
    assert fresh.status == brand.status
    assert fresh.semrush_sub_workspace_id == brand.semrush_sub_workspace_id
    assert ProvisioningAttempt.objects.filter(brand=brand).count() == 0


# --- Deactivate and cancel read their body ---------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"deactivate please", "text/plain", 415, "unsupportedMediaType"),
        (b"{not json", "application/json", 400, "invalidRequest"),
        (b"[1, 2]", "application/json", 400, "invalidRequest"),
        (b'"text"', "application/json", 400, "invalidRequest"),
        (b"null", "application/json", 400, "invalidRequest"),
    ],
)
def test_deactivate_with_a_bad_body_does_nothing(
    sw_writer, sim, brand, body, content_type, status, code
):
    # given
    setup = len(calls(sim))
    # when
    response = raw_post(
        sw_writer, f"{b_path(sw_writer, brand)}/serenity/deactivate", body, content_type
    )
    # then
    assert_error(response, status, code)
    unchanged(brand)
    assert calls(sim)[setup:] == []


def test_deactivate_with_an_empty_body_of_any_type_is_fine(sw_writer, sim, brand):
    # when
    response = raw_post(
        sw_writer, f"{b_path(sw_writer, brand)}/serenity/deactivate", b"", "text/plain"
    )
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {"brandId": str(brand.id), "status": "pending"}


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"cancel", "text/plain", 415, "unsupportedMediaType"),
        (b"[]", "application/json", 400, "invalidRequest"),
    ],
)
def test_cancel_with_a_bad_body_does_nothing(
    sw_writer, sim, brand, body, content_type, status, code
):
    # given an in-flight async market create
    started = sw_writer.post(
        f"{b_path(sw_writer, brand)}/serenity/markets",
        {"market": "US", "languageCode": "en", "async": True},
    )
    assert started.status_code == 202, started.json()
    job_id = started.json()["jobId"]
    # when
    response = raw_post(
        sw_writer, f"{b_path(sw_writer, brand)}/serenity/jobs/{job_id}/cancel", body, content_type
    )
    # then
    assert_error(response, status, code)
    assert AsyncJob.objects.get(pk=job_id).status == "IN_PROGRESS"
    assert ProvisioningAttempt.objects.get(brand=brand).status == "pending"


# --- Depth, size, control characters ---------------------------------------------------------


def nested(depth: int) -> bytes:
    return b'{"name": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


@pytest.mark.parametrize("depth", [65, 5000])
def test_json_nested_deeper_than_64_levels_is_400(sw_writer, sim, depth):
    # when
    response = raw_post(
        sw_writer, f"/v2/orgs/{sw_writer.org.id}/brands", nested(depth), "application/json"
    )
    # then
    body = assert_error(response, 400, "invalidRequest")
    assert body["message"] == "The body nests JSON deeper than 64 levels."
    assert Brand.objects.count() == 0


def test_json_nested_64_levels_reaches_the_route(sw_writer, sim):
    # when 64 levels (the object and 63 arrays): the route's own validation answers
    response = raw_post(
        sw_writer, f"/v2/orgs/{sw_writer.org.id}/brands", nested(64), "application/json"
    )
    # then
    body = assert_error(response, 400, "invalidRequest")
    assert body["details"] == {"field": "name"}


def test_a_body_over_the_limit_is_413_and_nothing_is_done(sw_writer, sim, brand, settings):
    # given
    settings.SERENITY_MAX_BODY_BYTES = 1000
    body = json.dumps({"padding": "x" * 1000}).encode()
    # when
    response = raw_post(
        sw_writer, f"{b_path(sw_writer, brand)}/serenity/deactivate", body, "application/json"
    )
    # then
    body_json = assert_error(response, 413, "requestTooLarge")
    assert body_json == {
        "error": "requestTooLarge",
        "message": "The body is larger than 1000 bytes.",
    }
    unchanged(brand)


def test_the_default_body_limit_is_one_mebibyte(sw_writer, sim):
    # when 21 MB arrive on brand create
    response = raw_post(
        sw_writer,
        f"/v2/orgs/{sw_writer.org.id}/brands",
        json.dumps({"name": "x" * (21 * 1024 * 1024)}).encode(),
        "application/json",
    )
    # then
    assert_error(response, 413, "requestTooLarge")
    assert Brand.objects.count() == 0


@pytest.mark.parametrize("segment", ["en%00", "e%0An", "%7F"])
def test_a_control_character_in_a_path_segment_is_400(sw_writer, sim, brand, segment):
    # given a live market
    MarketFactory(brand=brand, geo_target_id=2840, language_code="en", semrush_project_id="p-1")
    # when
    response = sw_writer.get(f"{b_path(sw_writer, brand)}/serenity/markets/2840/{segment}")
    # then
    body = assert_error(response, 400, "invalidRequest")
    assert body == {"error": "invalidRequest", "message": "The path contains a control character."}


def test_a_nul_in_a_delete_path_is_400_and_nothing_is_deleted(sw_writer, sim, brand):
    # given
    market = MarketFactory(
        brand=brand, geo_target_id=2840, language_code="en", semrush_project_id="p-1"
    )
    setup = len(calls(sim))
    # when
    response = sw_writer.delete(f"{b_path(sw_writer, brand)}/serenity/markets/2840/en%00")
    # then
    assert_error(response, 400, "invalidRequest")
    market.refresh_from_db()
    assert market.deleted_at is None
    assert calls(sim)[setup:] == []


# --- Unknown routes ---------------------------------------------------------------------------


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_unknown_routes_answer_the_envelope_in_every_mode(db, settings, debug, method):
    # given
    settings.DEBUG = debug
    client = Client()
    # when
    response = getattr(client, method)(f"/v2/nowhere/{uuid.uuid4()}")
    # then
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "notFound", "message": "Not found."}
