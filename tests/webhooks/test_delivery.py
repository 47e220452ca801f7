"""Delivering events (SPEC §11.3) to a real receiver on the loopback: signatures verified with
the library's verifier, the retry schedule, no redirects, the timeout, SSRF at delivery,
redelivery. Each attempt runs in this process, as a worker runs it (`jobs.runner.run_step`)."""

from __future__ import annotations

import json
import socket
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as StandardWebhook

from jobs.models import AsyncJob
from tests.webhooks.helpers import register, run_delivery, webhooks_path
from webhooks import addresses
from webhooks.delivery import RETRY_DELAYS_SECONDS
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_event_publish

pytestmark = pytest.mark.django_db

DATA = {"onboardingId": "0f6b0d1e-6f4c-4d0e-9f0a-1a2b3c4d5e6f", "status": "COMPLETED"}


def publish(org: Any, type: str = "onboarding.completed") -> WebhookDelivery:
    [delivery_id] = webhook_event_publish(organization_id=org.id, type=type, data=DATA)
    return WebhookDelivery.objects.get(pk=delivery_id)


def verified(received: Any, secret: str) -> Any:
    """The body as the receiver's library verifies it (raises on a bad signature)."""
    headers = {name.lower(): value for name, value in received.headers.items()}
    return StandardWebhook(secret).verify(received.body, headers)


def test_an_event_is_delivered_signed(writer, allow_private, receiver, published_jobs):
    hook = register(writer, receiver.url)
    # when an event happens
    delivery = publish(writer.org)
    # then one delivery, carried by its own job in the outbox
    assert (delivery.status, delivery.attempts, delivery.job_id) == ("pending", 0, delivery.id)
    job = AsyncJob.objects.get(pk=delivery.job_id)
    assert (job.step, job.status, job.organization_id) == (
        "deliverWebhook",
        "IN_PROGRESS",
        writer.org.id,
    )
    # and its attempt posts the signed body
    delivery = run_delivery(delivery)
    [received] = receiver.received
    body = verified(received, hook["secret"])
    assert body == {"type": "onboarding.completed", "timestamp": body["timestamp"], "data": DATA}
    assert json.loads(delivery.body) == body
    assert received.headers["webhook-id"] == str(delivery.event_id)
    assert received.headers["Content-Type"] == "application/json"
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 204)
    assert (delivery.last_error, delivery.next_attempt_at) == (None, None)
    assert AsyncJob.objects.get(pk=delivery.job_id).status == "COMPLETED"
    # a tampered body does not verify
    with pytest.raises(Exception, match=r"(?i)signature"):
        StandardWebhook(hook["secret"]).verify(
            received.body + b" ", {k.lower(): v for k, v in received.headers.items()}
        )


def test_a_receiver_that_fails_then_recovers(writer, allow_private, receiver, published_jobs):
    hook = register(writer, receiver.url)
    receiver.script = [500, 503]
    delivery = publish(writer.org)
    # when the first attempt answers 500
    before = timezone.now()
    delivery = run_delivery(delivery)
    # then the delivery waits 5 s for its next attempt, in the same job
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, 500)
    assert delivery.last_error == "answered 500"
    assert (
        before + timedelta(seconds=4.9) < delivery.next_attempt_at < before + timedelta(seconds=6)
    )
    job = AsyncJob.objects.get(pk=delivery.job_id)
    assert (job.status, job.claim_token) == ("IN_PROGRESS", None)
    assert abs((job.run_after - delivery.next_attempt_at).total_seconds()) < 0.1
    assert published_jobs[-1] == (str(job.id), 5.0)
    # when the second answers 503, then 5 min
    delivery = run_delivery(delivery)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 2, 503)
    # when the receiver recovers
    delivery = run_delivery(delivery)
    # then delivered, every attempt under the same webhook-id, each signed
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 3, 204)
    assert delivery.last_error is None
    assert [r.headers["webhook-id"] for r in receiver.received] == [str(delivery.event_id)] * 3
    for received in receiver.received:
        verified(received, hook["secret"])


def test_the_retry_schedule_then_failed(writer, allow_private, receiver, published_jobs, settings):
    register(writer, receiver.url)
    receiver.default_status = 500
    delivery = publish(writer.org)
    waits = []
    for _ in range(len(RETRY_DELAYS_SECONDS)):
        start = timezone.now()
        delivery = run_delivery(delivery)
        assert delivery.status == "pending"
        waits.append(round((delivery.next_attempt_at - start).total_seconds() / 60, 1))
    assert waits == [0.1, 5.0, 30.0, 120.0, 300.0, 600.0, 600.0]
    # the last attempt fails the delivery and its job
    delivery = run_delivery(delivery)
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("failed", 8, None)
    job = AsyncJob.objects.get(pk=delivery.job_id)
    assert (job.status, job.error["code"]) == ("FAILED", "webhookDeliveryFailed")
    assert len(receiver.received) == 8
    # waits of hours are no countdown messages (the broker would redeliver them): the
    # dispatcher publishes the row when due
    countdowns = [c for job_id, c in published_jobs if job_id == str(job.id) and c]
    limit = settings.JOBS_COUNTDOWN_MAX_SECONDS
    assert countdowns == [d for d in RETRY_DELAYS_SECONDS if d <= limit]


def test_redirects_are_not_followed(writer, allow_private, receiver, published_jobs):
    register(writer, receiver.url)
    receiver.script = [302]
    receiver.extra_headers = {"Location": receiver.url + "/elsewhere"}
    delivery = run_delivery(publish(writer.org))
    assert len(receiver.received) == 1
    assert (delivery.status, delivery.last_status_code) == ("pending", 302)


def test_an_answer_later_than_the_timeout_fails_the_attempt(
    writer, allow_private, receiver, published_jobs, settings
):
    settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS = 0.3
    register(writer, receiver.url)
    receiver.delay_seconds = 1.0
    delivery = run_delivery(publish(writer.org))
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, None)
    assert delivery.last_error == "timeout"


def test_a_host_resolving_to_a_private_address_is_refused_at_delivery(
    writer, receiver, published_jobs, settings
):
    # given an endpoint registered while private addresses were allowed ...
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    port = receiver.server.server_address[1]
    register(writer, f"https://localhost:{port}/hook")
    delivery = publish(writer.org)
    # ... when they no longer are, at the attempt ("localhost" resolves to the loopback)
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = False
    delivery = run_delivery(delivery)
    # then nothing is sent and the attempt failed
    assert receiver.received == []
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, None)
    # (the client learns no more than for any connection that failed)
    assert delivery.last_error == "connection failed"


def test_every_resolved_address_is_checked(monkeypatch, settings):
    # a name answering one public and one private address is refused
    answers = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 443)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", 443)),
    ]
    monkeypatch.setattr(addresses.socket, "getaddrinfo", lambda *a, **k: answers)
    target = addresses.target_parse("https://hooks.example.com/x")
    with pytest.raises(addresses.AddressRefusedError):
        addresses.addresses_resolve(target)
    answers.pop()
    assert [str(a) for a in addresses.addresses_resolve(target)] == ["93.184.215.14"]


def test_the_connection_goes_to_the_checked_address(
    writer, allow_private, receiver, published_jobs, monkeypatch
):
    # given a name only our check can resolve (the test machine has no DNS for it)
    port = receiver.server.server_address[1]
    resolved = []
    real = socket.getaddrinfo

    def resolve(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        resolved.append(host)
        if host != "hooks.invalid":
            return real(host, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(addresses.socket, "getaddrinfo", resolve)
    register(writer, f"http://hooks.invalid:{port}/hook")
    # when
    delivery = run_delivery(publish(writer.org))
    # then the request reached the address the check resolved, for the name
    assert delivery.status == "delivered"
    assert receiver.received[0].headers["Host"] == f"hooks.invalid:{port}"
    # (registration, attempt; the connection itself resolves nothing: it connects to the
    # checked address)
    assert resolved == ["hooks.invalid", "hooks.invalid"]


def test_only_subscribed_endpoints_receive_an_event(writer, allow_private, receiver):
    register(writer, receiver.url, events=["job.failed"])
    assert webhook_event_publish(organization_id=writer.org.id, type="job.completed", data={}) == []
    assert WebhookDelivery.objects.count() == 0


def test_an_event_published_twice_with_one_id_is_one_delivery(writer, allow_private, receiver):
    register(writer, receiver.url)
    event_id = uuid.uuid4()
    first = webhook_event_publish(
        organization_id=writer.org.id, type="job.failed", data={}, event_id=event_id
    )
    again = webhook_event_publish(
        organization_id=writer.org.id, type="job.failed", data={}, event_id=event_id
    )
    assert first == again
    assert WebhookDelivery.objects.count() == 1
    assert AsyncJob.objects.filter(step="deliverWebhook").count() == 1


def test_the_deliveries_list_and_redeliver(writer, allow_private, receiver, published_jobs):
    hook = register(writer, receiver.url)
    delivery = run_delivery(publish(writer.org))
    path = f"{webhooks_path(writer)}/{hook['id']}/deliveries"
    # the list
    listed = writer.get(path).json()
    assert listed == {
        "items": [
            {
                "id": str(delivery.id),
                "eventId": str(delivery.event_id),
                "type": "onboarding.completed",
                "status": "delivered",
                "attempts": 1,
                "lastStatusCode": 204,
                "lastError": None,
                "nextAttemptAt": None,
                "createdAt": listed["items"][0]["createdAt"],
            }
        ],
        "nextCursor": None,
    }
    # when redelivered
    response = writer.post(f"{path}/{delivery.id}/redeliver")
    # then 202, a new attempt now
    assert response.status_code == 202, response.json()
    assert response.json()["status"] == "pending"
    delivery.refresh_from_db()
    assert delivery.job_id != delivery.id
    assert published_jobs[-1] == (str(delivery.job_id), 0.0)
    delivery = run_delivery(delivery)
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    ids = {r.headers["webhook-id"] for r in receiver.received}
    assert ids == {str(delivery.event_id)}
    for received in receiver.received:
        verified(received, hook["secret"])
    # an unknown delivery
    other = writer.post(f"{path}/{uuid.uuid4()}/redeliver")
    assert (other.status_code, other.json()["error"]) == (404, "webhookNotFound")


def test_a_pending_delivery_redelivered_runs_now(writer, allow_private, receiver, published_jobs):
    hook = register(writer, receiver.url)
    receiver.script = [500]
    delivery = run_delivery(publish(writer.org))
    assert delivery.next_attempt_at > timezone.now()
    path = f"{webhooks_path(writer)}/{hook['id']}/deliveries/{delivery.id}/redeliver"
    assert writer.post(path).status_code == 202
    job = AsyncJob.objects.get(pk=delivery.job_id)
    assert job.run_after <= timezone.now()
    delivery.refresh_from_db()
    assert delivery.job_id == delivery.id


def test_a_deleted_endpoints_pending_attempt_ends_sending_nothing(
    writer, allow_private, receiver, published_jobs
):
    hook = register(writer, receiver.url)
    delivery = publish(writer.org)
    writer.delete(f"{webhooks_path(writer)}/{hook['id']}")
    from jobs import runner

    runner.run_step(job_id=str(delivery.job_id))
    assert receiver.received == []
    assert AsyncJob.objects.get(pk=delivery.job_id).status == "CANCELLED"
