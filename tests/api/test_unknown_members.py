"""Typos are refused, not ignored (SPEC §13.6): a member a body does not declare, at any depth,
is 400 `invalidRequest` naming its path in `details.field`, on every route that takes a body
(those added later included: the routes are read from the served document), and nothing is
written; a single-valued query parameter given twice is 400 naming it."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from jobs.models import AsyncJob
from serenity.models import Brand, Market
from tests.conformance import ServedDocument
from tests.support import assert_error
from webhooks.models import Webhook

TYPO = "zzTypo"


def _writes() -> dict[str, int]:
    return {
        "brands": Brand.objects.count(),
        "markets": Market.objects.count(),
        "jobs": AsyncJob.objects.count(),
        "webhooks": Webhook.objects.count(),
    }


def _body_operations(document: ServedDocument) -> list[tuple[str, str]]:
    return sorted(
        (method, path)
        for path, item in document.document["paths"].items()
        if path.startswith("/v2/")
        for method in item
        if method in ("post", "patch", "put")
    )


def test_every_route_that_takes_a_body_refuses_a_member_it_does_not_declare(
    served_document: ServedDocument, sw_writer: Any, active_brand: Brand
) -> None:
    operations = _body_operations(served_document)
    assert len(operations) >= 14
    before = _writes()
    ids = {
        "orgId": str(sw_writer.org.id),
        "brandId": str(active_brand.pk),
        "geoTargetId": "2840",
        "languageCode": "en",
    }
    for method, template in operations:
        path = re.sub(r"\{(\w+)\}", lambda m: ids.get(m[1], str(uuid.uuid4())), template)
        response = getattr(sw_writer, method)(path, {TYPO: 1})
        error = assert_error(response, 400, "invalidRequest")
        assert error["details"] == {"field": TYPO}, (method, template, error)
    assert _writes() == before


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        # a brand without its market: `semrushMarkets` for `semrushMarket`
        (
            "brands",
            {
                "name": "Acme",
                "baseUrl": "https://acme.example",
                "semrushMarkets": {"market": "US", "languageCode": "en"},
                "async": True,
            },
            "semrushMarkets",
        ),
        (
            "brands",
            {
                "name": "Acme",
                "baseUrl": "https://acme.example",
                "semrushMarket": {"market": "US", "languageCode": "en", "langauge": "en"},
            },
            "semrushMarket.langauge",
        ),
        # an endpoint subscribed to every event: `evnts` for `events`
        ("webhooks", {"url": "https://hooks.example/h", "evnts": ["job.failed"]}, "evnts"),
        (
            "onboardings",
            {
                "brands": [
                    {"name": "A", "baseUrl": "https://a.example"},
                    {
                        "name": "B",
                        "baseUrl": "https://b.example",
                        "markets": [{"market": "US", "languageCode": "en", "nmae": "B US"}],
                    },
                ]
            },
            "brands[1].markets[0].nmae",
        ),
    ],
)
def test_a_typo_is_named_and_nothing_is_written(
    sw_writer: Any, route: str, body: dict[str, Any], field: str
) -> None:
    path = {
        "brands": f"/v2/orgs/{sw_writer.org.id}/brands",
        "webhooks": f"/v2/orgs/{sw_writer.org.id}/serenity/webhooks",
        "onboardings": f"/v2/orgs/{sw_writer.org.id}/serenity/onboardings",
    }[route]
    before = _writes()
    error = assert_error(sw_writer.post(path, body), 400, "invalidRequest")
    assert error["details"] == {"field": field}
    assert error["message"] == f"{field}: not a member of this body."
    assert _writes() == before


def test_the_declared_members_still_pass(sw_writer: Any, active_brand: Brand) -> None:
    path = f"/v2/orgs/{sw_writer.org.id}/brands/{active_brand.pk}"
    response = sw_writer.patch(path, {"aliases": ["Acme Inc"]})
    assert response.status_code == 200, response.json()


@pytest.mark.parametrize(
    ("rest", "field"),
    [
        ("brands?limit=1&limit=2", "limit"),
        ("brands?cursor=a&cursor=b", "cursor"),
        ("serenity/jobs?status=COMPLETED&status=FAILED", "status"),
        ("serenity/onboardings?status=COMPLETED&status=COMPLETED", "status"),
    ],
)
def test_a_single_valued_query_parameter_given_twice_is_refused_naming_it(
    sw_writer: Any, rest: str, field: str
) -> None:
    response = sw_writer.get(f"/v2/orgs/{sw_writer.org.id}/{rest}")
    error = assert_error(response, 400, "invalidRequest")
    assert error["details"] == {"field": field}
    assert error["message"] == f"{field}: given more than once; it takes one value."
