"""An org's queued markets are capped wherever they are queued (SPEC §13.6): an onboarding's,
an async brand create's with a market and an async market create's all count, each against all
of the org's (not only one onboarding's). Past the cap: 429 `queuedMarketsLimit`, `Retry-After`,
nothing written. The chains are recorded, not run."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import AsyncJob
from serenity.models import Brand, Market, MarketStatus
from tests.api.test_onboardings import brand, url
from tests.factories import BrandFactory
from tests.support import assert_error


@pytest.fixture(autouse=True)
def published():  # type: ignore[no-untyped-def]
    from unittest import mock

    sent: list[str] = []
    with mock.patch(
        "jobs.services.publish_job", side_effect=lambda **kw: sent.append(str(kw["job_id"])) or True
    ):
        yield sent


def _written() -> dict[str, int]:
    return {
        "brands": Brand.objects.count(),
        "markets": Market.objects.count(),
        "jobs": AsyncJob.objects.count(),
    }


def _refused(response: Any, queued: int, adding: int) -> None:
    error = assert_error(response, 429, "queuedMarketsLimit")
    assert error["message"] == (
        f"The organization may have at most 3 markets queued; {queued} are, and this request "
        f"adds {adding}."
    )
    assert response["Retry-After"] == "60"


def test_every_async_create_counts_against_the_org_s_queued_markets(
    sw_writer: Any, active_brand: Brand, settings: Any
) -> None:
    settings.SERENITY_ORG_QUEUED_MARKETS_MAX = 3
    brands = f"/v2/orgs/{sw_writer.org.id}/brands"
    markets = f"{brands}/{active_brand.pk}/serenity/markets"
    # given two async brand creates with a market and an async market create: 3 queued
    for name in ("A", "B"):
        created = sw_writer.post(
            brands,
            {
                "name": name,
                "baseUrl": "https://a.example",
                "semrushMarket": {"market": "US", "languageCode": "en"},
                "async": True,
            },
        )
        assert created.status_code == 202, created.json()
    accepted = sw_writer.post(markets, {"market": "DE", "languageCode": "de", "async": True})
    assert accepted.status_code == 202, accepted.json()
    assert Market.objects.filter(status=MarketStatus.CREATING).count() == 3
    other = BrandFactory(
        organization=sw_writer.org,
        name="Other",
        status="active",
        base_url="https://other.example",
        semrush_sub_workspace_id="ws-other",
    )
    before = _written()
    # when each of them, and an onboarding, would queue one more: refused, nothing written
    _refused(sw_writer.post(markets, {"market": "FR", "languageCode": "fr", "async": True}), 3, 1)
    _refused(
        sw_writer.post(
            brands,
            {
                "name": "C",
                "baseUrl": "https://c.example",
                "semrushMarket": {"market": "US", "languageCode": "en"},
                "async": True,
            },
        ),
        3,
        1,
    )
    _refused(sw_writer.post(url(sw_writer), {"brands": [brand("D", ("US", "en"))]}), 3, 1)
    activation = {
        "markets": [{"market": "IT", "languageCode": "it"}],
        "brandDomain": "other.example",
        "async": True,
    }
    _refused(sw_writer.post(f"{brands}/{other.pk}/serenity/activate", activation), 3, 1)
    assert _written() == before
    # a create that queues no market still passes
    bare = sw_writer.post(brands, {"name": "E", "baseUrl": "https://e.example", "async": True})
    assert bare.status_code == 202, bare.json()


def test_an_onboarding_counts_the_markets_other_onboardings_queued_reserved_or_planned(
    sw_writer: Any, settings: Any
) -> None:
    settings.SERENITY_ORG_QUEUED_MARKETS_MAX = 3
    first = sw_writer.post(url(sw_writer), {"brands": [brand("A", ("US", "en"), ("DE", "de"))]})
    assert first.status_code == 202
    before = _written()
    second = sw_writer.post(url(sw_writer), {"brands": [brand("B", ("US", "en"), ("FR", "fr"))]})
    _refused(second, 2, 2)
    assert _written() == before
