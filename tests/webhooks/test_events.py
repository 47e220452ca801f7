"""Job events (SPEC §11.3): every path that ends a root chain emits its event, in the
transaction that ends it, once; `data` is the job document without `steps`, plus `brandId`.
The steps run in this process (`published` records publishes instead of sending them)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction

from jobs import services as job_services
from jobs.models import AsyncJob
from jobs.signals import chain_ended_check
from provisioning import services as provisioning_services
from provisioning import tasks
from provisioning.models import ProvisioningAttempt
from tests.chains.helpers import serenity_path, start_async_brand_with_market
from tests.webhooks.helpers import register
from webhooks.events import job_event_id
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hook(sw_writer: Any, allow_private: Any) -> dict[str, Any]:
    # Registered only: nothing is sent (the attempts are never run here).
    return register(sw_writer, "http://127.0.0.1:9/hook")


def events() -> list[dict[str, Any]]:
    return [json.loads(d.body) for d in WebhookDelivery.objects.order_by("created_at")]


def expected_data(caller: Any, accepted: dict[str, Any]) -> dict[str, Any]:
    """What polling answers for the job, without `steps`, plus `brandId`."""
    path = f"{serenity_path(caller, accepted['id'])}/jobs/{accepted['jobId']}"
    document = caller.get(path).json()
    document.pop("steps")
    return {**document, "brandId": accepted["id"]}


def test_a_completed_chain_emits_job_completed(sw_writer, sim, published, hook):
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    # no event while the chain runs
    assert WebhookDelivery.objects.count() == 0
    # when the chain runs to its end (promotion, then the chained market create, handed over)
    tasks.provision_workspace(accepted["jobId"])
    # then one event, with the chain's effective document
    [event] = events()
    assert event["type"] == "job.completed"
    assert event["data"] == expected_data(sw_writer, accepted)
    assert event["data"]["status"] == "COMPLETED"
    assert event["data"]["result"]["status"] == 201
    delivery = WebhookDelivery.objects.get()
    assert delivery.event_id == job_event_id(accepted["jobId"])
    # and its delivery job was published after the commit
    assert str(delivery.job_id) in published


def test_a_failed_chain_emits_job_failed(sw_writer, sim, published, hook):
    accepted = start_async_brand_with_market(sw_writer)
    sim.add_fault({"method": "POST", "pathRegex": "/child$", "status": 500, "times": 10})
    tasks.provision_workspace(accepted["jobId"])
    [event] = events()
    assert event["type"] == "job.failed"
    assert event["data"] == expected_data(sw_writer, accepted)
    assert event["data"]["error"]["code"] == "serenityUpstreamError"


def test_a_cancel_by_the_api_emits_job_cancelled(sw_writer, sim, published, hook):
    accepted = start_async_brand_with_market(sw_writer)
    sim.configure({"settleSeconds": 30})
    tasks.provision_workspace(accepted["jobId"])  # created, settling
    assert WebhookDelivery.objects.count() == 0
    # when
    path = f"{serenity_path(sw_writer, accepted['id'])}/jobs/{accepted['jobId']}/cancel"
    assert sw_writer.post(path).status_code == 200
    # then
    [event] = events()
    assert event["type"] == "job.cancelled"
    assert event["data"] == expected_data(sw_writer, accepted)
    assert event["data"]["error"]["code"] == "provisioningCancelled"


def test_a_cancel_by_deactivate_emits_job_cancelled(sw_writer, sim, published, hook):
    accepted = start_async_brand_with_market(sw_writer)
    sim.configure({"settleSeconds": 30})
    tasks.provision_workspace(accepted["jobId"])
    # when
    response = sw_writer.post(f"{serenity_path(sw_writer, accepted['id'])}/deactivate")
    assert response.status_code == 200, response.json()
    # then
    [event] = events()
    assert (event["type"], event["data"]["jobId"]) == ("job.cancelled", accepted["jobId"])
    assert event["data"] == expected_data(sw_writer, accepted)


def test_a_stale_reconcile_emits_job_failed(sw_writer, sim, published, hook):
    accepted = start_async_brand_with_market(sw_writer)
    attempt = ProvisioningAttempt.objects.get(job_id=accepted["jobId"])
    # when the sweep reconciles the attempt as stale
    assert provisioning_services.attempt_reconcile_stale(attempt=attempt)
    # then
    [event] = events()
    assert event["type"] == "job.failed"
    assert event["data"]["error"]["code"] == "provisioningStale"
    assert event["data"] == expected_data(sw_writer, accepted)


def test_a_chain_seen_ended_twice_is_one_event(sw_writer, sim, published, hook):
    accepted = start_async_brand_with_market(sw_writer)
    job_services.chain_cancel(root_id=accepted["jobId"])
    chain_ended_check(root_id=accepted["jobId"])
    assert [e["type"] for e in events()] == ["job.cancelled"]


def test_an_ending_rolled_back_emits_nothing(sw_writer, sim, published, hook):
    accepted = start_async_brand_with_market(sw_writer)
    with pytest.raises(RuntimeError), transaction.atomic():
        job_services.chain_cancel(root_id=accepted["jobId"])
        assert WebhookDelivery.objects.count() == 1
        raise RuntimeError("the business write failed")
    assert WebhookDelivery.objects.count() == 0
    assert AsyncJob.objects.get(pk=accepted["jobId"]).status == "IN_PROGRESS"


def test_no_endpoint_no_delivery(sw_writer, sim, published):
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    tasks.provision_workspace(accepted["jobId"])
    assert WebhookDelivery.objects.count() == 0
    assert not AsyncJob.objects.filter(step="deliverWebhook").exists()
