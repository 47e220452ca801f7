"""Cursor pagination of the brand, market and job lists (SPEC §10.3)."""

from __future__ import annotations

import pytest

from serenity.models import Brand
from serenity.names import brand_name_key
from tests.factories import AsyncJobFactory, BrandFactory, MarketFactory


def brands_url(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands"


def walk(caller, url: str, list_key: str, limit: int, **extra: str) -> list[list[dict]]:  # type: ignore[no-untyped-def]
    pages, cursor = [], None
    for _ in range(20):
        params = {"limit": limit, **extra, **({"cursor": cursor} if cursor else {})}
        response = caller.get(url, data=params)
        assert response.status_code == 200, response.json()
        body = response.json()
        assert set(body) == {list_key, "nextCursor"}
        pages.append(body[list_key])
        cursor = body["nextCursor"]
        if cursor is None:
            return pages
    raise AssertionError("no last page")


def test_brands_page_in_the_database_order_of_name_then_id(writer):
    # given brands whose names sort differently by case
    for name in ["Delta", "alpha", "Charlie", "Bravo", "echo"]:
        BrandFactory(organization=writer.org, name=name)
    # when listed two by two
    pages = walk(writer, brands_url(writer), "brands", 2)
    # then the pages follow (name, id) as the database orders them, nothing repeated or missed
    expected = Brand.objects.filter(organization=writer.org).order_by("name", "id")
    assert [b["id"] for page in pages for b in page] == [str(b.pk) for b in expected]
    assert [len(page) for page in pages] == [2, 2, 1]


def test_brand_pages_walk_every_live_brand_once(writer):
    for n in range(7):
        BrandFactory(organization=writer.org, name=f"Brand {n}")
    pages = walk(writer, brands_url(writer), "brands", 3)
    assert [[b["name"] for b in page] for page in pages] == [
        ["Brand 0", "Brand 1", "Brand 2"],
        ["Brand 3", "Brand 4", "Brand 5"],
        ["Brand 6"],
    ]


def test_a_brand_page_is_100_by_default(writer):
    Brand.objects.bulk_create(
        Brand(
            organization=writer.org,
            name=f"Brand {n:03d}",
            name_key=brand_name_key(f"Brand {n:03d}"),  # bulk_create does not call save()
            status="active",
        )
        for n in range(101)
    )
    body = writer.get(brands_url(writer)).json()
    assert len(body["brands"]) == 100
    assert body["brands"][-1]["name"] == "Brand 099"
    last = writer.get(brands_url(writer), data={"cursor": body["nextCursor"]}).json()
    assert [b["name"] for b in last["brands"]] == ["Brand 100"]
    assert last["nextCursor"] is None


def test_the_status_filter_and_the_cursor_combine(writer):
    for n in range(3):
        BrandFactory(organization=writer.org, name=f"Live {n}")
        BrandFactory(organization=writer.org, name=f"Gone {n}", status="deleted")
    pages = walk(writer, brands_url(writer), "brands", 2, status="deleted")
    assert [[b["name"] for b in page] for page in pages] == [["Gone 0", "Gone 1"], ["Gone 2"]]


def test_markets_page_by_geo_target_then_language(writer):
    brand = BrandFactory(organization=writer.org)
    for geo, lang in [(2840, "es"), (2276, "de"), (2840, "en"), (2250, "fr")]:
        MarketFactory(brand=brand, geo_target_id=geo, language_code=lang)
    MarketFactory(
        brand=brand, geo_target_id=2036, language_code="en", deleted_at="2026-01-01T00:00Z"
    )
    url = f"{brands_url(writer)}/{brand.id}/serenity/markets"
    pages = walk(writer, url, "items", 3)
    assert [[(m["geoTargetId"], m["languageCode"]) for m in page] for page in pages] == [
        [(2250, "fr"), (2276, "de"), (2840, "en")],
        [(2840, "es")],
    ]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": "0"}, "limit: Ensure this value is greater than or equal to 1."),
        ({"limit": "501"}, "limit: Ensure this value is less than or equal to 500."),
        ({"limit": "ten"}, "limit: A valid integer is required."),
        ({"limit": "1.5"}, "limit: A valid integer is required."),
    ],
)
def test_a_bad_limit_is_400(writer, query, message):
    response = writer.get(brands_url(writer), data=query)
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalidRequest",
        "message": message,
        "details": {"field": "limit"},
    }


CURSOR_REFUSED = {
    "error": "invalidRequest",
    "message": "cursor: not a cursor of this list.",
    "details": {"field": "cursor"},
}


@pytest.mark.parametrize("cursor", ["garbage", "eyJrIjoiYnJhbmRzIn0:1aaaaa:forged"])
def test_a_bad_cursor_is_400(writer, cursor):
    response = writer.get(brands_url(writer), data={"cursor": cursor})
    assert response.status_code == 400
    assert response.json() == CURSOR_REFUSED


def test_a_cursor_of_another_list_is_400(writer):
    brand = BrandFactory(organization=writer.org, name="A")
    BrandFactory(organization=writer.org, name="B")
    cursor = writer.get(brands_url(writer), data={"limit": 1}).json()["nextCursor"]
    assert cursor is not None
    markets = writer.get(
        f"{brands_url(writer)}/{brand.id}/serenity/markets", data={"cursor": cursor}
    )
    jobs = writer.get(f"{brands_url(writer)}/{brand.id}/serenity/jobs", data={"cursor": cursor})
    assert (markets.status_code, markets.json()) == (400, CURSOR_REFUSED)
    assert (jobs.status_code, jobs.json()) == (400, CURSOR_REFUSED)


def test_jobs_page_newest_first(writer):
    brand = BrandFactory(organization=writer.org)
    roots = [AsyncJobFactory(brand=brand) for _ in range(5)]
    url = f"{brands_url(writer)}/{brand.id}/serenity/jobs"
    pages = walk(writer, url, "items", 2)
    assert [[j["jobId"] for j in page] for page in pages] == [
        [str(roots[4].pk), str(roots[3].pk)],
        [str(roots[2].pk), str(roots[1].pk)],
        [str(roots[0].pk)],
    ]
