"""Helpers of the webhook tests."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

import webhooks.tasks  # noqa: F401 - registers the delivery step with the runner
from jobs import runner
from jobs.models import AsyncJob
from tests.conftest import Caller
from webhooks.models import WebhookDelivery


def webhooks_path(caller: Caller) -> str:
    return f"/v2/orgs/{caller.org.id}/serenity/webhooks"


def register(caller: Caller, url: str, **extra: Any) -> dict[str, Any]:
    response = caller.post(webhooks_path(caller), {"url": url, **extra})
    assert response.status_code == 201, response.json()
    return response.json()


def run_delivery(delivery: WebhookDelivery) -> WebhookDelivery:
    """Run the attempt its job carries, in this process (as a worker would), due or not."""
    assert delivery.job_id is not None
    AsyncJob.objects.filter(pk=delivery.job_id).update(run_after=timezone.now())
    runner.run_step(job_id=str(delivery.job_id))
    delivery.refresh_from_db()
    return delivery
