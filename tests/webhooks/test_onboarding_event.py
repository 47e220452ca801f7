"""`onboarding.completed` (SPEC §11.3): sent once, in the transaction in which the onboarding's
last item ended, with the onboarding without its items."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from provisioning import tasks
from provisioning.models import Onboarding
from tests.factories import BrandFactory
from tests.webhooks.helpers import register
from webhooks.events import onboarding_event_id
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hook(sw_writer: Any, allow_private: Any) -> dict[str, Any]:
    return register(sw_writer, "http://127.0.0.1:9/hook")


def url(caller: Any, rest: str = "") -> str:
    return f"/v2/orgs/{caller.org.id}/serenity/onboardings{rest}"


def brand(name: str) -> dict[str, Any]:
    return {"name": name, "baseUrl": "https://x.example"}


def onboarding_events(kind: str = "onboarding.completed") -> list[dict[str, Any]]:
    bodies = [json.loads(d.body) for d in WebhookDelivery.objects.order_by("created_at")]
    return [b for b in bodies if b["type"] == kind]


def test_the_last_item_s_end_emits_onboarding_completed_once(sw_writer, sim, published, hook):
    # given an onboarding of two brands
    sim.configure({"settleSeconds": 0})
    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("A"), brand("B")]}).json()
    first, second = published[:2]
    # when the first chain ends, nothing yet; when the second does, the event
    tasks.provision_workspace(first)
    assert onboarding_events() == []
    tasks.provision_workspace(second)
    [event] = onboarding_events()
    read = sw_writer.get(url(sw_writer, f"/{accepted['onboardingId']}")).json()
    read.pop("items")
    read.pop("nextCursor")
    assert event["data"] == read
    assert event["data"]["status"] == "COMPLETED"
    assert event["data"]["counts"] == {"inProgress": 0, "completed": 2, "failed": 0, "cancelled": 0}
    delivery = WebhookDelivery.objects.get(event_id=onboarding_event_id(accepted["onboardingId"]))
    assert delivery.webhook_id is not None
    assert event["data"]["finishedAt"] == event["data"]["updatedAt"] is not None
    # and a cancel afterwards is refused (SPEC §12.2): nothing more is emitted, nothing relabelled
    cancel = sw_writer.post(url(sw_writer, f"/{accepted['onboardingId']}/cancel"))
    assert cancel.status_code == 409 and cancel.json()["error"] == "onboardingFinished"
    assert len(onboarding_events()) == 1 and onboarding_events("onboarding.cancelled") == []
    assert Onboarding.objects.get().cancelled_at is None


def test_a_cancelled_onboarding_emits_onboarding_cancelled_not_completed(
    sw_writer, sim, published, hook
):
    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("A"), brand("B")]}).json()
    assert sw_writer.post(url(sw_writer, f"/{accepted['onboardingId']}/cancel")).status_code == 200
    assert onboarding_events() == []
    [event] = onboarding_events("onboarding.cancelled")
    assert event["data"]["status"] == "CANCELLED"
    assert event["data"]["counts"] == {"inProgress": 0, "completed": 0, "failed": 0, "cancelled": 2}


def test_updated_at_moves_when_an_item_ends(sw_writer, sim, published, hook):
    # given an onboarding of two brands, its updatedAt aged
    sim.configure({"settleSeconds": 0})
    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("A"), brand("B")]}).json()
    aged = timezone.now() - timedelta(hours=1)
    Onboarding.objects.update(updated_at=aged)
    path = url(sw_writer, f"/{accepted['onboardingId']}")
    # when the first item's chain ends
    tasks.provision_workspace(published[0])
    # then the onboarding moved, and has not ended
    read = sw_writer.get(path).json()
    assert read["updatedAt"] > aged.isoformat().replace("+00:00", "Z")
    assert read["status"] == "IN_PROGRESS" and read["finishedAt"] is None


def test_an_onboarding_whose_items_were_all_refused_completes_at_once(sw_writer, hook):
    BrandFactory(organization=sw_writer.org, name="Taken")
    accepted = sw_writer.post(url(sw_writer), {"brands": [brand("Taken")]}).json()
    [event] = onboarding_events()
    assert event["data"]["onboardingId"] == accepted["onboardingId"]
    assert event["data"]["counts"] == {"inProgress": 0, "completed": 0, "failed": 1, "cancelled": 0}
    assert Onboarding.objects.get().completed_at is not None
