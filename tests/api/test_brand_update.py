"""`PATCH B`: update baseUrl, urls, aliases, serenityEnabled; no upstream call (SPEC §4)."""

from __future__ import annotations

import pytest

from serenity.models import Brand
from tests.factories import BrandFactory
from tests.support import assert_error, calls, db_counts, stamps


def brand_path(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}"


@pytest.fixture
def brand(sw_writer) -> Brand:  # type: ignore[no-untyped-def]
    return BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="active",
        base_url="https://acme.example",
        semrush_sub_workspace_id="ws-acme",
    )


def test_patch_updates_the_given_fields_only(sw_writer, sim, brand):
    # given a read-only member beside the writable ones: refused, naming it (SPEC §13.6)
    writable = {
        "baseUrl": "https://www.acme.example/",
        "urls": ["https://acme.example/shop"],
        "aliases": ["Acme Corp"],
        "serenityEnabled": False,
    }
    for member, value in (
        ("name", "Renamed"),
        ("semrushSubWorkspaceId", "ws-other"),
        ("status", "deleted"),
    ):
        refused = sw_writer.patch(brand_path(sw_writer, brand), {**writable, member: value})
        assert refused.status_code == 400, refused.json()
        assert refused.json()["details"] == {"field": member}
    # when
    response = sw_writer.patch(brand_path(sw_writer, brand), writable)
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "id": str(brand.id),
        "organizationId": str(sw_writer.org.id),
        "name": "Acme",
        "status": "active",
        "baseUrl": "https://www.acme.example/",
        "urls": ["https://acme.example/shop"],
        "aliases": ["Acme Corp"],
        "serenityEnabled": False,
        "semrushSubWorkspaceId": "ws-acme",
        "semrushProvisioningStatus": "ready",
        "semrushProvisioningError": None,
        "drift": None,
        **stamps(brand),
    }
    assert calls(sim) == []


def test_patch_back_to_inherit_and_partial(sw_writer, sim, brand):
    # given an override
    Brand.objects.filter(pk=brand.pk).update(serenity_enabled=False)
    # when only serenityEnabled is sent, as null
    response = sw_writer.patch(brand_path(sw_writer, brand), {"serenityEnabled": None})
    # then the other fields keep their values
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["serenityEnabled"], body["baseUrl"], body["aliases"]) == (
        None,
        "https://acme.example",
        [],
    )


@pytest.mark.parametrize(
    "body",
    [
        {"baseUrl": "acme.example"},
        {"baseUrl": 42},
        {"urls": "https://acme.example"},
        {"urls": ["not a url"]},
        {"aliases": [None]},
        {"serenityEnabled": "false"},
        {"serenityEnabled": 0},
    ],
    ids=repr,
)
def test_patch_with_a_bad_field_is_400_and_changes_nothing(sw_writer, sim, brand, body):
    # given
    before = Brand.objects.values().get(pk=brand.pk)
    # when
    response = sw_writer.patch(brand_path(sw_writer, brand), body)
    # then
    assert_error(response, 400, "invalidRequest")
    assert Brand.objects.values().get(pk=brand.pk) == before


@pytest.mark.parametrize("raw", ["[1]", '"x"', "{bad"])
def test_patch_with_a_body_that_is_not_a_json_object_is_400(sw_writer, sim, brand, raw):
    # when
    response = sw_writer.client.patch(
        brand_path(sw_writer, brand), data=raw, content_type="application/json"
    )
    # then
    assert_error(response, 400, "invalidRequest")


def test_patch_with_form_data_is_415(sw_writer, sim, brand):
    # when
    response = sw_writer.client.patch(
        brand_path(sw_writer, brand),
        data="aliases=x",
        content_type="application/x-www-form-urlencoded",
    )
    # then
    assert_error(response, 415, "unsupportedMediaType")
    assert db_counts()["brands"] == 1
