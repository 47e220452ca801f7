"""Reads of webhooks: an org's endpoints and an endpoint's deliveries, paginated as the other
lists (SPEC §10.3), newest first."""

from __future__ import annotations

import uuid

from kernel.pagination import Page, keyset_page
from serenity.models import Organization
from webhooks.exceptions import WebhookNotFoundError
from webhooks.models import Webhook, WebhookDelivery

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


def delivery_list(*, webhook: Webhook, cursor: str | None, limit: int) -> Page[WebhookDelivery]:
    return keyset_page(
        WebhookDelivery.objects.filter(webhook=webhook).defer("body"),
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
