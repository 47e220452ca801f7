"""Property: arbitrary JSON values for every field of every route's body answer 400 or the
route's success, never a 500 (SPEC §10.2). Bounded examples, the Django test client, the real
database and the simulator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serenity.models import Brand
from tests.factories import BrandFactory
from tests.support import sim_create_workspace

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3)
    ),
    max_leaves=6,
)


def body_of(fields: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Any subset of the route's fields, each with any JSON value."""
    return st.fixed_dictionaries({}, optional={field: JSON for field in fields})


MARKET = ["market", "languageCode", "brandNames", "brandDomain", "name", "async"]
ROUTES: dict[str, tuple[str, str, list[str], set[int]]] = {
    "brand create": (
        "POST",
        "",
        ["name", "status", "baseUrl", "urls", "aliases", "semrushMarket", "async"],
        {201, 202, 409},
    ),
    "brand update": (
        "PATCH",
        "/{brand}",
        ["baseUrl", "urls", "aliases", "serenityEnabled"],
        {200},
    ),
    "market create": ("POST", "/{brand}/serenity/markets", MARKET, {201, 202, 409}),
    "activate": (
        "POST",
        "/{brand}/serenity/activate",
        ["brandDomain", "brandNames", "markets", "async"],
        {200, 202, 207, 409},
    ),
    "prompts": ("POST", "/{brand}/serenity/prompts", ["prompts", "async"], {200, 202}),
    "deactivate": ("POST", "/{brand}/serenity/deactivate", ["reason"], {200, 409}),
}
PROPERTY = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def brand(sw_writer, sim) -> Brand:  # type: ignore[no-untyped-def]
    return BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="active",
        base_url="https://acme.example",
        semrush_sub_workspace_id=sim_create_workspace(sim, "Acme"),
    )


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_arbitrary_json_fields_never_answer_500(sw_writer, sim, brand, route):
    method, suffix, fields, success = ROUTES[route]
    path = f"/v2/orgs/{sw_writer.org.id}/brands{suffix.format(brand=brand.id)}"

    @PROPERTY
    @given(body=body_of(fields))
    def check(body: dict[str, Any]) -> None:
        response = sw_writer.client.generic(
            method, path, json.dumps(body), content_type="application/json"
        )
        assert response.status_code in success | {400}, (body, response.json())

    check()


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_body_that_is_not_an_object_is_400_on_every_route(sw_writer, sim, brand, route):
    method, suffix, _, _ = ROUTES[route]
    path = f"/v2/orgs/{sw_writer.org.id}/brands{suffix.format(brand=brand.id)}"

    @PROPERTY
    @given(body=JSON.filter(lambda value: not isinstance(value, dict)))
    def check(body: Any) -> None:
        response = sw_writer.client.generic(
            method, path, json.dumps(body), content_type="application/json"
        )
        assert response.status_code == 400, (body, response.json())
        assert response.json()["error"] == "invalidRequest"
        assert Brand.objects.get(pk=brand.pk).semrush_sub_workspace_id is not None

    check()
