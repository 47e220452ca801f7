"""Bulk onboarding routes (SPEC §11.2): accept, validation before any write, items refused as
`brandExists`, reading with counts and paginated items, listing, cancel, tenancy. The chains
are recorded, not run (`published`): tests/chains/test_onboarding.py runs them."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import AsyncJob, JobStatus, JobStep
from jobs.services import job_finish
from provisioning.models import (
    AttemptReason,
    AttemptStatus,
    Onboarding,
    OnboardingItem,
    ProvisioningAttempt,
)
from serenity.models import Brand, Market, Role
from tests.conftest import make_caller
from tests.factories import BrandFactory, OrganizationFactory
from tests.support import assert_error

BRAND_EXISTS = {
    "code": "brandExists",
    "message": "A brand with this name already exists in the organization.",
    "retryable": False,
}


@pytest.fixture(autouse=True)
def _recorded(published):  # type: ignore[no-untyped-def]
    """No worker runs the chains here."""
    return published


@pytest.fixture
def published():  # type: ignore[no-untyped-def]
    from unittest import mock

    sent: list[str] = []
    with mock.patch(
        "jobs.services.publish_job", side_effect=lambda **kw: sent.append(str(kw["job_id"])) or True
    ):
        yield sent


def url(caller: Any, rest: str = "") -> str:
    return f"/v2/orgs/{caller.org.id}/serenity/onboardings{rest}"


def brand(name: str, *markets: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "baseUrl": f"https://{name.lower().replace(' ', '-')}.example",
        "markets": [{"market": m, "languageCode": lang} for m, lang in markets],
        **extra,
    }


def written() -> dict[str, int]:
    return {
        "onboardings": Onboarding.objects.count(),
        "brands": Brand.objects.count(),
        "attempts": ProvisioningAttempt.objects.count(),
        "jobs": AsyncJob.objects.count(),
        "markets": Market.objects.count(),
    }


NOTHING = {"onboardings": 0, "brands": 0, "attempts": 0, "jobs": 0, "markets": 0}


def test_an_onboarding_is_accepted_with_every_item_s_rows_and_chain(
    sw_writer, published, django_capture_on_commit_callbacks
):
    # when three brands are onboarded: one market, two markets, none
    with django_capture_on_commit_callbacks(execute=True):
        response = sw_writer.post(
            url(sw_writer),
            {
                "brands": [
                    brand("Acme", ("US", "en")),
                    brand("Globex", ("DE", "de"), ("fr", "FR"), aliases=["Globex Corp"]),
                    brand("Initech"),
                ]
            },
        )
    # then 202 with the onboarding's id, Location and Retry-After
    assert response.status_code == 202, response.json()
    body = response.json()
    onboarding = Onboarding.objects.get()
    assert body == {
        "onboardingId": str(onboarding.pk),
        "status": "IN_PROGRESS",
        "total": 3,
        "retryOf": None,
    }
    assert (
        response["Location"] == f"/v2/orgs/{sw_writer.org.id}/serenity/onboardings/{onboarding.pk}"
    )
    assert response["Retry-After"] == "5"
    # and each item is a brand create: an active brand, a pending attempt, its chain
    items = list(OnboardingItem.objects.order_by("index"))
    assert [(i.index, i.name, i.error) for i in items] == [
        (0, "Acme", None),
        (1, "Globex", None),
        (2, "Initech", None),
    ]
    for item in items:
        assert item.brand is not None and item.brand.status == "active"
        attempt = ProvisioningAttempt.objects.get(brand=item.brand)
        assert (attempt.status, attempt.job_id) == (AttemptStatus.PENDING, item.job_id)
    steps = {
        i.name: list(AsyncJob.objects.filter(pk=i.job_id).values_list("step", flat=True))
        + list(AsyncJob.objects.filter(root_id=i.job_id).values_list("step", flat=True))
        for i in items
    }
    assert steps == {
        "Acme": [JobStep.PROVISION_WORKSPACE, JobStep.CREATE_MARKET],
        "Globex": [JobStep.PROVISION_WORKSPACE, JobStep.ACTIVATE_MARKETS],
        "Initech": [JobStep.PROVISION_WORKSPACE],
    }
    # the one-market item reserved its slice, as a brand create with a market does
    assert list(Market.objects.values_list("brand__name", "geo_target_id", "status")) == [
        ("Acme", 2840, "creating")
    ]
    globex = AsyncJob.objects.get(root_id=items[1].job_id)
    assert [(m["market"], m["languageCode"]) for m in globex.metadata["markets"]] == [
        ("DE", "de"),
        ("FR", "fr"),
    ]
    assert Brand.objects.get(name="Globex").aliases == ["Globex Corp"]
    # and every chain's first step was published once its transaction committed
    assert sorted(published) == sorted(str(i.job_id) for i in items)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"brands": []}, "brands"),
        ({}, "brands"),
        ({"brands": [brand("A"), {"name": "B"}]}, "brands[1].baseUrl"),
        ({"brands": [brand("A"), brand("B", ("USA", "en"))]}, "brands[1].markets[0].market"),
        ({"brands": [brand("A", ("US", "en"), ("us", "EN"))]}, "brands[0].markets"),
        ({"brands": [brand("A"), brand("\u202eB")]}, "brands[1].name"),
        (
            {"brands": [brand("A"), {**brand("B"), "baseUrl": "ftp://b.example"}]},
            "brands[1].baseUrl",
        ),
        ({"brands": [brand(f"B{n}") for n in range(1001)]}, "brands"),
        ({"brands": [brand("A", *[("US", "en")] * 51)]}, "brands[0].markets"),
    ],
)
def test_a_bad_item_is_a_400_naming_it_and_nothing_is_written(sw_writer, published, body, field):
    response = sw_writer.post(url(sw_writer), body)
    error = assert_error(response, 400, "invalidRequest")
    assert field in error["message"], error
    assert written() == NOTHING
    assert published == []


def test_an_unknown_country_names_its_item(sw_writer):
    response = sw_writer.post(url(sw_writer), {"brands": [brand("A"), brand("B", ("XK", "en"))]})
    error = assert_error(response, 400, "unknownMarket")
    assert error["message"].startswith("brands[1].markets[0].market"), error
    assert written() == NOTHING


def test_a_name_that_exists_or_repeats_fails_that_item_alone(
    sw_writer, published, django_capture_on_commit_callbacks
):
    # given a brand "Acme" in the org
    BrandFactory(organization=sw_writer.org, name="Acme")
    # when an onboarding brings "acme" (exists), "Globex" and "GLOBEX" (a repeat)
    with django_capture_on_commit_callbacks(execute=True):
        response = sw_writer.post(
            url(sw_writer),
            {"brands": [brand("acme", ("US", "en")), brand("Globex"), brand("GLOBEX")]},
        )
    assert response.status_code == 202, response.json()
    onboarding_id = response.json()["onboardingId"]
    # then only Globex is created and started; the other two items are FAILED brandExists
    assert list(Brand.objects.order_by("name").values_list("name", flat=True)) == [
        "Acme",
        "Globex",
    ]
    assert AsyncJob.objects.filter(root__isnull=True).count() == 1
    assert Market.objects.count() == 0
    body = sw_writer.get(url(sw_writer, f"/{onboarding_id}")).json()
    assert body["counts"] == {"inProgress": 1, "completed": 0, "failed": 2, "cancelled": 0}
    assert [(i["index"], i["status"], i["error"], i["brandId"]) for i in body["items"]] == [
        (0, "FAILED", BRAND_EXISTS, None),
        (1, "IN_PROGRESS", None, str(Brand.objects.get(name="Globex").pk)),
        (2, "FAILED", BRAND_EXISTS, None),
    ]
    assert len(published) == 1


@pytest.mark.parametrize(
    "org",
    [
        {"serenity_enabled": False},
        {"semrush_parent_workspace_id": None},
        {"workspace_mode": "flat"},
    ],
)
def test_an_org_that_is_not_a_sub_workspace_serenity_org_is_refused(db, org):
    caller = make_caller(OrganizationFactory(**org), Role.WRITER)
    response = caller.post(url(caller), {"brands": [brand("A")]})
    assert_error(response, 403, "serenityNotEnabled")
    assert written() == NOTHING


def test_a_reader_cannot_onboard(sw_writer):
    reader = make_caller(sw_writer.org, Role.READER)
    assert_error(reader.post(url(reader), {"brands": [brand("A")]}), 403, "forbidden")
    assert written() == NOTHING


def test_reading_an_onboarding_counts_every_item_and_pages_its_items(sw_writer):
    accepted = sw_writer.post(
        url(sw_writer), {"brands": [brand(f"Brand {n}") for n in range(5)]}
    ).json()
    path = url(sw_writer, f"/{accepted['onboardingId']}")
    # given the second chain completed and the fourth failed (as their workers would end them)
    items = list(OnboardingItem.objects.order_by("index"))
    ready = {"brandId": str(items[1].brand_id), "provisioningStatus": "ready"}
    result = {"status": 200, "body": ready, "outcome": "succeeded"}
    job_finish(
        job=AsyncJob.objects.get(pk=items[1].job_id),
        claim_token=None,
        status=JobStatus.COMPLETED,
        result=result,
    )
    error = {"code": "subworkspaceCreationFailed", "message": "x", "retryable": False}
    job_finish(
        job=AsyncJob.objects.get(pk=items[3].job_id),
        claim_token=None,
        status=JobStatus.FAILED,
        error=error,
    )
    # when it is read two items at a time
    first = sw_writer.get(f"{path}?limit=2")
    second = sw_writer.get(f"{path}?limit=2&cursor={first.json()['nextCursor']}")
    # then the counts cover every item, and the pages follow the index
    assert first.status_code == 200 and first["Retry-After"] == "5"
    page = first.json()
    onboarding = Onboarding.objects.get()
    assert {k: v for k, v in page.items() if k not in ("items", "nextCursor", "updatedAt")} == {
        "onboardingId": str(onboarding.pk),
        "status": "IN_PROGRESS",
        "total": 5,
        "counts": {"inProgress": 3, "completed": 1, "failed": 1, "cancelled": 0},
        "createdAt": onboarding.created_at.isoformat().replace("+00:00", "Z"),
        "finishedAt": None,
        "retryOf": None,
        "maxFailedItems": None,
        "cancelledBy": None,
    }
    assert [(i["index"], i["status"], i["result"]) for i in page["items"]] == [
        (0, "IN_PROGRESS", None),
        (1, "COMPLETED", result),
    ]
    assert [(i["index"], i["status"], i["error"]) for i in second.json()["items"]] == [
        (2, "IN_PROGRESS", None),
        (3, "FAILED", error),
    ]
    assert second.json()["nextCursor"] is not None


def test_an_onboarding_whose_items_all_ended_is_completed(sw_writer):
    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("A"), brand("B")]}).json()
    for root in AsyncJob.objects.filter(root__isnull=True):
        job_finish(job=root, claim_token=None, status=JobStatus.FAILED)
    response = sw_writer.get(url(sw_writer, f"/{accepted['onboardingId']}"))
    assert response.json()["status"] == "COMPLETED"
    assert "Retry-After" not in response


def test_an_item_ending_while_the_onboarding_is_read_never_makes_an_ended_one_list_it_running(
    sw_writer,
):
    # given an onboarding of one brand whose chain is still running
    from django.db import connection

    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("A")]}).json()
    root = AsyncJob.objects.get(root__isnull=True)
    error = {"code": "subworkspaceCreationFailed", "message": "x", "retryable": False}
    ended: list[str] = []

    def end_after_the_read_of_the_counts(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        answer = execute(sql, params, many, context)
        if (
            not ended
            and sql.lstrip().startswith("SELECT")
            and 'FROM "provisioning_onboarding"' in sql
        ):
            # the worker's commit lands between the document's reads (the counts are the
            # onboarding row's)
            ended.append(sql)
            job_finish(job=root, claim_token=None, status=JobStatus.FAILED, error=error)
        return answer

    # when it is read while its chain ends in the middle of the read
    with connection.execute_wrapper(end_after_the_read_of_the_counts):
        body = sw_writer.get(url(sw_writer, f"/{accepted['onboardingId']}")).json()
    # then it is still in progress by its counts (read first), its item already ended: never
    # ended (COMPLETED) with an item in progress
    assert ended
    assert (body["status"], body["counts"]["inProgress"]) == ("IN_PROGRESS", 1)
    assert [(i["status"], i["error"]) for i in body["items"]] == [("FAILED", error)]


def test_another_org_s_or_an_unknown_onboarding_is_not_found(sw_writer):
    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("A")]}).json()
    other = make_caller(OrganizationFactory(), Role.WRITER)
    stranger = url(other, f"/{accepted['onboardingId']}")
    assert_error(other.get(stranger), 404, "onboardingNotFound")
    assert_error(other.post(f"{stranger}/cancel"), 404, "onboardingNotFound")
    unknown = url(sw_writer, "/5b1f0c2e-8d7a-4e36-9f41-2c6b0a9d3e57")
    assert_error(sw_writer.get(unknown), 404, "onboardingNotFound")
    assert_error(sw_writer.get(url(sw_writer, "/not-a-uuid")), 400, "invalidRequest")
    # and nothing of the first org's onboarding was cancelled
    assert Onboarding.objects.get().cancelled_at is None


def test_the_list_is_newest_first_without_items(sw_writer):
    first = sw_writer.post(url(sw_writer), {"brands": [brand("A")]}).json()
    second = sw_writer.post(url(sw_writer), {"brands": [brand("B"), brand("C")]}).json()
    page = sw_writer.get(url(sw_writer, "?limit=1")).json()
    assert [o["onboardingId"] for o in page["items"]] == [second["onboardingId"]]
    assert set(page["items"][0]) == {
        "onboardingId",
        "status",
        "total",
        "counts",
        "createdAt",
        "updatedAt",
        "finishedAt",
        "retryOf",
        "maxFailedItems",
        "cancelledBy",
    }
    rest = sw_writer.get(url(sw_writer, f"?limit=1&cursor={page['nextCursor']}")).json()
    assert [o["onboardingId"] for o in rest["items"]] == [first["onboardingId"]]
    assert rest["nextCursor"] is None


def test_a_cancel_before_any_step_ran_cancels_every_item(sw_writer):
    accepted = sw_writer.post(
        url(sw_writer), {"brands": [brand("A", ("US", "en")), brand("B")]}
    ).json()
    response = sw_writer.post(url(sw_writer, f"/{accepted['onboardingId']}/cancel"))
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "CANCELLED"
    assert body["counts"] == {"inProgress": 0, "completed": 0, "failed": 0, "cancelled": 2}
    assert {i["error"]["code"] for i in body["items"]} == {"provisioningCancelled"}
    assert set(ProvisioningAttempt.objects.values_list("status", "reason")) == {
        (AttemptStatus.FAILED, AttemptReason.CANCELLED)
    }
    assert Market.objects.count() == 0  # the reservation is released
    assert body["finishedAt"] is not None and body["updatedAt"] == body["finishedAt"]
    # a second cancel: the onboarding has ended (SPEC §12.2), nothing changes
    before = Onboarding.objects.values().get()
    again = sw_writer.post(url(sw_writer, f"/{accepted['onboardingId']}/cancel"))
    assert_error(again, 409, "onboardingFinished")
    assert Onboarding.objects.values().get() == before


def test_a_repeated_request_with_its_idempotency_key_replays_the_first_answer(sw_writer):
    body = {"brands": [brand("A"), brand("B")]}
    first = sw_writer.post(url(sw_writer), body, HTTP_IDEMPOTENCY_KEY="onboard-1")
    again = sw_writer.post(url(sw_writer), body, HTTP_IDEMPOTENCY_KEY="onboard-1")
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Onboarding.objects.count() == 1 and Brand.objects.count() == 2


@pytest.mark.parametrize("value", [True, False])
def test_the_dropped_async_member_is_accepted_and_ignored_with_a_deprecation_header(
    sw_writer, published, value
):
    """SPEC §13.6: a client generated from an earlier release sends `"async": false`; it is
    accepted and ignored (an onboarding is always asynchronous) until the next major version,
    and the answer says it is deprecated (RFC 9745)."""
    body = {"brands": [brand("A")], "async": value}
    response = sw_writer.post(url(sw_writer), body, HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 202, response.json()
    assert response["Deprecation"] == "@1796428800"
    assert response.json()["status"] == "IN_PROGRESS"
    assert Onboarding.objects.get().total == 1
    # a replay says so too
    replayed = sw_writer.post(url(sw_writer), body, HTTP_IDEMPOTENCY_KEY="k1")
    assert replayed["Idempotent-Replayed"] == "true"
    assert replayed["Deprecation"] == "@1796428800"
    assert replayed.json() == response.json()
    # without it, no such header
    plain = sw_writer.post(url(sw_writer), {"brands": [brand("B")]})
    assert plain.status_code == 202
    assert "Deprecation" not in plain


def test_a_dropped_async_that_is_not_a_boolean_is_refused_and_nothing_is_written(
    sw_writer, published
):
    response = sw_writer.post(url(sw_writer), {"brands": [brand("A")], "async": "false"})
    error = assert_error(response, 400, "invalidRequest")
    assert error["details"] == {"field": "async"}
    assert written() == NOTHING
    assert published == []
