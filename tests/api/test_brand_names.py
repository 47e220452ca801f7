"""Brand names (SPEC §10.2): trimmed, no control or bidi-override characters, and unique on
their NFKC-normalised, case-folded form, in the database."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from serenity.models import Brand
from serenity.names import brand_name_key
from tests.factories import BrandFactory
from tests.support import assert_error, calls

FULL_WIDTH_ACME = "\uff21\uff23\uff2d\uff25"


def brands_path(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands"


@pytest.mark.parametrize(
    "name",
    [
        "Ac\nme",
        "Ac\tme",
        "Acme\x7f corp",
        "Ac\x85me",
        "emcA\u202e",
        "Ac\u202ame",
        "Ac\u2066me\u2069",
    ],
)
def test_a_name_with_a_control_or_bidi_character_is_400_naming_name(sw_writer, sim, name):
    # given
    setup = len(calls(sim))
    # when
    response = sw_writer.post(brands_path(sw_writer), {"name": name, "status": "pending"})
    # then
    body = assert_error(response, 400, "invalidRequest")
    assert body == {
        "error": "invalidRequest",
        "message": (
            "name: must not contain control, bidirectional-override or invisible characters."
        ),
        "details": {"field": "name"},
    }
    assert Brand.objects.count() == 0
    assert calls(sim)[setup:] == []


def test_a_name_is_stored_trimmed(sw_writer, sim):
    # when
    response = sw_writer.post(brands_path(sw_writer), {"name": "  Acme  ", "status": "pending"})
    # then
    assert response.status_code == 201, response.json()
    assert response.json()["name"] == "Acme"
    assert Brand.objects.get().name == "Acme"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "look_alike", [FULL_WIDTH_ACME, "acme", " ACME ", "\uff21\uff43\uff4d\uff45"]
)
def test_a_look_alike_of_an_existing_name_is_409_brand_exists(sw_writer, sim, look_alike):
    # given
    existing = BrandFactory(organization=sw_writer.org, name="Acme", status="pending")
    # when
    response = sw_writer.post(brands_path(sw_writer), {"name": look_alike, "status": "pending"})
    # then
    assert_error(response, 409, "brandExists")
    assert list(Brand.objects.values_list("pk", flat=True)) == [existing.pk]


def test_a_deleted_brand_does_not_hold_its_name(sw_writer, sim):
    # given
    BrandFactory(organization=sw_writer.org, name="Acme", status="deleted")
    # when
    response = sw_writer.post(
        brands_path(sw_writer), {"name": FULL_WIDTH_ACME, "status": "pending"}
    )
    # then
    assert response.status_code == 201, response.json()


def test_the_database_refuses_a_look_alike_written_past_the_api(sw_writer, sim):
    # given
    BrandFactory(organization=sw_writer.org, name="Straße", status="active")
    # when / then: the constraint itself, not a Python check, refuses the second row
    with pytest.raises(IntegrityError), transaction.atomic():
        BrandFactory(organization=sw_writer.org, name="STRASSE", status="active")


def test_name_key_is_nfkc_and_case_folded():
    assert brand_name_key(f" {FULL_WIDTH_ACME} ") == "acme"
    assert brand_name_key("Straße") == brand_name_key("STRASSE") == "strasse"
    assert brand_name_key("\ufb01ne") == "fine"
