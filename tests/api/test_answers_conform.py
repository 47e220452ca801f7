"""Every operation of the served OpenAPI document, answered for real and checked against it
(SPEC §11.5): each group below drives its routes through the Django test client, success and
the main refusals, and every answer is checked by `tests.conformance.ServedDocument` (its
status documented on its operation, its body valid under a strict OpenAPI 3.0 validator, nulls
included, its required headers sent). Each group then asserts which (operation, status) pairs
it saw; `test_the_groups_cover_every_operation` that together they cover the whole document.

The same check runs under every other test of the suite (tests/conftest.py); this module makes
sure that no operation is left out of it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.http import JsonResponse
from django.utils import timezone
from rest_framework.test import APIClient

import provisioning.tasks  # noqa: F401 - registers the provisioning steps with the runner
from jobs import runner
from jobs.models import AsyncJob, JobStatus
from provisioning import credentials
from provisioning.models import UpstreamCredential
from serenity.models import Brand, Role
from tests.conformance import Checked, ServedDocument
from tests.conftest import Caller, make_caller
from tests.factories import BrandFactory, OrganizationFactory
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_event_publish

GROUPS: dict[str, set[str]] = {
    "brands": {"brandList", "brandCreate", "brandGet", "brandUpdate"},
    "markets": {"marketList", "marketCreate", "marketGet", "marketDelete", "languageList"},
    "serenity": {"serenityGet"},
    "activation": {"brandActivate", "brandDeactivate", "promptsCreate"},
    "jobs": {"jobList", "jobGet", "promptJobGet", "jobCancel", "orgJobList", "orgJobGet"},
    "onboardings": {
        "onboardingCreate",
        "onboardingList",
        "onboardingGet",
        "onboardingCancel",
        "onboardingRetry",
        "onboardingItems",
    },
    "reconciliations": {"reconciliationCreate", "reconciliationList", "reconciliationGet"},
    "webhooks": {
        "webhookCreate",
        "webhookList",
        "webhookGet",
        "webhookDelete",
        "webhookDeliveryList",
        "webhookDeliveryGet",
        "webhookRedeliver",
        "webhookUpdate",
        "webhookRotateSecret",
        "webhookTest",
        "webhookAttemptList",
    },
    "operations": {"healthz", "readyz", "metrics"},
    "ledger": {"upstreamCallList"},
}


@pytest.fixture
def seen(served_document: ServedDocument) -> Iterator[set[Checked]]:
    with served_document.recording() as checked:
        yield checked


def pairs(seen: set[Checked]) -> set[tuple[str, int]]:
    return {(c.operation_id, c.status) for c in seen}


def brands_path(caller: Caller) -> str:
    return f"/v2/orgs/{caller.org.id}/brands"


def serenity_path(caller: Caller, brand: Brand | str) -> str:
    brand_id = brand if isinstance(brand, str) else brand.pk
    return f"{brands_path(caller)}/{brand_id}/serenity"


def finish_chain(job_id: str) -> dict[str, Any]:
    """Run the chain's steps in this process, as a worker would, until it has ended."""
    for _ in range(20):
        root = AsyncJob.objects.select_related("current").get(pk=job_id)
        step = root.current or root
        if step.status != JobStatus.IN_PROGRESS:
            break
        AsyncJob.objects.filter(pk=step.pk).update(run_after=timezone.now())
        runner.run_step(job_id=str(step.pk))
    root = AsyncJob.objects.select_related("current").get(pk=job_id)
    assert (root.current or root).status != JobStatus.IN_PROGRESS
    return {"status": (root.current or root).status}


def test_the_groups_cover_every_operation(served_document: ServedDocument) -> None:
    assert set().union(*GROUPS.values()) == served_document.operation_ids()


def test_brand_routes(sw_writer: Caller, sim: Any, seen: set[Checked], settings: Any) -> None:
    path = brands_path(sw_writer)
    # success: sync bare create, a create with its market, async create, list, read, update
    bare = sw_writer.post(path, {"name": "Bare", "baseUrl": "https://bare.example"})
    assert bare.status_code == 201, bare.json()
    with_market = sw_writer.post(
        path,
        {
            "name": "Marketed",
            "baseUrl": "https://marketed.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    assert with_market.status_code == 201 and with_market.json()["market"]["market"] == "US"
    accepted = sw_writer.post(
        path, {"name": "Later", "baseUrl": "https://l.example", "async": True}
    )
    assert accepted.status_code == 202, accepted.json()
    assert accepted.json()["semrushProvisioningError"] is None
    assert sw_writer.get(path).status_code == 200
    brand = f"{path}/{bare.json()['id']}"
    assert sw_writer.get(brand).status_code == 200
    assert sw_writer.patch(brand, {"aliases": ["B"], "serenityEnabled": None}).status_code == 200
    # refusals: tenancy and the checks of every route, in their order
    assert APIClient().get(path).status_code == 401
    assert sw_writer.get(f"{path}/not-a-uuid").status_code == 400
    assert sw_writer.get(f"/v2/orgs/{uuid.uuid4()}/brands").status_code == 404
    assert sw_writer.get(f"/v2/orgs/{OrganizationFactory().pk}/brands").status_code == 403
    reader = make_caller(sw_writer.org, Role.READER)
    assert reader.patch(brand, {"aliases": []}).status_code == 403
    assert sw_writer.get(f"{path}/{BrandFactory().pk}").status_code == 404
    assert sw_writer.get(path, HTTP_ACCEPT="text/html").status_code == 406
    assert sw_writer.get(f"{path}?cursor=forged").status_code == 400
    # refusals of the body: not JSON, too large, a taken name, a reused Idempotency-Key
    not_json = sw_writer.client.post(path, "name=x", content_type="text/plain")
    assert not_json.status_code == 415
    settings.SERENITY_MAX_BODY_BYTES = 64
    assert sw_writer.post(path, {"name": "x" * 100}).status_code == 413
    settings.SERENITY_MAX_BODY_BYTES = 1024 * 1024
    assert sw_writer.post(path, {"name": "Bare", "baseUrl": "https://b.example"}).status_code == 409
    key = {"HTTP_IDEMPOTENCY_KEY": "k-1"}
    assert sw_writer.post(path, {"name": "Keyed", "status": "pending"}, **key).status_code == 201
    assert sw_writer.post(path, {"name": "Other", "status": "pending"}, **key).status_code == 422
    # then
    assert pairs(seen) >= {
        ("brandCreate", 201),
        ("brandCreate", 202),
        ("brandCreate", 409),
        ("brandCreate", 413),
        ("brandCreate", 415),
        ("brandCreate", 422),
        ("brandList", 200),
        ("brandList", 400),
        ("brandList", 401),
        ("brandList", 403),
        ("brandList", 404),
        ("brandList", 406),
        ("brandGet", 200),
        ("brandGet", 400),
        ("brandGet", 404),
        ("brandUpdate", 200),
        ("brandUpdate", 403),
    }


def test_brand_reads_show_a_failed_provisioning(
    sw_writer: Caller, sim: Any, seen: set[Checked]
) -> None:
    # given a workspace that fails to settle
    sim.configure({"settleOutcome": "failed", "settleSeconds": 0})
    created = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Doomed",
            "baseUrl": "https://doomed.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    assert created.status_code == 502, created.json()
    accepted = sw_writer.post(
        brands_path(sw_writer), {"name": "Doomed", "baseUrl": "https://d.example", "async": True}
    )
    finish_chain(accepted.json()["jobId"])
    # when
    brand = sw_writer.get(f"{brands_path(sw_writer)}/{accepted.json()['id']}")
    job = sw_writer.get(accepted["Location"])
    # then
    assert brand.json()["semrushProvisioningStatus"] == "failed"
    assert brand.json()["semrushProvisioningError"]["code"] == "terminal"
    assert job.json()["error"]["code"] == "subworkspaceCreationFailed"
    assert pairs(seen) >= {("brandCreate", 502), ("brandGet", 200), ("jobGet", 200)}


def test_market_routes(
    sw_writer: Caller, active_brand: Brand, sim: Any, seen: set[Checked]
) -> None:
    markets = f"{serenity_path(sw_writer, active_brand)}/markets"
    created = sw_writer.post(markets, {"market": "US", "languageCode": "en"})
    assert created.status_code == 201, created.json()
    assert sw_writer.post(markets, {"market": "US", "languageCode": "en"}).status_code == 409
    assert sw_writer.post(markets, {"market": "XX", "languageCode": "en"}).status_code == 400
    accepted = sw_writer.post(markets, {"market": "DE", "languageCode": "de", "async": True})
    assert accepted.status_code == 202, accepted.json()
    assert sw_writer.get(markets).status_code == 200
    assert sw_writer.get(f"{markets}/2840/en").status_code == 200
    assert sw_writer.get(f"{markets}/2276/fr").status_code == 404
    assert sw_writer.delete(f"{markets}/2840/en").status_code == 204
    assert sw_writer.delete(f"{markets}/2840/en").status_code == 204
    languages = f"/v2/orgs/{sw_writer.org.id}/serenity/languages"
    assert sw_writer.get(languages).status_code == 200
    # a brand with Serenity off
    off = BrandFactory(organization=sw_writer.org, serenity_enabled=False)
    assert sw_writer.get(f"{serenity_path(sw_writer, off)}/markets").status_code == 404
    assert pairs(seen) >= {
        ("marketCreate", 201),
        ("marketCreate", 202),
        ("marketCreate", 400),
        ("marketCreate", 409),
        ("marketList", 200),
        ("marketList", 404),
        ("marketGet", 200),
        ("marketGet", 404),
        ("marketDelete", 204),
        ("languageList", 200),
    }


def test_the_org_s_serenity_state(sw_writer: Caller, seen: set[Checked]) -> None:
    # ok, then refused (SPEC §13.2): both answers as documented
    org_path = f"/v2/orgs/{sw_writer.org.id}/serenity"
    assert sw_writer.get(org_path).status_code == 200
    credential = credentials.credential_of(sw_writer.org)
    UpstreamCredential.objects.create(key=credential.key, accepted_at=timezone.now())
    assert credentials.credential_refused(credential, organization_id=sw_writer.org.id)
    refused = sw_writer.get(org_path)
    assert refused.json()["credential"]["status"] == "refused"
    assert pairs(seen) >= {("serenityGet", 200)}


def test_upstream_failures(sw_writer: Caller, sim: Any, seen: set[Checked]) -> None:
    # given a catalogue that upstream fails to serve
    sim.add_fault(
        {
            "method": "GET",
            "pathRegex": "/languages$",
            "status": 503,
            "times": 3,
            "body": {"message": "service unavailable"},
        }
    )
    # when
    answer = sw_writer.get(f"/v2/orgs/{sw_writer.org.id}/serenity/languages")
    # then
    assert answer.status_code == 502
    assert pairs(seen) >= {("languageList", 502)}


def test_activation_and_prompt_routes(
    sw_writer: Caller, active_brand: Brand, sim: Any, seen: set[Checked]
) -> None:
    serenity = serenity_path(sw_writer, active_brand)
    assert (
        sw_writer.post(f"{serenity}/markets", {"market": "US", "languageCode": "en"}).status_code
        == 201
    )
    # activation: bare re-activation, project activation, async, a bad body
    assert sw_writer.post(f"{serenity}/activate").status_code == 200
    project = sw_writer.post(
        f"{serenity}/activate",
        {"brandDomain": "acme.example", "markets": [{"market": "US", "languageCode": "en"}]},
    )
    assert project.status_code == 200, project.json()
    assert project.json()["markets"][0]["body"]["error"] == "sliceExists"
    assert sw_writer.post(f"{serenity}/activate", {"markets": []}).status_code == 400
    # prompts: sync counts, async, a prompt naming no market
    prompt = {"text": "best shoes", "geoTargetId": 2840, "languageCode": "en"}
    assert sw_writer.post(f"{serenity}/prompts", {"prompts": [prompt]}).status_code == 200
    later = sw_writer.post(f"{serenity}/prompts", {"prompts": [prompt], "async": True})
    assert later.status_code == 202
    elsewhere = {**prompt, "geoTargetId": 2276}
    assert sw_writer.post(f"{serenity}/prompts", {"prompts": [elsewhere]}).status_code == 400
    # deactivation, and its body checked like any other
    not_json = sw_writer.client.post(f"{serenity}/deactivate", "x", content_type="text/plain")
    assert not_json.status_code == 415
    assert sw_writer.post(f"{serenity}/deactivate").status_code == 200
    async_activation = sw_writer.post(f"{serenity}/activate", {"async": True})
    assert async_activation.status_code == 202
    assert pairs(seen) >= {
        ("brandActivate", 200),
        ("brandActivate", 202),
        ("brandActivate", 400),
        ("brandDeactivate", 200),
        ("brandDeactivate", 415),
        ("promptsCreate", 200),
        ("promptsCreate", 202),
        ("promptsCreate", 400),
    }


def test_job_routes(sw_writer: Caller, active_brand: Brand, sim: Any, seen: set[Checked]) -> None:
    serenity = serenity_path(sw_writer, active_brand)
    first = sw_writer.post(
        f"{serenity}/markets", {"market": "US", "languageCode": "en", "async": True}
    )
    second = sw_writer.post(
        f"{serenity}/markets", {"market": "DE", "languageCode": "de", "async": True}
    )
    assert first.status_code == 202 and second.status_code == 409, second.json()
    job_id = first.json()["jobId"]
    # in progress: polled on both paths, listed
    polled = sw_writer.get(f"{serenity}/jobs/{job_id}")
    assert polled.status_code == 200 and polled.json()["status"] == "IN_PROGRESS"
    assert polled.json()["result"] is None and polled.json()["error"] is None
    assert sw_writer.get(f"{serenity}/prompts/jobs/{job_id}").status_code == 200
    assert sw_writer.get(f"{serenity}/jobs").status_code == 200
    assert sw_writer.get(f"{serenity}/jobs?status=RUNNING").status_code == 400
    # completed: its result is the sync path's answer
    finish_chain(job_id)
    done = sw_writer.get(f"{serenity}/jobs/{job_id}")
    assert done.json()["status"] == "COMPLETED", done.json()
    assert done.json()["result"]["status"] == 201
    assert sw_writer.post(f"{serenity}/jobs/{job_id}/cancel").status_code == 409
    # cancelled
    again = sw_writer.post(
        f"{serenity}/markets", {"market": "DE", "languageCode": "de", "async": True}
    )
    cancelled = sw_writer.post(f"{serenity}/jobs/{again.json()['jobId']}/cancel")
    assert (
        cancelled.status_code == 200
        and cancelled.json()["error"]["code"] == "provisioningCancelled"
    )
    assert sw_writer.get(f"{serenity}/jobs").json()["items"][0]["status"] == "CANCELLED"
    org_jobs = f"/v2/orgs/{sw_writer.org.id}/serenity/jobs"
    assert sw_writer.get(f"{org_jobs}?status=COMPLETED").json()["items"][0]["jobId"] == job_id
    assert sw_writer.get(f"{org_jobs}?expand=steps").status_code == 400
    by_org = sw_writer.get(f"{org_jobs}/{job_id}").json()
    assert by_org == sw_writer.get(f"{serenity}/jobs/{job_id}").json()
    unknown = "00000000-0000-4000-8000-000000000000"
    assert sw_writer.get(f"{org_jobs}/{unknown}").status_code == 404
    assert sw_writer.get(f"{serenity}/jobs/{unknown}").status_code == 404
    assert sw_writer.post(f"{serenity}/jobs/{unknown}/cancel").status_code == 404
    assert pairs(seen) >= {
        ("marketCreate", 202),
        ("marketCreate", 409),
        ("jobGet", 200),
        ("jobGet", 404),
        ("promptJobGet", 200),
        ("jobList", 200),
        ("jobList", 400),
        ("jobCancel", 200),
        ("jobCancel", 404),
        ("jobCancel", 409),
        ("orgJobList", 200),
        ("orgJobList", 400),
        ("orgJobGet", 200),
        ("orgJobGet", 404),
    }


def test_onboarding_routes(sw_writer: Caller, sim: Any, seen: set[Checked]) -> None:
    path = f"/v2/orgs/{sw_writer.org.id}/serenity/onboardings"
    BrandFactory(organization=sw_writer.org, name="Taken")
    brands = [
        {
            "name": name,
            "baseUrl": "https://x.example",
            "markets": [{"market": "US", "languageCode": "en"}],
        }
        for name in ("Fresh", "Taken")
    ]
    accepted = sw_writer.post(path, {"brands": brands})
    assert accepted.status_code == 202, accepted.json()
    assert sw_writer.post(path, {"brands": []}).status_code == 400
    read = sw_writer.get(accepted["Location"])
    assert read.status_code == 200
    assert [item["status"] for item in read.json()["items"]] == ["IN_PROGRESS", "FAILED"]
    assert sw_writer.get(path).status_code == 200
    assert sw_writer.post(f"{accepted['Location']}/retry").status_code == 409
    assert sw_writer.get(f"{accepted['Location']}/items").status_code == 200
    assert sw_writer.get(f"{accepted['Location']}/items", HTTP_ACCEPT="text/csv").status_code == 200
    assert sw_writer.post(f"{accepted['Location']}/cancel").status_code == 200
    assert sw_writer.post(f"{accepted['Location']}/cancel").status_code == 409
    redrive = sw_writer.post(f"{accepted['Location']}/retry")
    assert redrive.status_code == 202, redrive.json()
    assert sw_writer.get(f"{path}/{uuid.uuid4()}/items").status_code == 404
    assert sw_writer.get(f"{path}?status=CANCELLED").status_code == 200
    assert sw_writer.post(path, {"brands": brands, "asynch": True}).status_code == 400
    assert sw_writer.get(f"{path}/00000000-0000-4000-8000-000000000000").status_code == 404
    plain = make_caller(OrganizationFactory(serenity_enabled=False))
    refused = plain.post(f"/v2/orgs/{plain.org.id}/serenity/onboardings", {"brands": brands})
    assert refused.status_code == 403
    assert pairs(seen) >= {
        ("onboardingCreate", 202),
        ("onboardingCreate", 400),
        ("onboardingCreate", 403),
        ("onboardingGet", 200),
        ("onboardingGet", 404),
        ("onboardingList", 200),
        ("onboardingCancel", 200),
        ("onboardingCancel", 409),
        ("onboardingRetry", 202),
        ("onboardingRetry", 409),
        ("onboardingItems", 200),
        ("onboardingItems", 404),
    }


def test_reconciliation_routes(
    sw_writer: Caller, sim: Any, seen: set[Checked], django_capture_on_commit_callbacks: Any
) -> None:
    path = f"/v2/orgs/{sw_writer.org.id}/serenity/reconciliations"
    with django_capture_on_commit_callbacks(execute=False):
        accepted = sw_writer.post(path, {"repair": False})
    assert accepted.status_code == 202, accepted.json()
    assert sw_writer.post(path, {}).status_code == 409
    assert sw_writer.post(path, {"repair": "yes"}).status_code == 400
    assert sw_writer.get(accepted["Location"]).status_code == 200
    assert (
        sw_writer.get(f"{accepted['Location']}?status=planned&kind=projectGone").status_code == 200
    )
    assert sw_writer.get(path).status_code == 200
    assert sw_writer.get(f"{path}?status=COMPLETED").status_code == 200
    assert sw_writer.get(f"{path}/00000000-0000-4000-8000-000000000000").status_code == 404
    plain = make_caller(OrganizationFactory(serenity_enabled=False))
    refused = plain.post(f"/v2/orgs/{plain.org.id}/serenity/reconciliations", {})
    assert refused.status_code == 403
    assert pairs(seen) >= {
        ("reconciliationCreate", 202),
        ("reconciliationCreate", 400),
        ("reconciliationCreate", 403),
        ("reconciliationCreate", 409),
        ("reconciliationGet", 200),
        ("reconciliationGet", 404),
        ("reconciliationList", 200),
    }


def test_webhook_routes(writer: Caller, seen: set[Checked], settings: Any) -> None:
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    path = f"/v2/orgs/{writer.org.id}/serenity/webhooks"
    created = writer.post(path, {"url": "http://127.0.0.1:9/hook"})
    assert created.status_code == 201, created.json()
    assert writer.post(path, {"url": "ftp://127.0.0.1/"}).status_code == 400
    hook = f"{path}/{created.json()['id']}"
    webhook_event_publish(
        organization_id=writer.org.id,
        type="onboarding.completed",
        data={"onboardingId": "00000000-0000-4000-8000-000000000000"},
    )
    assert writer.get(path).status_code == 200
    assert writer.get(hook).status_code == 200
    deliveries = writer.get(f"{hook}/deliveries")
    assert deliveries.status_code == 200 and len(deliveries.json()["items"]) == 1
    delivery = deliveries.json()["items"][0]["id"]
    assert writer.get(f"{hook}/deliveries/{delivery}").status_code == 200
    assert writer.get(f"{hook}/deliveries/{created.json()['id']}").status_code == 404
    assert writer.post(f"{hook}/deliveries/{delivery}/redeliver").status_code == 202
    assert writer.get(f"{hook}/deliveries?status=pending").status_code == 200
    assert writer.get(f"{hook}/deliveries/{delivery}/attempts").status_code == 200
    assert writer.patch(hook, {"description": "ops", "enabled": True}).status_code == 200
    assert writer.patch(hook, {"events": ["nope"]}).status_code == 400
    assert writer.post(f"{hook}/rotate-secret").status_code == 200
    assert writer.post(f"{hook}/test").status_code == 202
    assert writer.patch(hook, {"enabled": False}).status_code == 200
    assert writer.post(f"{hook}/test").status_code == 409
    assert writer.delete(hook).status_code == 204
    assert writer.get(hook).status_code == 404
    assert pairs(seen) >= {
        ("webhookCreate", 201),
        ("webhookCreate", 400),
        ("webhookList", 200),
        ("webhookGet", 200),
        ("webhookGet", 404),
        ("webhookDeliveryList", 200),
        ("webhookDeliveryGet", 200),
        ("webhookDeliveryGet", 404),
        ("webhookRedeliver", 202),
        ("webhookDelete", 204),
        ("webhookUpdate", 200),
        ("webhookUpdate", 400),
        ("webhookRotateSecret", 200),
        ("webhookTest", 202),
        ("webhookTest", 409),
        ("webhookAttemptList", 200),
    }


def test_every_event_type_is_sent_as_its_documented_schema(
    sw_writer: Caller, sim: Any, served_document: ServedDocument, settings: Any
) -> None:
    """Webhook events (SPEC §12.2): the callbacks of `webhookCreate` document one schema per
    event type; every event actually sent validates against its own, every member declared."""
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    hooks = f"/v2/orgs/{sw_writer.org.id}/serenity/webhooks"
    hook = sw_writer.post(hooks, {"url": "http://127.0.0.1:9/hook"}).json()
    # job.completed, job.cancelled
    sim.configure({"settleSeconds": 0})
    brands = brands_path(sw_writer)
    done = sw_writer.post(brands, {"name": "Done", "baseUrl": "https://d.example", "async": True})
    assert finish_chain(done.json()["jobId"]) == {"status": "COMPLETED"}
    later = sw_writer.post(brands, {"name": "Later", "baseUrl": "https://l.example", "async": True})
    sw_writer.post(
        f"{serenity_path(sw_writer, later.json()['id'])}/jobs/{later.json()['jobId']}/cancel"
    )
    # job.failed
    sim.configure({"settleOutcome": "failed", "settleSeconds": 0})
    failed = sw_writer.post(brands, {"name": "Bad", "baseUrl": "https://b.example", "async": True})
    finish_chain(failed.json()["jobId"])
    # onboarding.completed (every item refused at once), onboarding.cancelled
    onboardings = f"/v2/orgs/{sw_writer.org.id}/serenity/onboardings"
    sw_writer.post(onboardings, {"brands": [{"name": "Done", "baseUrl": "https://d.example"}]})
    cancelled = sw_writer.post(
        onboardings, {"brands": [{"name": "Fresh", "baseUrl": "https://f.example"}]}
    )
    sw_writer.post(f"{cancelled['Location']}/cancel")
    # webhook.test
    sw_writer.post(f"{hooks}/{hook['id']}/test")
    # credential.refused (SPEC §13.2: a credential accepted before, then refused)
    credential = credentials.credential_of(sw_writer.org)
    UpstreamCredential.objects.update_or_create(
        key=credential.key, defaults={"accepted_at": timezone.now(), "refused_at": None}
    )
    assert credentials.credential_refused(credential, organization_id=sw_writer.org.id)
    # then
    bodies = [json.loads(d.body) for d in WebhookDelivery.objects.order_by("created_at")]
    assert {body["type"] for body in bodies} == set(served_document.event_types())
    for body in bodies:
        served_document.check_event(body)
    job_event = next(b for b in bodies if b["type"] == "job.completed")
    assert job_event["data"]["brandId"] == done.json()["id"]


def test_ledger_routes(sw_writer: Caller, sim: Any, seen: set[Checked]) -> None:
    # an async create with a market run to its end (its workspace ready at once): its writes
    # are in the ledger
    sim.configure({"settleSeconds": 0})
    accepted = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Ledgered",
            "baseUrl": "https://ledgered.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
            "async": True,
        },
    )
    assert accepted.status_code == 202, accepted.json()
    assert finish_chain(accepted.json()["jobId"]) == {"status": JobStatus.COMPLETED}
    path = f"/v2/orgs/{sw_writer.org.id}/serenity/upstream-calls"
    listed = make_caller(sw_writer.org, Role.READER).get(f"{path}?limit=2")
    assert listed.status_code == 200 and len(listed.json()["items"]) == 2
    assert sw_writer.get(f"{path}?since=never").status_code == 400
    stranger = make_caller(OrganizationFactory())
    assert stranger.get(path).status_code == 403
    assert pairs(seen) >= {
        ("upstreamCallList", 200),
        ("upstreamCallList", 400),
        ("upstreamCallList", 403),
    }


def test_operations_routes(db: Any, seen: set[Checked], settings: Any) -> None:
    client = APIClient()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    settings.SERENITY_METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.7").status_code == 403
    settings.SERENITY_METRICS_TOKEN = "metrics-secret"
    assert client.get("/metrics").status_code == 401
    assert pairs(seen) >= {
        ("healthz", 200),
        ("readyz", 200),
        ("metrics", 200),
        ("metrics", 401),
        ("metrics", 403),
    }


def test_an_unexpected_error_is_the_documented_500(
    writer: Caller, seen: set[Checked], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("provisioning.selectors.brand_list", broken)
    assert writer.get(brands_path(writer)).status_code == 500
    assert pairs(seen) >= {("brandList", 500)}


# --- The check itself is strict -------------------------------------------------------------


def answer(status: int, body: Any, method: str = "GET", path: str = "", **headers: str) -> Any:
    response = JsonResponse(body, status=status, safe=False, headers=headers)
    response.request = {"REQUEST_METHOD": method, "PATH_INFO": path}  # type: ignore[attr-defined]
    response.json = lambda: json.loads(response.content)  # type: ignore[attr-defined]
    return response


BRAND_PATH = (
    "/v2/orgs/7f3c2a9e-5d41-4b8e-9a36-0c2b7e1f4d58/brands/3b8e1c47-9f20-4d6a-b5e3-8a71c0d92f64"
)


def test_the_check_refuses_what_the_document_does_not_say(served_document: ServedDocument) -> None:
    from api.schemas.examples import BRAND, JOB_ACCEPTED

    # a documented answer passes, its nulls included
    assert served_document.check(answer(200, BRAND, path=BRAND_PATH)) == Checked("brandGet", 200)
    # a null where none is allowed, a wrong format, an undocumented status, a missing header
    with pytest.raises(AssertionError, match="None for not nullable"):
        served_document.check(answer(200, {**BRAND, "name": None}, path=BRAND_PATH))
    with pytest.raises(AssertionError, match="is not a 'uuid'"):
        served_document.check(answer(200, {**BRAND, "id": "42"}, path=BRAND_PATH))
    with pytest.raises(AssertionError, match="status not documented"):
        served_document.check(answer(418, {"error": "notFound", "message": "x"}, path=BRAND_PATH))
    with pytest.raises(AssertionError, match="header Location missing"):
        served_document.check(
            answer(
                202, JOB_ACCEPTED, "POST", f"{BRAND_PATH}/serenity/markets", **{"Retry-After": "1"}
            )
        )
    # an error code is an open string (SPEC §12.2): one the document does not list yet passes,
    # a value that is not a string does not
    new_code = {"error": "someNewCode", "message": "x"}
    assert served_document.check(answer(404, new_code, path=BRAND_PATH)) == Checked("brandGet", 404)
    with pytest.raises(AssertionError, match="is not of type 'string'"):
        served_document.check(answer(404, {"error": 42, "message": "x"}, path=BRAND_PATH))
