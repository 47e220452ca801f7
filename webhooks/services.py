"""Writes of webhooks (SPEC §11.3): endpoints, events and redeliveries.

An event becomes one delivery per subscribed endpoint of the org, each with its job row in the
outbox, all inside the caller's transaction (`webhook_event_publish`): they commit with the
business write that caused the event, or not at all, and are published after commit.
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobs.outbox import outbox_job_run_now, outbox_jobs_create
from serenity.models import Organization
from webhooks.addresses import AddressRefusedError, addresses_resolve, target_parse
from webhooks.exceptions import WebhookLimitError, WebhookNotFoundError, WebhookUrlError
from webhooks.models import DeliveryStatus, Webhook, WebhookDelivery, WebhookEventType

MAX_WEBHOOKS_PER_ORG = 10
DELIVERY_JOB_TYPE = "webhookDelivery"
DELIVERY_STEP = "deliverWebhook"
DELIVERY_KEY = "deliveryId"
# A redelivery of a finished delivery is one attempt, outside the retry schedule.
SINGLE_ATTEMPT_KEY = "singleAttempt"


@dataclass(frozen=True)
class WebhookCreated:
    """A new endpoint and its secret: the only time the secret is shown."""

    webhook: Webhook
    secret: str

    @property
    def id(self) -> uuid.UUID:
        return self.webhook.id

    @property
    def url(self) -> str:
        return self.webhook.url

    @property
    def events(self) -> list[str]:
        return list(self.webhook.events)

    @property
    def created_at(self) -> datetime:
        return self.webhook.created_at


def webhook_secret_generate() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def webhook_url_check(url: str) -> None:
    """Raises `WebhookUrlError` (400 `invalidRequest` naming `url`) for a URL that may not be
    called: its rules and every address its host resolves to (`webhooks.addresses`)."""
    try:
        addresses_resolve(target_parse(url))
    except AddressRefusedError as refused:
        raise WebhookUrlError(str(refused)) from None


def webhook_create(
    *, organization: Organization, url: str, events: list[str] | None
) -> WebhookCreated:
    """Register an endpoint (at most `MAX_WEBHOOKS_PER_ORG` per org: the org row is locked while
    counting, so two concurrent registrations cannot make an eleventh). `events` defaults to
    every event type. Raises `WebhookUrlError`, `WebhookLimitError`."""
    webhook_url_check(url)
    chosen = list(dict.fromkeys(events)) if events else list(WebhookEventType.values)
    secret = webhook_secret_generate()
    with transaction.atomic():
        list(Organization.objects.select_for_update().filter(pk=organization.pk).values("pk"))
        if Webhook.objects.filter(organization=organization).count() >= MAX_WEBHOOKS_PER_ORG:
            raise WebhookLimitError()
        webhook = Webhook(organization=organization, url=url, events=chosen)
        webhook.set_secret(secret)
        webhook.save(force_insert=True)
    return WebhookCreated(webhook=webhook, secret=secret)


def webhook_delete(*, organization: Organization, webhook_id: uuid.UUID) -> None:
    """Delete the endpoint and its deliveries (their pending attempts then find nothing and
    end). Raises `WebhookNotFoundError` for an unknown id or another org's."""
    deleted, _ = Webhook.objects.filter(pk=webhook_id, organization=organization).delete()
    if not deleted:
        raise WebhookNotFoundError()


def _timestamp(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def webhook_event_publish(
    *,
    organization_id: uuid.UUID,
    type: str,
    data: dict[str, Any],
    event_id: uuid.UUID | None = None,
) -> list[uuid.UUID]:
    """Emit the event `type` with `data` to every endpoint of the org subscribed to it: one
    delivery (body `{type, timestamp, data}`) and its outbox job per endpoint, inside the
    caller's transaction (call it in the transaction that makes the event happen), published
    after commit. Returns the deliveries' ids (none: no endpoint subscribed).

    `event_id` (the `webhook-id` of every attempt) defaults to a new id; an event published
    again with the same `event_id` creates nothing twice (idempotent), so callers that may
    emit one event twice pass a stable id."""
    if type not in WebhookEventType.values:
        raise ValueError(f"unknown webhook event type {type!r}")
    hooks = [
        hook_id
        for hook_id, events in Webhook.objects.filter(organization_id=organization_id)
        .order_by()
        .values_list("id", "events")
        if type in events
    ]
    if not hooks:
        return []
    event_id = event_id or uuid.uuid4()
    now = timezone.now()
    body = json.dumps(
        {"type": type, "timestamp": _timestamp(now), "data": data},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    deliveries = [
        WebhookDelivery(
            id=uuid.uuid5(event_id, str(hook_id)),
            webhook_id=hook_id,
            event_id=event_id,
            event_type=type,
            body=body,
            next_attempt_at=now,
        )
        for hook_id in hooks
    ]
    for delivery in deliveries:
        delivery.job_id = delivery.id
    WebhookDelivery.objects.bulk_create(deliveries, ignore_conflicts=True)
    outbox_jobs_create(
        organization_id=organization_id,
        job_type=DELIVERY_JOB_TYPE,
        step=DELIVERY_STEP,
        jobs={d.id: {DELIVERY_KEY: str(d.id)} for d in deliveries},
    )
    return [d.id for d in deliveries]


def delivery_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """A new attempt now, with the same `webhook-id`. A pending delivery's next attempt is
    brought forward (a running attempt is left to finish); a delivered or failed one gets one
    more attempt (a new outbox job; its outcome is the delivery's new status)."""
    now = timezone.now()
    with transaction.atomic():
        if delivery.status == DeliveryStatus.PENDING and delivery.job_id is not None:
            if outbox_job_run_now(job_id=delivery.job_id, step=DELIVERY_STEP):
                WebhookDelivery.objects.filter(
                    pk=delivery.pk, status=DeliveryStatus.PENDING
                ).update(next_attempt_at=now)
        else:
            job_id = uuid.uuid4()
            changed = WebhookDelivery.objects.filter(
                pk=delivery.pk, status=delivery.status, job_id=delivery.job_id
            ).update(status=DeliveryStatus.PENDING, next_attempt_at=now, job_id=job_id)
            if changed:
                outbox_jobs_create(
                    organization_id=delivery.webhook.organization_id,
                    job_type=DELIVERY_JOB_TYPE,
                    step=DELIVERY_STEP,
                    jobs={job_id: {DELIVERY_KEY: str(delivery.pk), SINGLE_ATTEMPT_KEY: True}},
                )
    delivery.refresh_from_db()
    return delivery
