"""Reads of webhooks: an org's endpoints and an endpoint's deliveries, paginated as the other
lists (SPEC §10.3), newest first."""

from __future__ import annotations

import uuid

from kernel.pagination import Page, keyset_page
from serenity.models import Organization
from webhooks.exceptions import WebhookNotFoundError
from webhooks.models import Webhook, WebhookAttempt, WebhookDelivery

NEWEST_FIRST = ("-created_at", "-id")


def webhook_get(*, organization: Organization, webhook_id: uuid.UUID) -> Webhook:
    """Raises `WebhookNotFoundError` for an unknown id or another org's (the same answer)."""
    try:
        return Webhook.objects.get(pk=webhook_id, organization=organization)
    except Webhook.DoesNotExist:
        raise WebhookNotFoundError() from None


def webhook_list(*, organization: Organization, cursor: str | None, limit: int) -> Page[Webhook]:
    return keyset_page(
        Webhook.objects.filter(organization=organization),
        kind="webhooks",
        ordering=NEWEST_FIRST,
        sort_key=lambda w: [w.created_at.isoformat(), str(w.pk)],
        cursor=cursor,
        limit=limit,
    )


def delivery_list(
    *, webhook: Webhook, status: str | None, cursor: str | None, limit: int
) -> Page[WebhookDelivery]:
    deliveries = WebhookDelivery.objects.filter(webhook=webhook).defer("body")
    if status:
        deliveries = deliveries.filter(status=status)
    return keyset_page(
        deliveries,
        kind="webhookDeliveries",
        ordering=NEWEST_FIRST,
        sort_key=lambda d: [d.created_at.isoformat(), str(d.pk)],
        cursor=cursor,
        limit=limit,
    )


def delivery_get(*, webhook: Webhook, delivery_id: uuid.UUID) -> WebhookDelivery:
    """Raises `WebhookNotFoundError` for an unknown delivery or another webhook's."""
    try:
        return WebhookDelivery.objects.select_related("webhook").get(
            pk=delivery_id, webhook=webhook
        )
    except WebhookDelivery.DoesNotExist:
        raise WebhookNotFoundError() from None


def attempt_list(
    *, delivery: WebhookDelivery, cursor: str | None, limit: int
) -> Page[WebhookAttempt]:
    """A delivery's attempts, newest first."""
    return keyset_page(
        WebhookAttempt.objects.filter(delivery=delivery),
        kind="webhookAttempts",
        ordering=("-at", "-id"),
        sort_key=lambda a: [a.at.isoformat(), a.pk],
        cursor=cursor,
        limit=limit,
    )
