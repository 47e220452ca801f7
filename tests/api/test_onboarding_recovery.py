"""Bulk work that recovers, at the routes (SPEC §13.2): the redrive's refusals and what it
begins, `maxFailedItems`, CSV in (BOM, quoted cells, non-ASCII names, a bad cell named
`rows[N].column` with nothing written, the cap's 429) and CSV out (every item, equal to the
JSON items). The chains are recorded, not run; tests/chains/test_redrive.py runs them."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from jobs.models import AsyncJob, JobStatus, JobStep
from jobs.services import job_finish
from provisioning.models import Onboarding, OnboardingItem, ProvisioningAttempt
from serenity.models import Brand
from tests.api.test_onboardings import NOTHING, brand, url, written
from tests.factories import BrandFactory
from tests.support import assert_error

HEADER = "name,baseUrl,markets,status,brandId,errorCode,errorMessage"


@pytest.fixture(autouse=True)
def published():  # type: ignore[no-untyped-def]
    """No worker runs the chains here."""
    from unittest import mock

    with mock.patch("jobs.services.publish_job", return_value=True):
        yield


def post_csv(caller: Any, text: str, *, query: str = "", bom: bool = False) -> Any:
    body = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    return caller.client.post(url(caller, query), body, content_type="text/csv")


def end_item(item: OnboardingItem, status: str) -> None:
    """End an item's chain and its attempt as its worker would."""
    ended = "ready" if status == JobStatus.COMPLETED else "failed"
    ProvisioningAttempt.objects.filter(job_id=item.job_id).update(status=ended)
    job_finish(job=AsyncJob.objects.get(pk=item.job_id), claim_token=None, status=status)


def ended_onboarding(caller: Any, brands: list[dict[str, Any]], statuses: list[str]) -> str:
    """An onboarding whose items (with a chain) ended with `statuses`, in index order."""
    response = caller.post(url(caller), {"brands": brands})
    assert response.status_code == 202, response.json()
    running = OnboardingItem.objects.filter(job__isnull=False).order_by("index")
    for item, status in zip(running, statuses, strict=True):
        if status != JobStatus.IN_PROGRESS:
            end_item(item, status)
    return str(response.json()["onboardingId"])


# --- Redrive ------------------------------------------------------------------------------------


def test_a_redrive_takes_the_failed_and_cancelled_items_and_resumes_their_brands(sw_writer):
    # given an ended onboarding: one completed, one failed, one cancelled, one refused at once
    BrandFactory(organization=sw_writer.org, name="Taken")
    brands = [
        brand("Done", ("US", "en")),
        brand("Broken", ("US", "en"), ("DE", "de"), aliases=["Broke"]),
        brand("Stopped"),
        brand("Taken", ("FR", "fr")),
    ]
    first = ended_onboarding(
        sw_writer, brands, [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED]
    )
    brands_before = set(Brand.objects.values_list("pk", flat=True))
    broken = Brand.objects.get(name="Broken")
    # when it is redriven
    response = sw_writer.post(url(sw_writer, f"/{first}/retry"))
    # then the new onboarding holds the three that did not complete, in order
    assert response.status_code == 202, response.json()
    redrive = Onboarding.objects.get(pk=response.json()["onboardingId"])
    assert response.json() == {
        "onboardingId": str(redrive.pk),
        "status": "IN_PROGRESS",
        "total": 3,
        "retryOf": first,
    }
    items = list(OnboardingItem.objects.filter(onboarding=redrive).order_by("index"))
    assert [(i.index, i.name) for i in items] == [(0, "Broken"), (1, "Stopped"), (2, "Taken")]
    # no brand was created: two resume on theirs, the refused one is refused again
    assert set(Brand.objects.values_list("pk", flat=True)) == brands_before
    assert (items[0].brand_id, items[2].brand_id, items[2].error["code"]) == (
        broken.pk,
        None,
        "brandExists",
    )
    # the resumed item's chain is an activate's with its markets as they were asked
    [then] = AsyncJob.objects.filter(root_id=items[0].job_id).exclude(pk=items[0].job_id)
    assert then.step == JobStep.ACTIVATE_MARKETS
    assert [(m["market"], m["languageCode"]) for m in then.metadata["markets"]] == [
        ("US", "en"),
        ("DE", "de"),
    ]
    assert items[0].brand_input["aliases"] == ["Broke"]
    assert ProvisioningAttempt.objects.get(job_id=items[0].job_id).status == "pending"
    # and the document shows which onboarding it redrives
    document = sw_writer.get(url(sw_writer, f"/{redrive.pk}")).json()
    assert (document["retryOf"], document["counts"]) == (
        first,
        {"inProgress": 2, "completed": 0, "failed": 1, "cancelled": 0},
    )


def test_a_redrive_of_a_running_onboarding_is_409_and_writes_nothing(sw_writer):
    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("Running")]}).json()
    before = written()
    response = sw_writer.post(url(sw_writer, f"/{accepted['onboardingId']}/retry"))
    assert_error(response, 409, "onboardingInProgress")
    assert response.json()["details"] == {"onboardingId": accepted["onboardingId"]}
    assert written() == before


def test_a_second_redrive_while_the_first_runs_is_409_naming_it(sw_writer):
    first = ended_onboarding(sw_writer, [brand("Again")], [JobStatus.FAILED])
    redrive = sw_writer.post(url(sw_writer, f"/{first}/retry")).json()
    response = sw_writer.post(url(sw_writer, f"/{first}/retry"))
    assert_error(response, 409, "onboardingInProgress")
    assert response.json()["details"] == {"onboardingId": redrive["onboardingId"]}


def test_a_redrive_with_nothing_failed_is_409_nothing_to_retry(sw_writer):
    first = ended_onboarding(sw_writer, [brand("Fine")], [JobStatus.COMPLETED])
    before = written()
    response = sw_writer.post(url(sw_writer, f"/{first}/retry"))
    assert_error(response, 409, "nothingToRetry")
    assert response.json() == {
        "error": "nothingToRetry",
        "message": "No item of the onboarding failed or was cancelled: there is nothing to retry.",
    }
    assert written() == before


def test_a_redrive_of_an_unknown_onboarding_is_404(sw_writer):
    response = sw_writer.post(url(sw_writer, "/00000000-0000-4000-8000-000000000000/retry"))
    assert_error(response, 404, "onboardingNotFound")


def test_a_reader_may_not_redrive(sw_writer):
    from serenity.models import Role
    from tests.conftest import make_caller

    first = ended_onboarding(sw_writer, [brand("Read")], [JobStatus.FAILED])
    reader = make_caller(sw_writer.org, Role.READER)
    assert reader.post(url(reader, f"/{first}/retry")).status_code == 403


# --- The failure threshold ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, "two", 1.5, 2**31])
def test_a_threshold_below_one_or_past_the_column_s_range_is_refused(sw_writer, value):
    # (2**31: past the column's range, a 400, not the database's refusal as a 500)
    response = sw_writer.post(url(sw_writer), {"brands": [brand("A")], "maxFailedItems": value})
    assert_error(response, 400, "invalidRequest")
    assert response.json()["details"] == {"field": "maxFailedItems"}
    assert written() == NOTHING


def test_the_threshold_reached_cancels_the_items_that_have_not_ended(
    sw_writer, django_capture_on_commit_callbacks
):
    from unittest import mock

    # given four items and a threshold of two
    body = {"brands": [brand(n) for n in "ABCD"], "maxFailedItems": 2}
    onboarding_id = sw_writer.post(url(sw_writer), body).json()["onboardingId"]
    items = list(OnboardingItem.objects.order_by("index"))
    # when one fails, nothing is cancelled
    end_item(items[0], JobStatus.FAILED)
    assert Onboarding.objects.get().cancelled_at is None
    # when a second fails, the two others are cancelled (after that ending's commit; the task
    # is run here, as a worker would)
    with (
        mock.patch("provisioning.flows.onboarding_cancel.publish_task", return_value=False),
        django_capture_on_commit_callbacks(execute=True),
    ):
        end_item(items[1], JobStatus.FAILED)
    document = sw_writer.get(url(sw_writer, f"/{onboarding_id}")).json()
    assert (document["status"], document["cancelledBy"], document["maxFailedItems"]) == (
        "CANCELLED",
        "failureThreshold",
        2,
    )
    assert document["counts"] == {"inProgress": 0, "completed": 0, "failed": 2, "cancelled": 2}
    assert not ProvisioningAttempt.objects.filter(status="pending").exists()


def test_refusals_at_accept_that_reach_the_threshold_cancel_the_rest_at_once(sw_writer):
    BrandFactory(organization=sw_writer.org, name="Taken")
    body = {"brands": [brand("Taken"), brand("Fresh")], "maxFailedItems": 1}
    onboarding_id = sw_writer.post(url(sw_writer), body).json()["onboardingId"]
    document = sw_writer.get(url(sw_writer, f"/{onboarding_id}")).json()
    assert (document["status"], document["cancelledBy"], document["counts"]) == (
        "CANCELLED",
        "failureThreshold",
        {"inProgress": 0, "completed": 0, "failed": 1, "cancelled": 1},
    )


def test_a_user_s_cancel_says_so(sw_writer):
    onboarding_id = sw_writer.post(url(sw_writer), {"brands": [brand("A")]}).json()["onboardingId"]
    assert sw_writer.get(url(sw_writer, f"/{onboarding_id}")).json()["cancelledBy"] is None
    cancelled = sw_writer.post(url(sw_writer, f"/{onboarding_id}/cancel")).json()
    assert (cancelled["status"], cancelled["cancelledBy"]) == ("CANCELLED", "user")


# --- CSV in -------------------------------------------------------------------------------------


def test_a_csv_onboarding_with_a_bom_quoted_cells_and_non_ascii_names(sw_writer):
    text = (
        "name,baseUrl,aliases,markets\r\n"
        'Café Crème,https://cafe.example,"Crème; Café ""Best""",US:en;DE:de\r\n'
        '"Zürich, AG",https://zurich.example,,\r\n'
        "\r\n"
        "東京,https://tokyo.example,,JP:ja\r\n"
    )
    response = post_csv(sw_writer, text, bom=True, query="?maxFailedItems=3")
    assert response.status_code == 202, response.json()
    onboarding = Onboarding.objects.get()
    assert (response.json()["total"], onboarding.max_failed_items) == (3, 3)
    brands = {b.name: b for b in Brand.objects.all()}
    assert set(brands) == {"Café Crème", "Zürich, AG", "東京"}
    assert brands["Café Crème"].aliases == ["Crème", 'Café "Best"']
    item = OnboardingItem.objects.get(name="Café Crème")
    assert [(m["market"], m["languageCode"]) for m in item.brand_input["markets"]] == [
        ("US", "en"),
        ("DE", "de"),
    ]


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (
            "name,baseUrl\nA,https://a.example\nB,not a url\n",
            "rows[2].baseUrl",
            "rows[2].baseUrl: must be an absolute http(s) URL.",
        ),
        ("name,baseUrl\nA,https://a.example\nB,\n", "rows[2].baseUrl", None),
        (
            "name,baseUrl,markets\nA,https://a.example,US\n",
            "rows[1].markets",
            "rows[1].markets: 'US' is not MARKET:LANGUAGE (e.g. US:en).",
        ),
        ("name,baseUrl,markets\nA,https://a.example,ZZ:en\n", "rows[1].markets", None),
        ("name,baseUrl,markets\nA,https://a.example,US:en;US:en\n", "rows[1].markets", None),
        ("name,baseUrl,colour\nA,https://a.example,red\n", "header", None),
        ("name\nA\n", "header", None),
        ("name,baseUrl\nA,https://a.example,extra\n", "rows[1]", None),
        ("name,baseUrl\n", "rows", None),
        # an empty CSV body (which DRF does not parse) is a CSV without its header row, not a
        # JSON body without `brands` (found by the live schemathesis run)
        ("", "header", "The CSV body has no header row."),
    ],
)
def test_a_bad_cell_is_named_and_nothing_is_written(sw_writer, text, field, message):
    response = post_csv(sw_writer, text)
    assert response.status_code == 400, response.json()
    assert response.json()["details"]["field"] == field
    if message is not None:
        assert response.json()["message"] == message
    assert written() == NOTHING


def test_a_csv_body_that_is_not_utf8_is_400(sw_writer):
    body = "name,baseUrl\nCafé,https://c.example\n".encode("latin-1")
    response = sw_writer.client.post(url(sw_writer), body, content_type="text/csv")
    assert_error(response, 400, "invalidRequest")
    assert written() == NOTHING


def test_a_csv_of_5001_rows_is_the_cap_s_429_and_writes_nothing(sw_writer):
    rows = "".join(f"Brand {n},https://b{n}.example,,US:en\n" for n in range(5001))
    response = post_csv(sw_writer, "name,baseUrl,aliases,markets\n" + rows)
    assert response.status_code == 429, response.json()
    assert response.json() == {
        "error": "onboardingLimit",
        "message": "The organization may have at most 5000 onboarding items in progress; 0 "
        "are, and this onboarding adds 5001.",
    }
    assert response["Retry-After"] == "60"
    assert written() == NOTHING


def test_a_csv_over_the_per_request_limit_is_400_as_json(sw_writer):
    rows = "".join(f"Brand {n},https://b{n}.example\n" for n in range(1001))
    response = post_csv(sw_writer, "name,baseUrl\n" + rows)
    assert_error(response, 400, "invalidRequest")
    assert response.json()["details"] == {"field": "rows"}
    assert written() == NOTHING


# --- CSV out ------------------------------------------------------------------------------------


def test_csv_out_lists_every_item_as_the_json_items_do(sw_writer):
    # given an onboarding of 7 items: two ended, one refused at once
    BrandFactory(organization=sw_writer.org, name="Taken")
    brands = [brand(f"Item {n}", ("US", "en"), ("DE", "de")) for n in range(6)]
    brands.insert(3, brand("Taken"))
    first = ended_onboarding(
        sw_writer, brands, [JobStatus.COMPLETED, JobStatus.FAILED] + [JobStatus.IN_PROGRESS] * 4
    )
    items_url = url(sw_writer, f"/{first}/items")
    # when the items are read as CSV
    response = sw_writer.get(items_url, HTTP_ACCEPT="text/csv")
    # then every item is there (not a page), streamed, equal to the JSON items
    assert response.status_code == 200
    assert response.streaming and response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode()
    assert text.splitlines()[0] == HEADER
    rows = list(csv.DictReader(io.StringIO(text)))
    page = sw_writer.get(f"{items_url}?limit=3").json()
    json_items = (
        page["items"] + sw_writer.get(f"{items_url}?cursor={page['nextCursor']}").json()["items"]
    )
    assert len(rows) == len(json_items) == 7
    assert [
        (r["name"], r["status"], r["brandId"] or None, r["errorCode"] or None) for r in rows
    ] == [
        (i["name"], i["status"], i["brandId"], (i["error"] or {}).get("code")) for i in json_items
    ]
    assert rows[3] == {
        "name": "Taken",
        "baseUrl": "https://taken.example",
        "markets": "",
        "status": "FAILED",
        "brandId": "",
        "errorCode": "brandExists",
        "errorMessage": "A brand with this name already exists in the organization.",
    }
    assert (rows[0]["baseUrl"], rows[0]["markets"]) == ("https://item-0.example", "US:en;DE:de")
    # and ?status= filters both
    failed = sw_writer.get(f"{items_url}?status=FAILED", HTTP_ACCEPT="text/csv")
    names = [r["name"] for r in csv.DictReader(io.StringIO(b"".join(failed).decode()))]
    assert names == [i["name"] for i in sw_writer.get(f"{items_url}?status=FAILED").json()["items"]]
    assert names == ["Item 1", "Taken"]


def test_csv_out_errors_are_json(sw_writer):
    response = sw_writer.get(
        url(sw_writer, "/00000000-0000-4000-8000-000000000000/items"), HTTP_ACCEPT="text/csv"
    )
    assert_error(response, 404, "onboardingNotFound")
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("body", "threshold"), [({}, 4), ({"maxFailedItems": 2}, 2), ({"maxFailedItems": None}, None)]
)
def test_a_redrive_keeps_the_original_s_threshold_unless_told(sw_writer, body, threshold):
    response = sw_writer.post(url(sw_writer), {"brands": [brand("T")], "maxFailedItems": 4})
    for item in OnboardingItem.objects.all():
        end_item(item, JobStatus.FAILED)
    redrive = sw_writer.post(url(sw_writer, f"/{response.json()['onboardingId']}/retry"), body)
    assert redrive.status_code == 202, redrive.json()
    assert Onboarding.objects.get(pk=redrive.json()["onboardingId"]).max_failed_items == threshold


def test_a_redrive_threshold_past_the_column_s_range_is_400_and_writes_nothing(sw_writer):
    # (found by the live schemathesis run: `maxFailedItems` 64333635096185 was a 500)
    first = ended_onboarding(sw_writer, [brand("Big")], [JobStatus.FAILED])
    before = written()
    response = sw_writer.post(url(sw_writer, f"/{first}/retry"), {"maxFailedItems": 2**31})
    assert_error(response, 400, "invalidRequest")
    assert response.json()["details"] == {"field": "maxFailedItems"}
    assert written() == before


def test_a_redrive_body_with_an_unknown_member_is_400_and_writes_nothing(sw_writer):
    first = ended_onboarding(sw_writer, [brand("U")], [JobStatus.FAILED])
    before = written()
    response = sw_writer.post(url(sw_writer, f"/{first}/retry"), {"maxFailed": 2})
    assert_error(response, 400, "invalidRequest")
    assert response.json()["details"] == {"field": "maxFailed"}
    assert written() == before
