"""Writes of webhooks (SPEC §11.3, §12.4): endpoints, events and redeliveries.

An event becomes one delivery per subscribed endpoint of the org, each with its job row in the
outbox, all inside the caller's transaction (`webhook_event_publish`): they commit with the
business write that caused the event, or not at all, and are published after commit.

What one org can queue is bounded: past `WEBHOOK_PENDING_MAX_PER_ORG` pending deliveries, the
oldest pending end `failed` (`overflow`), their jobs with them; a deleted endpoint's pending
deliveries end with it (their jobs CANCELLED: nothing of it stays queued); an endpoint whose
every attempt failed for `WEBHOOK_FAILING_DISABLE_SECONDS` is disabled (`disabled_reason`).
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.outbox import outbox_job_run_now, outbox_jobs_cancel, outbox_jobs_create
from kernel.crypto import Reencryption, column_reencrypt
from serenity.models import Organization
from webhooks.addresses import AddressRefusedError, addresses_resolve, target_parse
from webhooks.exceptions import (
    WebhookDisabledError,
    WebhookLimitError,
    WebhookNotFoundError,
    WebhookUrlError,
)
from webhooks.models import (
    SUBSCRIBABLE_EVENT_TYPES,
    DeliveryStatus,
    Webhook,
    WebhookDelivery,
    WebhookEventType,
)

MAX_WEBHOOKS_PER_ORG = 10
DELIVERY_JOB_TYPE = "webhookDelivery"
DELIVERY_STEP = "deliverWebhook"
DELIVERY_KEY = "deliveryId"
# A redelivery of a finished delivery is one attempt, outside the retry schedule.
SINGLE_ATTEMPT_KEY = "singleAttempt"
# After a rotation, the replaced secret signs deliveries beside the new one this long.
PREVIOUS_SECRET_VALID_FOR = timedelta(hours=24)
# A due delivery job without a message of its own (one of a batch past the first few, or whose
# message found no slot) is run by the loops of the attempts in flight (`webhooks.slots`); the
# dispatcher publishes it again only this much (and a lease) later, as a backstop.
PARKED_SECONDS = 3600.0
OVERFLOW = "overflow"
FAILING_DISABLED_REASON = "every attempt failed for 24 h"


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
    def enabled(self) -> bool:
        return self.webhook.enabled

    @property
    def description(self) -> str:
        return self.webhook.description

    @property
    def disabled_reason(self) -> str | None:
        return self.webhook.disabled_reason

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
    *,
    organization: Organization,
    url: str,
    events: list[str] | None,
    description: str = "",
) -> WebhookCreated:
    """Register an endpoint (at most `MAX_WEBHOOKS_PER_ORG` per org: the org row is locked while
    counting, so two concurrent registrations cannot make an eleventh). `events` defaults to
    every event type an endpoint can subscribe to. Raises `WebhookUrlError`,
    `WebhookLimitError`."""
    webhook_url_check(url)
    chosen = list(dict.fromkeys(events)) if events else list(SUBSCRIBABLE_EVENT_TYPES)
    secret = webhook_secret_generate()
    with transaction.atomic():
        list(Organization.objects.select_for_update().filter(pk=organization.pk).values("pk"))
        if Webhook.objects.filter(organization=organization).count() >= MAX_WEBHOOKS_PER_ORG:
            raise WebhookLimitError()
        webhook = Webhook(
            organization=organization, url=url, events=chosen, description=description
        )
        webhook.set_secret(secret)
        webhook.save(force_insert=True)
    return WebhookCreated(webhook=webhook, secret=secret)


def webhook_delete(*, organization: Organization, webhook_id: uuid.UUID) -> None:
    """Delete the endpoint and its deliveries, and end the jobs of its pending ones CANCELLED
    in the same transaction (their queued messages find nothing to claim; an attempt running
    meanwhile ends its own job when it finds its delivery gone). Raises `WebhookNotFoundError`
    for an unknown id or another org's."""
    with transaction.atomic():
        job_ids = [
            job_id
            for job_id in WebhookDelivery.objects.filter(
                webhook_id=webhook_id,
                webhook__organization=organization,
                status=DeliveryStatus.PENDING,
            ).values_list("job_id", flat=True)
            if job_id is not None
        ]
        deleted, _ = Webhook.objects.filter(pk=webhook_id, organization=organization).delete()
        if not deleted:
            raise WebhookNotFoundError()
        outbox_jobs_cancel(job_ids=job_ids, error=_delivery_ended_error("webhook deleted"))


def _delivery_ended_error(message: str) -> dict[str, object]:
    return {"code": "webhookDeliveryFailed", "message": message, "retryable": False}


_UPDATABLE = ("url", "events", "enabled", "description")


def webhook_update(*, webhook: Webhook, changes: dict[str, Any]) -> Webhook:
    """Change the given members of `url`, `events`, `enabled`, `description` (a conditional
    write of those columns only). A disabled endpoint gets no new deliveries; those already
    pending go on. Raises `WebhookUrlError` for a `url` that may not be called."""
    fields = {name: changes[name] for name in _UPDATABLE if name in changes}
    if "url" in fields:
        webhook_url_check(fields["url"])
    if "events" in fields:
        fields["events"] = list(dict.fromkeys(fields["events"]))
    if "enabled" in fields:
        # Enabled again (or disabled) by the client: the service's reason and count start over.
        fields.update(disabled_reason=None, failing_since=None)
    if fields:
        Webhook.objects.filter(pk=webhook.pk).update(**fields, updated_at=timezone.now())
    webhook.refresh_from_db()
    return webhook


def webhook_secret_rotate(*, webhook: Webhook) -> WebhookCreated:
    """A new signing secret (shown once: the answer to this call). Every secret it replaces,
    stored encrypted like the current one, still signs every delivery for 24 h after it was
    replaced (Standard Webhooks allows several signatures), at most three signatures at once
    (SPEC §13.6): a rotation retried without an `Idempotency-Key` (a second one within the 24 h)
    keeps the secret the receiver still has signing. Raises `ValueError` when no configured key
    decrypts the current secret."""
    secret = webhook_secret_generate()
    now = timezone.now()
    with transaction.atomic():
        # Locked: of two rotations racing, the second replaces the first's new secret (which
        # then signs as the previous one), never the same old secret twice.
        locked = Webhook.objects.select_for_update().get(pk=webhook.pk)
        previous_expires = locked.previous_secret_expires_at
        if locked.previous_secret_encrypted and previous_expires and previous_expires > now:
            locked.older_secret_encrypted = locked.previous_secret_encrypted
            locked.older_secret_expires_at = previous_expires
        else:
            locked.older_secret_encrypted, locked.older_secret_expires_at = "", None
        locked.previous_secret_encrypted = locked.secret_encrypted
        locked.previous_secret_expires_at = now + PREVIOUS_SECRET_VALID_FOR
        locked.set_secret(secret)
        locked.updated_at = now
        locked.save(
            update_fields=[
                "secret_encrypted",
                "previous_secret_encrypted",
                "previous_secret_expires_at",
                "older_secret_encrypted",
                "older_secret_expires_at",
                "updated_at",
            ]
        )
    return WebhookCreated(webhook=locked, secret=secret)


def webhook_secrets_reencrypt() -> Reencryption:
    """Re-encrypt every endpoint's signing secret with the first of FIELD_ENCRYPTION_KEYS, and
    the replaced secrets while they still sign (an expired one is never read again); the endpoints
    no configured key decrypts are reported, left as they are."""
    current = column_reencrypt(Webhook.objects.all(), "secret_encrypted")
    previous = column_reencrypt(
        Webhook.objects.filter(previous_secret_expires_at__gt=timezone.now()),
        "previous_secret_encrypted",
    )
    older = column_reencrypt(
        Webhook.objects.filter(older_secret_expires_at__gt=timezone.now()),
        "older_secret_encrypted",
    )
    return Reencryption(
        rotated=current.rotated + previous.rotated + older.rotated,
        undecryptable=sorted(
            {*current.undecryptable, *previous.undecryptable, *older.undecryptable}
        ),
    )


def webhook_test_send(*, webhook: Webhook) -> WebhookDelivery:
    """A `webhook.test` event to this endpoint only, whatever it subscribes to: one delivery,
    attempted as any other. Raises `WebhookDisabledError` for a disabled endpoint (it gets no
    new deliveries)."""
    if not webhook.enabled:
        raise WebhookDisabledError()
    event = Event(
        type=WebhookEventType.WEBHOOK_TEST,
        data={"webhookId": str(webhook.pk)},
        event_id=uuid.uuid4(),
    )
    delivery = _delivery_new(event, hook_id=webhook.pk, now=timezone.now())
    with transaction.atomic():
        [delivery_id] = _deliveries_insert(
            organization_id=webhook.organization_id, deliveries=[delivery]
        )
    return WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)


def _timestamp(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Event:
    """One event to publish: its type, its `data`, and its id (every attempt's
    `webhook-id`)."""

    type: str
    data: dict[str, Any]
    event_id: uuid.UUID


def webhook_event_publish(
    *,
    organization_id: uuid.UUID,
    type: str,
    data: dict[str, Any],
    event_id: uuid.UUID | None = None,
) -> list[uuid.UUID]:
    """Emit the event `type` with `data` to every endpoint of the org subscribed to it
    (`webhook_events_publish` of this one event). `event_id` defaults to a new id; an event
    published again with the same `event_id` creates nothing twice (idempotent), so callers
    that may emit one event twice pass a stable id."""
    return webhook_events_publish(
        organization_id=organization_id,
        events=[Event(type=type, data=data, event_id=event_id or uuid.uuid4())],
    )


def webhook_events_publish(*, organization_id: uuid.UUID, events: list[Event]) -> list[uuid.UUID]:
    """Emit `events` to every endpoint of the org subscribed to each: one delivery (body
    `{type, timestamp, data}`) and its outbox job per event and endpoint, inside the caller's
    transaction (call it in the transaction that makes the events happen), published after
    commit. Set-based whatever the number of events (an onboarding's cancel ends a thousand
    chains at once): one read of the endpoints, one insert of the deliveries, one of their
    jobs, one overflow check. Returns the deliveries' ids (none: no endpoint subscribed)."""
    unknown = [event.type for event in events if event.type not in WebhookEventType.values]
    if unknown:
        raise ValueError(f"unknown webhook event type {unknown[0]!r}")
    hooks = list(
        Webhook.objects.filter(organization_id=organization_id, enabled=True)
        .order_by()
        .values_list("id", "events")
    )
    now = timezone.now()
    deliveries = [
        _delivery_new(event, hook_id=hook_id, now=now)
        for event in events
        for hook_id, subscribed in hooks
        if event.type in subscribed
    ]
    return _deliveries_insert(organization_id=organization_id, deliveries=deliveries)


def _deliveries_insert(
    *, organization_id: uuid.UUID, deliveries: list[WebhookDelivery]
) -> list[uuid.UUID]:
    """The deliveries and their outbox jobs, in the caller's transaction; then the org's
    pending cap."""
    if not deliveries:
        return []
    WebhookDelivery.objects.bulk_create(deliveries, ignore_conflicts=True)
    # A delivery's message runs the fairest due attempt and then the next (`webhooks.slots`):
    # as many messages as the org may have attempts in flight start them all.
    outbox_jobs_create(
        organization_id=organization_id,
        job_type=DELIVERY_JOB_TYPE,
        step=DELIVERY_STEP,
        jobs={d.id: {DELIVERY_KEY: str(d.id)} for d in deliveries},
        publish_max=settings.WEBHOOK_ATTEMPTS_PER_ORG,
        unpublished_until=timezone.now() + timedelta(seconds=PARKED_SECONDS),
    )
    deliveries_overflow(organization_id=organization_id)
    return [d.id for d in deliveries]


def _delivery_new(event: Event, *, hook_id: uuid.UUID, now: datetime) -> WebhookDelivery:
    """The event's delivery to one endpoint (its id derived from both: published twice, one
    row), carried by the job of the same id."""
    body = json.dumps(
        {"type": event.type, "timestamp": _timestamp(now), "data": event.data},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    delivery_id = uuid.uuid5(event.event_id, str(hook_id))
    return WebhookDelivery(
        id=delivery_id,
        webhook_id=hook_id,
        event_id=event.event_id,
        event_type=event.type,
        body=body,
        next_attempt_at=now,
        job_id=delivery_id,
    )


def deliveries_overflow(*, organization_id: uuid.UUID) -> int:
    """Past `WEBHOOK_PENDING_MAX_PER_ORG` pending deliveries of the org, end the oldest pending
    `failed` with `last_error` `overflow`, and their jobs (set-based, in the caller's
    transaction). Two events racing may each drop the excess they counted: a few more than the
    excess then go, never too few. Returns how many were dropped."""
    # One index scan (the partial index of pending deliveries): past the newest `cap`, the
    # rest are the oldest, the excess; none when the org is under the cap.
    oldest = list(
        WebhookDelivery.objects.filter(
            webhook__organization_id=organization_id, status=DeliveryStatus.PENDING
        )
        .order_by("-created_at", "-id")
        .values_list("id", "job_id")[settings.WEBHOOK_PENDING_MAX_PER_ORG :]
    )
    if not oldest:
        return 0
    dropped = WebhookDelivery.objects.filter(
        pk__in=[pk for pk, _ in oldest], status=DeliveryStatus.PENDING
    ).update(
        status=DeliveryStatus.FAILED,
        last_error=OVERFLOW,
        next_attempt_at=None,
        updated_at=timezone.now(),
    )
    outbox_jobs_cancel(
        job_ids=[job_id for _, job_id in oldest if job_id is not None],
        error=_delivery_ended_error(OVERFLOW),
    )
    return dropped


def webhook_health_record(*, webhook_id: uuid.UUID, delivered: bool, began: datetime) -> None:
    """After an attempt (in its recording transaction): a 2xx clears `failing_since`; a
    failure sets it if unset, and disables the endpoint once it has failed every attempt for
    `WEBHOOK_FAILING_DISABLE_SECONDS` (conditional writes: no lock, no lost update)."""
    hooks = Webhook.objects.filter(pk=webhook_id)
    if delivered:
        hooks.filter(failing_since__isnull=False).update(failing_since=None)
        return
    hooks.filter(failing_since__isnull=True).update(failing_since=began)
    failing_before = timezone.now() - timedelta(seconds=settings.WEBHOOK_FAILING_DISABLE_SECONDS)
    hooks.filter(enabled=True, failing_since__lte=failing_before).update(
        enabled=False, disabled_reason=FAILING_DISABLED_REASON, updated_at=timezone.now()
    )


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
