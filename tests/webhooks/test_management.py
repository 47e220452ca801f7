"""Managing endpoints as Stripe and Svix allow (SPEC §12.2): update (a disabled endpoint gets no
new deliveries), secret rotation (every replaced secret signs for 24 h, at most three: §13.6), a
test event to one endpoint, the per-attempt log, and the deliveries' status filter."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.conftest import make_caller
from tests.factories import OrganizationFactory
from tests.support import assert_error
from tests.webhooks.helpers import register, run_delivery, webhooks_path
from webhooks.models import Webhook, WebhookAttempt, WebhookDelivery
from webhooks.services import webhook_event_publish

pytestmark = pytest.mark.django_db

DATA = {"onboardingId": "0f6b0d1e-6f4c-4d0e-9f0a-1a2b3c4d5e6f", "status": "COMPLETED"}


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test runs each attempt itself (`run_delivery`)."""
    monkeypatch.setattr("jobs.outbox.publish_on_commit", lambda **kw: None)


def publish(org: Any) -> list[uuid.UUID]:
    return webhook_event_publish(organization_id=org.id, type="onboarding.completed", data=DATA)


def signatures(received: Any) -> list[str]:
    return received.headers["webhook-signature"].split(" ")


def verifies(received: Any, secret: str) -> bool:
    headers = {name.lower(): value for name, value in received.headers.items()}
    try:
        StandardWebhook(secret).verify(received.body, headers)
    except Exception:
        return False
    return True


# --- PATCH --------------------------------------------------------------------------------------


def test_patch_changes_only_the_members_given(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/a", description="first")
    path = f"{webhooks_path(writer)}/{hook['id']}"
    # when
    response = writer.patch(
        path, {"url": "http://127.0.0.1:9/b", "events": ["job.failed", "job.failed"]}
    )
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {
        **{k: v for k, v in hook.items() if k != "secret"},
        "url": "http://127.0.0.1:9/b",
        "events": ["job.failed"],
        "description": "first",
    }
    assert writer.get(path).json() == response.json()


def test_a_disabled_endpoint_gets_no_new_deliveries(writer, allow_private):
    on = register(writer, "http://127.0.0.1:9/on")
    off = register(writer, "http://127.0.0.1:9/off")
    path = f"{webhooks_path(writer)}/{off['id']}"
    # when one endpoint is disabled
    answer = writer.patch(path, {"enabled": False, "description": "paused"})
    assert (answer.json()["enabled"], answer.json()["description"]) == (False, "paused")
    publish(writer.org)
    # then only the enabled one gets the event
    assert list(WebhookDelivery.objects.values_list("webhook_id", flat=True)) == [
        uuid.UUID(on["id"])
    ]
    # and enabled again, it gets the next one
    writer.patch(path, {"enabled": True})
    publish(writer.org)
    assert WebhookDelivery.objects.filter(webhook_id=off["id"]).count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://127.0.0.1/"}, "url"),
        ({"events": ["job.exploded"]}, "events[0]"),
        ({"events": ["webhook.test"]}, "events[0]"),
        ({"enabled": "false"}, "enabled"),
        ({"description": "x" * 501}, "description"),
    ],
)
def test_patch_refuses_a_bad_member_and_changes_nothing(writer, allow_private, body, field):
    hook = register(writer, "http://127.0.0.1:9/a")
    before = Webhook.objects.values().get()
    # when
    response = writer.patch(f"{webhooks_path(writer)}/{hook['id']}", body)
    # then
    assert assert_error(response, 400, "invalidRequest")["details"] == {"field": field}
    assert Webhook.objects.values().get() == before


def test_patch_refuses_a_url_to_a_private_address(writer):
    hook = Webhook.objects.create(organization=writer.org, url="https://x.example", events=[])
    response = writer.patch(f"{webhooks_path(writer)}/{hook.pk}", {"url": "https://127.0.0.1/"})
    assert assert_error(response, 400, "invalidRequest")["details"] == {"field": "url"}
    assert Webhook.objects.get().url == "https://x.example"


def test_patch_of_another_org_s_webhook_is_not_found(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/a")
    other = make_caller(OrganizationFactory())
    response = other.patch(f"{webhooks_path(other)}/{hook['id']}", {"enabled": False})
    assert_error(response, 404, "webhookNotFound")
    assert Webhook.objects.get().enabled is True


# --- rotate-secret --------------------------------------------------------------------------------


def test_rotation_signs_with_both_secrets_for_24_hours(writer, allow_private, receiver):
    hook = register(writer, receiver.url)
    old = hook["secret"]
    # when the secret is rotated
    response = writer.post(f"{webhooks_path(writer)}/{hook['id']}/rotate-secret")
    # then the new secret is shown, once
    assert response.status_code == 200, response.json()
    rotated = response.json()
    new = rotated["secret"]
    assert new.startswith("whsec_") and new != old
    assert {k: v for k, v in rotated.items() if k != "secret"} == {
        k: v for k, v in hook.items() if k != "secret"
    }
    assert "secret" not in writer.get(f"{webhooks_path(writer)}/{hook['id']}").json()
    # and both are stored encrypted, never in plaintext
    stored = Webhook.objects.get()
    for secret in (old, new):
        for column in (stored.secret_encrypted, stored.previous_secret_encrypted):
            assert secret.removeprefix("whsec_") not in column
    assert stored.signing_secrets(now=timezone.now()) == [new, old]
    # when an event is delivered within the 24 h
    [delivery_id] = publish(writer.org)
    run_delivery(WebhookDelivery.objects.get(pk=delivery_id))
    # then it carries both signatures, new first, each verifying with its secret
    [received] = receiver.received
    assert len(signatures(received)) == 2
    assert all(s.startswith("v1,") for s in signatures(received))
    assert verifies(received, new) and verifies(received, old)
    # when the 24 h have passed
    Webhook.objects.update(previous_secret_expires_at=timezone.now() - timedelta(seconds=1))
    [later] = webhook_event_publish(
        organization_id=writer.org.id, type="job.failed", data={"jobId": str(uuid.uuid4())}
    )
    run_delivery(WebhookDelivery.objects.get(pk=later))
    # then the old secret no longer signs
    received = receiver.received[1]
    assert len(signatures(received)) == 1
    assert verifies(received, new) and not verifies(received, old)


def test_a_retried_rotation_keeps_every_secret_of_the_last_24_hours_signing(
    writer, allow_private, receiver
):
    # given an endpoint whose rotation was retried (no Idempotency-Key: two rotations)
    hook = register(writer, receiver.url)
    path = f"{webhooks_path(writer)}/{hook['id']}/rotate-secret"
    first = writer.post(path).json()["secret"]
    second = writer.post(path).json()["secret"]
    original = hook["secret"]
    # when an event is delivered
    [delivery_id] = publish(writer.org)
    run_delivery(WebhookDelivery.objects.get(pk=delivery_id))
    # then every secret of the last 24 h signs it, the newest first: the receiver that still
    # has the original (it never saw the first rotation's answer) verifies it
    [received] = receiver.received
    assert len(signatures(received)) == 3
    assert all(verifies(received, secret) for secret in (second, first, original))
    assert Webhook.objects.get().signing_secrets(now=timezone.now()) == [
        second,
        first,
        original,
    ]
    # and none is stored in the clear
    stored = Webhook.objects.get()
    for secret in (original, first, second):
        assert secret.removeprefix("whsec_") not in stored.older_secret_encrypted


def test_at_most_three_secrets_sign(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/a")
    path = f"{webhooks_path(writer)}/{hook['id']}/rotate-secret"
    secrets = [writer.post(path).json()["secret"] for _ in range(3)]
    assert Webhook.objects.get().signing_secrets(now=timezone.now()) == secrets[::-1]


def test_a_replaced_secret_stops_signing_24_hours_after_it_was_replaced(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/a")
    path = f"{webhooks_path(writer)}/{hook['id']}/rotate-secret"
    first = writer.post(path).json()["secret"]
    Webhook.objects.update(previous_secret_expires_at=timezone.now() - timedelta(seconds=1))
    second = writer.post(path).json()["secret"]
    # the original expired before the second rotation: it is not kept as the older one
    assert Webhook.objects.get().signing_secrets(now=timezone.now()) == [second, first]
    assert Webhook.objects.get().older_secret_encrypted == ""


def test_a_reader_cannot_rotate(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/a")
    before = Webhook.objects.values().get()
    reader = make_caller(writer.org, "reader")
    assert_error(
        reader.post(f"{webhooks_path(reader)}/{hook['id']}/rotate-secret"), 403, "forbidden"
    )
    assert Webhook.objects.values().get() == before


# --- test -----------------------------------------------------------------------------------------


def test_a_test_event_goes_to_that_endpoint_only(writer, allow_private, receiver):
    target = register(writer, receiver.url, events=["job.failed"])
    register(writer, "http://127.0.0.1:9/other")
    # when
    response = writer.post(f"{webhooks_path(writer)}/{target['id']}/test")
    # then one delivery, to that endpoint, whatever it subscribes to
    assert response.status_code == 202, response.json()
    delivery = WebhookDelivery.objects.get()
    assert response.json() == {
        "id": str(delivery.pk),
        "eventId": str(delivery.event_id),
        "type": "webhook.test",
        "status": "pending",
        "attempts": 0,
        "lastStatusCode": None,
        "lastError": None,
        "nextAttemptAt": delivery.next_attempt_at.isoformat().replace("+00:00", "Z"),
        "createdAt": delivery.created_at.isoformat().replace("+00:00", "Z"),
    }
    assert str(delivery.webhook_id) == target["id"]
    # and its attempt posts the signed `webhook.test` event
    run_delivery(delivery)
    [received] = receiver.received
    body = StandardWebhook(target["secret"]).verify(
        received.body, {k.lower(): v for k, v in received.headers.items()}
    )
    assert body == {
        "type": "webhook.test",
        "timestamp": body["timestamp"],
        "data": {"webhookId": target["id"]},
    }


def test_a_disabled_endpoint_gets_no_test_event(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/a")
    writer.patch(f"{webhooks_path(writer)}/{hook['id']}", {"enabled": False})
    response = writer.post(f"{webhooks_path(writer)}/{hook['id']}/test")
    assert_error(response, 409, "webhookDisabled")
    assert WebhookDelivery.objects.count() == 0


# --- attempts and the deliveries' status filter ---------------------------------------------------


def test_every_attempt_is_listed_and_the_delivery_counts_them(writer, allow_private, receiver):
    hook = register(writer, receiver.url)
    receiver.script = [503]
    [delivery_id] = publish(writer.org)
    delivery = run_delivery(WebhookDelivery.objects.get(pk=delivery_id))
    delivery = run_delivery(delivery)
    path = f"{webhooks_path(writer)}/{hook['id']}/deliveries/{delivery_id}"
    # when
    response = writer.get(f"{path}/attempts")
    # then newest first, as recorded
    assert response.status_code == 200, response.json()
    first, second = WebhookAttempt.objects.order_by("at", "id")
    assert response.json() == {
        "items": [
            {
                "at": attempt.at.isoformat().replace("+00:00", "Z"),
                "statusCode": attempt.status_code,
                "error": attempt.error,
                "durationMs": attempt.duration_ms,
            }
            for attempt in (second, first)
        ],
        "nextCursor": None,
    }
    assert [(a.status_code, a.error) for a in (first, second)] == [
        (503, "answered 503"),
        (204, None),
    ]
    assert delivery.attempts == 2
    # paginated as every list
    page = writer.get(f"{path}/attempts?limit=1").json()
    assert page["items"] == response.json()["items"][:1] and page["nextCursor"]
    rest = writer.get(f"{path}/attempts?limit=1&cursor={page['nextCursor']}").json()
    assert rest == {"items": response.json()["items"][1:], "nextCursor": None}


def test_attempts_of_an_unknown_delivery_are_not_found(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/a")
    response = writer.get(
        f"{webhooks_path(writer)}/{hook['id']}/deliveries/{uuid.uuid4()}/attempts"
    )
    assert_error(response, 404, "webhookNotFound")


def test_deliveries_filter_on_status(writer, allow_private, receiver):
    hook = register(writer, receiver.url)
    [delivered] = publish(writer.org)
    run_delivery(WebhookDelivery.objects.get(pk=delivered))
    [pending] = publish(writer.org)
    path = f"{webhooks_path(writer)}/{hook['id']}/deliveries"
    # when / then
    ids = lambda status: [d["id"] for d in writer.get(f"{path}?status={status}").json()["items"]]  # noqa: E731
    assert ids("delivered") == [str(delivered)]
    assert ids("pending") == [str(pending)]
    assert ids("failed") == []
    refused = writer.get(f"{path}?status=lost")
    assert assert_error(refused, 400, "invalidRequest")["details"] == {"field": "status"}


def test_an_event_body_is_the_documented_json(writer, allow_private):
    register(writer, "http://127.0.0.1:9/a")
    [delivery_id] = publish(writer.org)
    body = json.loads(WebhookDelivery.objects.get(pk=delivery_id).body)
    assert set(body) == {"type", "timestamp", "data"}
