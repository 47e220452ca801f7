"""The work one org can queue is bounded, and requests that cannot cost seconds (SPEC §12.4):
an org's open onboarding items are capped and an onboarding's markets too (429
`onboardingLimit`, `Retry-After`, nothing written); a list longer than its limit is refused
before its members are validated; an onboarding's cancel is set-based (a bounded number of SQL
statements whatever its size) and its counts are kept as its items end. The chains are
recorded, not run (`published`)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import webhooks.tasks  # noqa: F401 - registers the webhook steps with the runner
from jobs.models import AsyncJob, JobStatus, JobType
from jobs.runner import run_step
from jobs.services import job_finish
from jobs.signals import chain_ended_send
from provisioning.models import AttemptReason, AttemptStatus, Onboarding, ProvisioningAttempt
from serenity.models import Market
from tests.api.test_onboardings import brand, url, written
from tests.factories import BrandFactory, MarketFactory
from tests.support import assert_error
from webhooks.events import EVENTS_JOB_TYPE
from webhooks.models import Webhook, WebhookDelivery

ONE_MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def published():  # type: ignore[no-untyped-def]
    """No worker runs the chains here."""
    from unittest import mock

    sent: list[str] = []
    with mock.patch(
        "jobs.services.publish_job", side_effect=lambda **kw: sent.append(str(kw["job_id"])) or True
    ):
        yield sent


def run_events_jobs() -> None:
    """Run the outbox jobs of the job events written after a cancel, as a worker does."""
    for job_id in AsyncJob.objects.filter(job_type=EVENTS_JOB_TYPE).values_list("id", flat=True):
        run_step(job_id=str(job_id))


def limit_refusal(response: Any, message: str) -> None:
    assert response.status_code == 429, response.content
    assert response.json() == {"error": "onboardingLimit", "message": message}
    assert response["Retry-After"] == "60"


# --- The org's open items and the onboarding's markets --------------------------------------


def test_an_onboarding_past_the_org_s_open_items_is_429_and_writes_nothing(sw_writer, settings):
    # given a cap of 3 open items and an onboarding of 2 in progress
    settings.SERENITY_ONBOARDING_OPEN_ITEMS_MAX = 3
    assert sw_writer.post(url(sw_writer), {"brands": [brand("A"), brand("B")]}).status_code == 202
    before = written()
    # when another onboarding of 2 comes
    response = sw_writer.post(url(sw_writer), {"brands": [brand("C"), brand("D")]})
    # then it is refused, with when to come back, and nothing is written
    limit_refusal(
        response,
        "The organization may have at most 3 onboarding items in progress; 2 are, and this "
        "onboarding adds 2.",
    )
    assert written() == before
    # while one that fits is accepted
    assert sw_writer.post(url(sw_writer), {"brands": [brand("C")]}).status_code == 202


def test_items_that_ended_free_the_cap_and_refused_items_never_count(sw_writer, settings):
    # given a cap of 2, an onboarding of 2 of which one ended and one was refused at once
    settings.SERENITY_ONBOARDING_OPEN_ITEMS_MAX = 2
    BrandFactory(organization=sw_writer.org, name="Taken")
    sw_writer.post(url(sw_writer), {"brands": [brand("A"), brand("B")]})
    job_finish(
        job=AsyncJob.objects.get(pk=ProvisioningAttempt.objects.get(brand__name="A").job_id),
        claim_token=None,
        status=JobStatus.FAILED,
    )
    # when one more comes with a name taken (refused at once, never open)
    response = sw_writer.post(url(sw_writer), {"brands": [brand("C"), brand("Taken")]})
    # then it fits: B and C are open
    assert response.status_code == 202, response.json()
    limit_refusal(
        sw_writer.post(url(sw_writer), {"brands": [brand("D")]}),
        "The organization may have at most 2 onboarding items in progress; 2 are, and this "
        "onboarding adds 1.",
    )


def test_an_org_s_own_cap_wins_over_the_default(sw_writer, settings):
    # given the default cap is 1 but this org may have 3 open
    settings.SERENITY_ONBOARDING_OPEN_ITEMS_MAX = 1
    sw_writer.org.onboarding_open_items_max = 3
    sw_writer.org.save(update_fields=["onboarding_open_items_max"])
    # then 3 are accepted, a 4th is refused
    body = {"brands": [brand("A"), brand("B"), brand("C")]}
    assert sw_writer.post(url(sw_writer), body).status_code == 202
    limit_refusal(
        sw_writer.post(url(sw_writer), {"brands": [brand("D")]}),
        "The organization may have at most 3 onboarding items in progress; 3 are, and this "
        "onboarding adds 1.",
    )


def test_an_onboarding_past_its_markets_in_all_is_429_and_writes_nothing(sw_writer, settings):
    settings.SERENITY_ONBOARDING_MARKETS_MAX = 3
    body = {
        "brands": [brand("A", ("US", "en"), ("DE", "de")), brand("B", ("FR", "fr"), ("US", "en"))]
    }
    limit_refusal(
        sw_writer.post(url(sw_writer), body),
        "An onboarding holds at most 3 markets in all; this one has 4.",
    )
    assert written() == {"onboardings": 0, "brands": 0, "attempts": 0, "jobs": 0, "markets": 0}


# --- Lists refused before their members ------------------------------------------------------


def tiny_items(item: Any) -> list[Any]:
    """A list of `item`s filling (most of) a 1 MiB body."""
    return [item] * ((ONE_MIB - 1000) // (len(json.dumps(item, separators=(",", ":"))) + 1))


def post_json(caller: Any, path: str, body: dict[str, Any]) -> Any:
    raw = json.dumps(body, separators=(",", ":"))
    assert ONE_MIB - 1000 <= len(raw) <= ONE_MIB, len(raw)
    return caller.client.post(path, raw, content_type="application/json")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            {"brands": tiny_items({})},
            "brands",
            "Ensure this field has no more than 1000 elements.",
        ),
        (
            {"brands": [{"name": "A", "baseUrl": "https://a.example", "markets": tiny_items(0)}]},
            "brands[0].markets",
            "Ensure this field has no more than 50 elements.",
        ),
        (
            {"brands": [{"name": "A", "baseUrl": "https://a.example", "aliases": tiny_items(0)}]},
            "brands[0].aliases",
            "Ensure this field has no more than 100 elements.",
        ),
    ],
)
def test_a_1_mib_onboarding_list_of_tiny_items_is_refused_naming_the_list(
    sw_writer, body, field, message
):
    response = post_json(sw_writer, url(sw_writer), body)
    assert_error(response, 400, "invalidRequest")
    assert response.json() == {
        "error": "invalidRequest",
        "message": f"{field}: {message}",
        "details": {"field": field},
    }
    assert written() == {"onboardings": 0, "brands": 0, "attempts": 0, "jobs": 0, "markets": 0}


@pytest.mark.parametrize(
    ("route", "body", "field", "message"),
    [
        ("activate", {"markets": tiny_items({})}, "markets", "at most 50 markets per request."),
        ("prompts", {"prompts": tiny_items({})}, "prompts", "at most 500 prompts per request."),
        (
            "markets",
            {"market": "US", "languageCode": "en", "brandNames": tiny_items(0)},
            "brandNames",
            "Ensure this field has no more than 50 elements.",
        ),
    ],
)
def test_a_1_mib_list_of_tiny_items_on_a_brand_route_is_refused_naming_the_list(
    sw_writer, route, body, field, message
):
    # given a brand with Serenity on (and a market, for prompts)
    target = BrandFactory(organization=sw_writer.org, serenity_enabled=True)
    MarketFactory(brand=target)
    before = written()
    path = f"/v2/orgs/{sw_writer.org.id}/brands/{target.id}/serenity/{route}"
    # when the list fills a 1 MiB body
    response = post_json(sw_writer, path, body)
    # then it is refused naming the list, and nothing is written
    assert response.json() == {
        "error": "invalidRequest",
        "message": f"{field}: {message}",
        "details": {"field": field},
    }
    assert response.status_code == 400
    assert written() == before


# --- A set-based cancel ------------------------------------------------------------------------


def test_cancelling_an_onboarding_of_1000_items_takes_a_bounded_number_of_statements(
    sw_writer, django_capture_on_commit_callbacks
):
    # given an onboarding of 1,000 brands whose chains have not run
    brands = [brand(f"Brand {n}", ("US", "en")) for n in range(1000)]
    accepted = sw_writer.post(url(sw_writer), {"brands": brands}).json()
    path = url(sw_writer, f"/{accepted['onboardingId']}/cancel")
    # when it is cancelled
    with (
        CaptureQueriesContext(connection) as queries,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = sw_writer.post(path)
    # then every item is cancelled in a number of statements independent of the item count
    assert len(queries) <= 40, len(queries)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["status"], body["total"]) == ("CANCELLED", 1000)
    assert body["counts"] == {"inProgress": 0, "completed": 0, "failed": 0, "cancelled": 1000}
    assert body["finishedAt"] is not None
    assert {i["status"] for i in body["items"]} == {"CANCELLED"}
    assert set(AsyncJob.objects.values_list("status", flat=True)) == {JobStatus.CANCELLED}
    assert set(ProvisioningAttempt.objects.values_list("status", "reason")) == {
        (AttemptStatus.FAILED, AttemptReason.CANCELLED)
    }
    # the markets reserved for the chains are freed
    assert Market.objects.count() == 0


def test_a_cancel_after_promotion_cancels_only_chained_work_that_has_not_started(sw_writer):
    # given three items: one before promotion, one promoted whose chained step waits, and one
    # promoted whose chained step a worker runs
    accepted = sw_writer.post(
        url(sw_writer), {"brands": [brand(n, ("US", "en")) for n in ("A", "B", "C")]}
    ).json()
    attempts = {a.brand.name: a for a in ProvisioningAttempt.objects.select_related("brand")}
    for name in ("B", "C"):
        ProvisioningAttempt.objects.filter(pk=attempts[name].pk).update(workspace_promoted=True)
        AsyncJob.objects.filter(pk=attempts[name].job_id).update(status=JobStatus.COMPLETED)
        root = AsyncJob.objects.get(pk=attempts[name].job_id)
        AsyncJob.objects.filter(pk=root.pk).update(current_id=root.next_id)
    running = AsyncJob.objects.get(root_id=attempts["C"].job_id)
    AsyncJob.objects.filter(pk=running.pk).update(
        claim_token=uuid.uuid4(), lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    # when the onboarding is cancelled
    response = sw_writer.post(url(sw_writer, f"/{accepted['onboardingId']}/cancel"))
    # then A's attempt failed cancelled, B's chained step is cancelled and its attempt ready,
    # C's running step goes on (its attempt still pending)
    assert response.status_code == 200
    statuses = {
        a.brand.name: (a.status, a.reason)
        for a in ProvisioningAttempt.objects.select_related("brand")
    }
    assert statuses == {
        "A": (AttemptStatus.FAILED, AttemptReason.CANCELLED),
        "B": (AttemptStatus.READY, None),
        "C": (AttemptStatus.PENDING, None),
    }
    assert AsyncJob.objects.get(root_id=attempts["B"].job_id).status == JobStatus.CANCELLED
    assert AsyncJob.objects.get(pk=running.pk).status == JobStatus.IN_PROGRESS
    body = response.json()
    assert (body["status"], body["counts"]) == (
        "IN_PROGRESS",
        {"inProgress": 1, "completed": 0, "failed": 0, "cancelled": 2},
    )
    # and when C's step ends (its ending seen twice), the onboarding ends CANCELLED, C counted
    # once
    job_finish(job=running, claim_token=None, status=JobStatus.COMPLETED)
    chain_ended_send(job=AsyncJob.objects.get(pk=running.pk), status=JobStatus.COMPLETED)
    onboarding = Onboarding.objects.get()
    assert (onboarding.in_progress, onboarding.completed, onboarding.cancelled) == (0, 1, 2)
    assert onboarding.completed_at is not None and onboarding.cancelled_at is not None


def test_a_cancel_sends_the_job_event_of_every_chain_it_ended(sw_writer):
    # given an endpoint subscribed to job.cancelled and an onboarding of two
    Webhook.objects.create(
        organization=sw_writer.org,
        url="https://hooks.example/in",
        events=["job.cancelled"],
        secret_encrypted="x",
    )
    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("A"), brand("B")]}).json()
    # when it is cancelled, and the worker writes its chains' events
    assert sw_writer.post(url(sw_writer, f"/{accepted['onboardingId']}/cancel")).status_code == 200
    assert not WebhookDelivery.objects.exists()
    run_events_jobs()
    # then one job.cancelled delivery per chain
    roots = set(
        AsyncJob.objects.filter(
            root__isnull=True, job_type=JobType.PROVISION_WORKSPACE
        ).values_list("pk", flat=True)
    )
    deliveries = WebhookDelivery.objects.filter(event_type="job.cancelled")
    assert {uuid.UUID(json.loads(d.body)["data"]["jobId"]) for d in deliveries} == roots
    assert len(roots) == 2 and deliveries.count() == 2


def test_a_cancel_of_1000_items_publishes_their_events_to_10_endpoints_set_based(
    sw_writer, published, django_capture_on_commit_callbacks
):
    # given 10 endpoints taking every event, and an onboarding of 1,000 brands
    for n in range(10):
        Webhook.objects.create(
            organization=sw_writer.org,
            url=f"https://hooks.example/{n}",
            events=["job.cancelled", "onboarding.cancelled"],
            secret_encrypted="x",
        )
    brands = [brand(f"Brand {n}", ("US", "en")) for n in range(1000)]
    accepted = sw_writer.post(url(sw_writer), {"brands": brands}).json()
    path = url(sw_writer, f"/{accepted['onboardingId']}/cancel")
    published.clear()
    # when it is cancelled
    with (
        CaptureQueriesContext(connection) as queries,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = sw_writer.post(path)
    # then the answer writes the onboarding's event and outbox jobs for its chains' events
    # (SPEC §13.6: events after the answer), in a number of statements and messages
    # independent of the chains and endpoints
    assert response.status_code == 200, response.json()
    assert len(queries) <= 50, len(queries)
    events = WebhookDelivery.objects.values_list("event_type", flat=True)
    assert list(events) == ["onboarding.cancelled"] * 10
    events_jobs = AsyncJob.objects.filter(job_type=EVENTS_JOB_TYPE)
    assert sorted(len(job.metadata["events"]) for job in events_jobs) == [100] * 10
    # (two messages start the onboarding event's 10 deliveries, one each events job)
    assert len(published) == 12, published
    assert set(published[2:]) == {str(job.pk) for job in events_jobs}
    # and the worker then writes their 10,000 deliveries set-based, publishing a few messages
    # (a delivery's message runs the fairest due attempt, then the next: webhooks.slots)
    published.clear()
    with (
        CaptureQueriesContext(connection) as queries,
        django_capture_on_commit_callbacks(execute=True),
    ):
        run_events_jobs()
    assert len(queries) <= 10 * 50, len(queries)
    assert events.filter(event_type="job.cancelled").count() == 10_000
    assert events.filter(event_type="onboarding.cancelled").count() == 10
    assert len(published) == 2 * 10
    # and one delivery job each (the pending cap of 10,000 dropped the 10 oldest as overflow)
    assert AsyncJob.objects.filter(job_type="webhookDelivery").count() == 10_010
    assert WebhookDelivery.objects.filter(last_error="overflow").count() == 10


# --- Cheap refusals (SPEC §13.6) -----------------------------------------------------------------


@pytest.fixture
def validated(monkeypatch):  # type: ignore[no-untyped-def]
    """How many URL and market members were validated (no timing: work counted)."""
    from api import fields

    counts = {"urls": 0, "markets": 0}

    def counting(kind, original):  # type: ignore[no-untyped-def]
        def run(self, data):  # type: ignore[no-untyped-def]
            counts[kind] += 1
            return original(self, data)

        return run

    monkeypatch.setattr(
        fields.HttpUrlField,
        "to_internal_value",
        counting("urls", fields.HttpUrlField.to_internal_value),
    )
    monkeypatch.setattr(
        fields.MarketField,
        "to_internal_value",
        counting("markets", fields.MarketField.to_internal_value),
    )
    return counts


def test_a_body_invalid_in_every_member_stops_after_a_hundred_refusals(
    sw_writer, published, validated
):
    # given 1,000 items inside every limit, each with 20 URLs that are all refused
    items = [{**brand(f"B{n}"), "urls": ["ftp://x.example"] * 20} for n in range(1000)]
    # when
    response = sw_writer.post(url(sw_writer), {"brands": items})
    # then the first is named, nothing is written, and about a hundred members were validated,
    # not 21,000
    error = assert_error(response, 400, "invalidRequest")
    assert error["details"] == {"field": "brands[0].urls[0]"}
    assert written() == {"onboardings": 0, "brands": 0, "attempts": 0, "jobs": 0, "markets": 0}
    assert published == []
    assert validated["urls"] <= 150


def test_markets_past_the_onboarding_s_limit_are_refused_before_any_is_validated(
    sw_writer, published, validated, settings
):
    # given 200 items of 50 valid markets each: 10,000 markets, over the 5,000 in all
    markets = [("US", "en")] * 50
    items = [brand(f"B{n}", *markets) for n in range(200)]
    # when
    response = sw_writer.post(url(sw_writer), {"brands": items})
    # then 429 before a single market was validated
    limit_refusal(response, "An onboarding holds at most 5000 markets in all; this one has 10000.")
    assert validated["markets"] == 0
    assert written() == {"onboardings": 0, "brands": 0, "attempts": 0, "jobs": 0, "markets": 0}
