"""The admin shows webhooks (never their secret) and deliveries, with a Redeliver action."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.test import Client

from jobs.models import AsyncJob
from tests.webhooks.helpers import register, run_delivery
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_event_publish

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db: Any) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def test_pages_show_webhooks_and_deliveries_without_the_secret(
    admin_client, writer, allow_private, receiver
):
    hook = register(writer, receiver.url)
    [delivery_id] = webhook_event_publish(
        organization_id=writer.org.id, type="job.failed", data={"jobId": "x"}
    )
    for path in (
        "/admin/webhooks/webhook/",
        f"/admin/webhooks/webhook/{hook['id']}/change/",
        "/admin/webhooks/webhookdelivery/",
        f"/admin/webhooks/webhookdelivery/{delivery_id}/change/",
    ):
        page = admin_client.get(path)
        assert page.status_code == 200, path
        content = page.content.decode()
        assert hook["secret"] not in content
        assert hook["secret"].removeprefix("whsec_") not in content
    assert str(delivery_id) in admin_client.get("/admin/webhooks/webhookdelivery/").content.decode()


def test_the_redeliver_action(admin_client, writer, allow_private, receiver):
    register(writer, receiver.url)
    [delivery_id] = webhook_event_publish(organization_id=writer.org.id, type="job.failed", data={})
    delivery = run_delivery(WebhookDelivery.objects.get(pk=delivery_id))
    assert delivery.status == "delivered"
    # when
    response = admin_client.post(
        "/admin/webhooks/webhookdelivery/",
        {"action": "redeliver", "_selected_action": [str(delivery_id)]},
    )
    # then
    assert response.status_code == 302
    delivery.refresh_from_db()
    assert delivery.status == "pending"
    assert AsyncJob.objects.get(pk=delivery.job_id).status == "IN_PROGRESS"
    assert LogEntry.objects.filter(object_id=str(delivery_id)).count() == 1
    delivery = run_delivery(delivery)
    assert (delivery.status, delivery.attempts, len(receiver.received)) == ("delivered", 2, 2)
