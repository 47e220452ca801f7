"""What a generated client relies on (SPEC §12.2): an unknown query parameter is refused naming
it, on every route; every 400 about one field names it in `details.field`, whatever its code;
the onboarding body has no `async`; the onboarding filters."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from jobs.models import AsyncJob, JobStatus
from jobs.services import job_finish
from provisioning.models import Onboarding, OnboardingItem
from serenity.models import Brand, Market
from tests.factories import BrandFactory
from tests.support import assert_error


@pytest.fixture(autouse=True)
def _recorded():  # type: ignore[no-untyped-def]
    """No worker runs the chains here."""
    with mock.patch("jobs.services.publish_job", return_value=True):
        yield


def written() -> dict[str, int]:
    return {
        "onboardings": Onboarding.objects.count(),
        "brands": Brand.objects.count(),
        "jobs": AsyncJob.objects.count(),
        "markets": Market.objects.count(),
    }


# --- Unknown query parameters -----------------------------------------------------------------


def routes(caller: Any, brand: Brand) -> list[tuple[str, str]]:
    org = f"/v2/orgs/{caller.org.id}"
    b = f"{org}/brands/{brand.pk}"
    return [
        ("get", f"{org}/brands"),
        ("post", f"{org}/brands"),
        ("get", b),
        ("patch", b),
        ("get", f"{b}/serenity/markets"),
        ("get", f"{b}/serenity/markets/2840/en"),
        ("post", f"{b}/serenity/activate"),
        ("get", f"{b}/serenity/jobs"),
        ("get", f"{org}/serenity/languages"),
        ("get", f"{org}/serenity/onboardings"),
        ("post", f"{org}/serenity/onboardings"),
        ("get", f"{org}/serenity/jobs"),
        ("get", f"{org}/serenity/webhooks"),
        ("post", f"{org}/serenity/webhooks"),
    ]


def test_an_unknown_query_parameter_is_refused_naming_it_on_every_route(sw_writer):
    brand = BrandFactory(organization=sw_writer.org, base_url="https://acme.example")
    before = written()
    for method, path in routes(sw_writer, brand):
        call = getattr(sw_writer, method)
        url = f"{path}?expand=steps"
        response = call(url) if method == "get" else call(url, {})
        body = assert_error(response, 400, "invalidRequest")
        assert body == {
            "error": "invalidRequest",
            "message": "expand: not a query parameter of this route.",
            "details": {"field": "expand"},
        }, (method, path)
    assert written() == before


def test_the_parameters_a_route_takes_are_accepted(sw_writer):
    response = sw_writer.get(f"/v2/orgs/{sw_writer.org.id}/brands?status=active&limit=5")
    assert response.status_code == 200, response.json()


# --- details.field on every single-field 400 ---------------------------------------------------


@pytest.mark.parametrize(
    ("market", "code", "field"),
    [
        ({"market": "XX", "languageCode": "en"}, "unknownMarket", "semrushMarket.market"),
        ({"market": "USA", "languageCode": "en"}, "invalidRequest", "semrushMarket.market"),
        ({"market": "US", "languageCode": "zz"}, "unknownLanguage", "semrushMarket.languageCode"),
        ({"market": "US", "languageCode": "e_n"}, "invalidRequest", "semrushMarket.languageCode"),
    ],
)
def test_a_bad_market_names_its_field_whatever_its_code(sw_writer, market, code, field):
    body = {"name": "Acme", "baseUrl": "https://acme.example", "semrushMarket": market}
    response = sw_writer.post(f"/v2/orgs/{sw_writer.org.id}/brands", body)
    assert assert_error(response, 400, code)["details"] == {"field": field}
    assert Brand.objects.count() == 0


def test_base_url_required_names_base_url(sw_writer):
    body = {"name": "Acme", "semrushMarket": {"market": "US", "languageCode": "en"}}
    response = sw_writer.post(f"/v2/orgs/{sw_writer.org.id}/brands", body)
    assert assert_error(response, 400, "baseUrlRequired")["details"] == {"field": "baseUrl"}


def onboard(caller: Any, body: Any) -> Any:
    return caller.post(f"/v2/orgs/{caller.org.id}/serenity/onboardings", body)


def item(name: str, *markets: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "baseUrl": "https://x.example", "markets": list(markets)}


@pytest.mark.parametrize(
    ("bad", "code", "field"),
    [
        ({"market": "XX", "languageCode": "en"}, "unknownMarket", "brands[3].markets[1].market"),
        ({"market": 7, "languageCode": "en"}, "invalidRequest", "brands[3].markets[1].market"),
        (
            {"market": "US", "languageCode": "zz"},
            "unknownLanguage",
            "brands[3].markets[1].languageCode",
        ),
        ({"market": "DE", "languageCode": "de"}, "invalidRequest", "brands[3].markets"),
    ],
)
def test_a_bad_onboarding_item_is_named_in_details_field(sw_writer, bad, code, field):
    good = {"market": "DE", "languageCode": "de"}
    brands = [item(f"B{n}", good) for n in range(3)] + [item("B3", good, bad)]
    response = onboard(sw_writer, {"brands": brands})
    assert assert_error(response, 400, code)["details"] == {"field": field}
    assert written() == {"onboardings": 0, "brands": 0, "jobs": 0, "markets": 0}


# --- The onboarding body: `async` deprecated, other members refused (SPEC §13.6) ---------------


@pytest.mark.parametrize("member", ["asynch", "expand"])
def test_an_onboarding_body_with_a_member_it_does_not_have_is_refused(sw_writer, member):
    response = onboard(sw_writer, {"brands": [item("A")], member: False})
    body = assert_error(response, 400, "invalidRequest")
    assert body["details"] == {"field": member}
    assert written() == {"onboardings": 0, "brands": 0, "jobs": 0, "markets": 0}


def test_the_documented_onboarding_body_marks_async_deprecated(served_document):
    schema = served_document.document["components"]["schemas"]["OnboardingCreateRequest"]
    assert set(schema["properties"]) == {"brands", "async", "maxFailedItems"}
    assert schema["properties"]["async"]["deprecated"] is True
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["brands"]


# --- The onboarding filters ---------------------------------------------------------------------


def test_onboarding_items_and_the_list_filter_on_status(sw_writer):
    BrandFactory(organization=sw_writer.org, name="Taken")
    path = f"/v2/orgs/{sw_writer.org.id}/serenity/onboardings"
    first = onboard(sw_writer, {"brands": [item("A"), item("Taken"), item("C")]}).json()
    refused = onboard(sw_writer, {"brands": [item("Taken")]}).json()  # ends at once
    # given the third item of the first onboarding completed
    third = OnboardingItem.objects.get(onboarding_id=first["onboardingId"], index=2)
    job_finish(
        job=AsyncJob.objects.get(pk=third.job_id), claim_token=None, status=JobStatus.COMPLETED
    )
    # then the items filter on their status, the counts still cover every item
    read = sw_writer.get(f"{path}/{first['onboardingId']}?status=FAILED").json()
    assert [i["index"] for i in read["items"]] == [1]
    assert read["counts"] == {"inProgress": 1, "completed": 1, "failed": 1, "cancelled": 0}
    done = sw_writer.get(f"{path}/{first['onboardingId']}?status=COMPLETED").json()
    assert [i["index"] for i in done["items"]] == [2]
    # and the list on the onboardings' status
    ids = lambda q: [o["onboardingId"] for o in sw_writer.get(f"{path}?{q}").json()["items"]]  # noqa: E731
    assert ids("status=IN_PROGRESS") == [first["onboardingId"]]
    assert ids("status=COMPLETED") == [refused["onboardingId"]]
    assert ids("status=CANCELLED") == []
    bad = sw_writer.get(f"{path}?status=DONE")
    assert assert_error(bad, 400, "invalidRequest")["details"] == {"field": "status"}
