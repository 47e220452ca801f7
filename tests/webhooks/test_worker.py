"""Webhooks through a real worker process (the session's): an async create's end reaches the
receiver, signed; an attempt that failed is retried by the worker after its wait."""

from __future__ import annotations

import time
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.chains.helpers import start_async_brand_with_market
from tests.conftest import poll_job
from tests.webhooks.helpers import register
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)


def delivery_when(status: str, timeout: float = 10.0) -> WebhookDelivery:
    """The one delivery once it has `status` (the worker records an attempt after the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        delivery = WebhookDelivery.objects.get()
        if delivery.status == status or time.monotonic() > deadline:
            return delivery
        time.sleep(0.05)


def verified(received: Any, secret: str) -> Any:
    headers = {name.lower(): value for name, value in received.headers.items()}
    return StandardWebhook(secret).verify(received.body, headers)


def test_an_async_create_ends_in_a_signed_job_completed(
    sw_writer, sim, worker, allow_private, receiver
):
    sim.configure({"settleSeconds": 0})
    hook = register(sw_writer, receiver.url, events=["job.completed"])
    # when
    accepted = start_async_brand_with_market(sw_writer)
    # then
    [received] = receiver.wait_for(1)
    body = verified(received, hook["secret"])
    final = poll_job(
        sw_writer,
        f"/v2/orgs/{sw_writer.org.id}/brands/{accepted['id']}/serenity/jobs/{accepted['jobId']}",
    )
    final.pop("steps")
    assert body["type"] == "job.completed"
    assert body["data"] == {**final, "brandId": accepted["id"]}
    delivery = delivery_when("delivered")
    assert (delivery.status, delivery.attempts) == ("delivered", 1)


def test_the_worker_retries_after_the_first_wait(sw_writer, worker, allow_private, receiver):
    from webhooks.services import webhook_event_publish

    hook = register(sw_writer, receiver.url)
    receiver.script = [500]
    # when an event is published (a committed transaction: the outbox row is published)
    webhook_event_publish(organization_id=sw_writer.org.id, type="onboarding.completed", data={})
    # then the worker's first attempt fails, its second (5 s later) delivers
    first, second = receiver.wait_for(2, timeout=30)
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    verified(second, hook["secret"])
    delivery = delivery_when("delivered")
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 2, 204)
