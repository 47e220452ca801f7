"""One validator for names (SPEC §11.4): a brand's `name`, its `aliases[]` and a market's
`brandNames[]` refuse control characters, bidirectional overrides and invisible
(default-ignorable) code points, through the API and the admin alike; names that differ only
by whitespace runs are the same name."""

from __future__ import annotations

import importlib
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from serenity.models import Brand
from tests.factories import BrandFactory
from tests.support import assert_error, calls

BAD_NAMES = ["Acme\u202e", "Ac\x07me", "Ac\u200bme", "Acme\ufeff", "Ac\u2060me", "Acme\U000e0041"]
MESSAGE = "must not contain control, bidirectional-override or invisible characters."


def brands_path(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands"


@pytest.mark.parametrize("bad", BAD_NAMES, ids=ascii)
def test_the_api_refuses_a_bad_name_or_alias(sw_writer, sim, bad):
    # given
    setup = len(calls(sim))
    # when
    named = sw_writer.post(brands_path(sw_writer), {"name": bad, "status": "pending"})
    aliased = sw_writer.post(
        brands_path(sw_writer), {"name": "Acme", "status": "pending", "aliases": ["ok", bad]}
    )
    # then
    assert assert_error(named, 400, "invalidRequest")["message"] == f"name: {MESSAGE}"
    assert_error(aliased, 400, "invalidRequest")
    assert "aliases" in aliased.json()["message"]
    assert MESSAGE in aliased.json()["message"]
    assert Brand.objects.count() == 0
    assert calls(sim)[setup:] == []


@pytest.mark.parametrize("bad", BAD_NAMES, ids=ascii)
def test_the_api_refuses_a_bad_alias_on_update_and_a_bad_brand_name_of_a_market(
    sw_writer, sim, active_brand, bad
):
    # given
    path = f"{brands_path(sw_writer)}/{active_brand.id}"
    setup = len(calls(sim))
    # when
    updated = sw_writer.patch(path, {"aliases": [bad]})
    market = sw_writer.post(
        f"{path}/serenity/markets",
        {"market": "US", "languageCode": "en", "brandNames": ["Acme", bad]},
    )
    # then
    assert_error(updated, 400, "invalidRequest")
    assert_error(market, 400, "invalidRequest")
    assert "brandNames" in market.json()["message"]
    active_brand.refresh_from_db()
    assert bad not in active_brand.aliases
    assert calls(sim)[setup:] == []


@pytest.mark.django_db(transaction=True)
def test_names_differing_only_by_whitespace_runs_are_the_same_brand(sw_writer, sim):
    # given
    BrandFactory(organization=sw_writer.org, name="Acme Inc", status="pending")
    # when
    response = sw_writer.post(brands_path(sw_writer), {"name": "Acme   Inc", "status": "pending"})
    # then
    assert_error(response, 409, "brandExists")
    assert Brand.objects.count() == 1


@pytest.fixture
def admin_client(db) -> Client:  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _brand_form(brand: Brand, **fields: str) -> dict[str, str]:
    return {
        "name": brand.name,
        "base_url": "https://acme.example",
        "urls": "[]",
        "aliases": "[]",
        "serenity_enabled": "unknown",
        "markets-TOTAL_FORMS": "0",
        "markets-INITIAL_FORMS": "0",
        "provisioning_attempts-TOTAL_FORMS": "0",
        "provisioning_attempts-INITIAL_FORMS": "0",
        **fields,
    }


@pytest.mark.parametrize("bad", BAD_NAMES, ids=ascii)
@pytest.mark.parametrize("field", ["name", "aliases"])
def test_the_admin_cannot_save_what_the_api_refuses(admin_client, bad, field):
    # given
    brand = BrandFactory(name="Acme", aliases=["Acme Corp"])
    value = bad if field == "name" else json.dumps(["Acme Corp", bad])
    # when
    response = admin_client.post(
        f"/admin/serenity/brand/{brand.id}/change/", _brand_form(brand, **{field: value})
    )
    # then the form is shown again with the error, and nothing changed
    assert response.status_code == 200
    assert MESSAGE in response.content.decode()
    brand.refresh_from_db()
    assert (brand.name, brand.aliases) == ("Acme", ["Acme Corp"])


def test_the_admin_refuses_a_name_differing_only_by_whitespace(admin_client):
    # given
    existing = BrandFactory(name="Acme Inc")
    other = BrandFactory(organization=existing.organization, name="Other")
    # when
    response = admin_client.post(
        f"/admin/serenity/brand/{other.id}/change/", _brand_form(other, name="Acme  Inc")
    )
    # then
    assert response.status_code == 200
    assert "Another live brand of this organization has this name." in response.content.decode()
    other.refresh_from_db()
    assert other.name == "Other"


@pytest.mark.django_db
def test_the_data_migration_recomputes_existing_keys():
    # given rows whose key was computed by the earlier rule (whitespace runs kept)
    brand = BrandFactory(name="Acme  Inc")
    Brand.objects.filter(pk=brand.pk).update(name_key="acme  inc")
    migration = importlib.import_module(
        "serenity.migrations.0006_brand_name_validators_and_whitespace_key"
    )
    from django.apps import apps

    # when
    migration.recompute_name_keys(apps, None)
    # then
    assert Brand.objects.get(pk=brand.pk).name_key == "acme inc"


@pytest.mark.django_db
def test_the_data_migration_names_live_brands_that_would_collide():
    # given two live brands of one org that only whitespace told apart
    first = BrandFactory(name="Acme  Inc")
    Brand.objects.filter(pk=first.pk).update(name_key="acme  inc")
    second = BrandFactory(organization=first.organization, name="Acme Inc")
    migration = importlib.import_module(
        "serenity.migrations.0006_brand_name_validators_and_whitespace_key"
    )
    from django.apps import apps

    # when / then nothing is written, and both are named
    with pytest.raises(RuntimeError, match="now collide") as refused:
        migration.recompute_name_keys(apps, None)
    assert str(first.pk) in str(refused.value)
    assert str(second.pk) in str(refused.value)
    assert Brand.objects.get(pk=first.pk).name_key == "acme  inc"
