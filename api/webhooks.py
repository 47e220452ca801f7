"""Webhook endpoints, their deliveries and attempts (SPEC §11.3, §12.2). Each answer is
rendered by the output serializer its route declares (api.routes), which the OpenAPI document
describes."""

from __future__ import annotations

import uuid

from drf_spectacular.utils import OpenApiCallback, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.pagination import PageQuerySerializer
from api.routes import answer, route
from api.schemas import examples as ex
from api.webhook_serializers import (
    EVENT_SERIALIZERS,
    AttemptListSerializer,
    DeliveryListQuerySerializer,
    DeliveryListSerializer,
    DeliverySerializer,
    WebhookCreatedSerializer,
    WebhookCreateSerializer,
    WebhookListSerializer,
    WebhookSerializer,
    WebhookUpdateSerializer,
)
from webhooks import selectors, services
from webhooks.exceptions import WebhookDisabledError, WebhookNotFoundError
from webhooks.models import Webhook, WebhookDelivery

SIGNED = (
    "Signed as Standard Webhooks specifies: `webhook-id` (the event's id, the same on every "
    "attempt), `webhook-timestamp` (this attempt's time, seconds since the epoch) and "
    '`webhook-signature` (`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, one per '
    "secret, space-separated: for 24 h after a rotation, `v1,<new> v1,<old>`; a secret "
    "replaced signs for 24 h, at most three signatures)."
)


class WebhookView(OrgScopedView):
    def webhook(self, webhook_id: str) -> Webhook:
        return selectors.webhook_get(
            organization=self.scope.organization, webhook_id=uuid.UUID(webhook_id)
        )


class SecretAnswerView(WebhookView):
    """A POST whose answer shows the endpoint's secret: the idempotency record keeps it
    encrypted, so a replay answers the secret first shown (not the current one), also after
    the endpoint was deleted."""

    idempotency_withheld = ("secret",)


def _event_callback(event_type: str) -> OpenApiCallback:
    """What an endpoint receives for one event type: the signed POST of its body."""
    return OpenApiCallback(
        name=event_type,
        path="{$request.body#/url}",
        decorator={
            "post": extend_schema(
                summary=f"The `{event_type}` event",
                description=SIGNED,
                request=EVENT_SERIALIZERS[event_type],
                responses={
                    200: OpenApiResponse(
                        description="Any 2xx within 10 s delivers; anything else is retried."
                    )
                },
            )
        },
    )


class WebhookCollectionView(SecretAnswerView):
    @route(
        operation_id="webhookList",
        tag="webhooks",
        summary="List the organization's webhook endpoints (newest first, without secrets)",
        query=PageQuerySerializer,
        answers={
            200: answer(
                WebhookListSerializer,
                "A page of endpoints.",
                {"A page": {"items": [ex.WEBHOOK], "nextCursor": None}},
            )
        },
    )
    def get(self, request: Request, org_id: str) -> Response:
        query = self.query_parse(request)
        page = selectors.webhook_list(
            organization=self.scope.organization, cursor=query["cursor"], limit=query["limit"]
        )
        return Response(WebhookListSerializer(page).data)

    @route(
        operation_id="webhookCreate",
        tag="webhooks",
        summary="Register a webhook endpoint (at most 10 per organization)",
        description="Events are POSTed as `{type, timestamp, data}`, signed as Standard Webhooks "
        "specifies (`webhook-id`, `webhook-timestamp`, `webhook-signature`). `secret` appears "
        "in this answer only. An 11th endpoint, a URL that is not `https://`, longer than 2048 "
        "characters, or whose host resolves to a non-public address → 400 `invalidRequest` "
        "(`details.field`: `url`).",
        body=WebhookCreateSerializer,
        examples={"Job endings only": {"url": ex.URL, "events": ["job.completed", "job.failed"]}},
        callbacks=[_event_callback(event_type) for event_type in EVENT_SERIALIZERS],
        answers={
            201: answer(
                WebhookCreatedSerializer,
                "Registered; keep the secret (it is never shown again).",
                {"Registered": {**ex.WEBHOOK, "secret": ex.SECRET}},
            )
        },
    )
    def post(self, request: Request, org_id: str) -> Response:
        data = self.body(request)
        created = services.webhook_create(
            organization=self.scope.organization,
            url=data["url"],
            events=data.get("events"),
            description=data.get("description", ""),
        )
        return Response(
            WebhookCreatedSerializer(created).data,
            status=201,
            headers={"Location": webhook_location(created.webhook)},
        )


class WebhookDetailView(WebhookView):
    @route(
        operation_id="webhookGet",
        tag="webhooks",
        summary="Read one webhook endpoint (without its secret)",
        answers={200: answer(WebhookSerializer, "The endpoint.", {"An endpoint": ex.WEBHOOK})},
        raises=[WebhookNotFoundError],
    )
    def get(self, request: Request, org_id: str, webhook_id: str) -> Response:
        return Response(WebhookSerializer(self.webhook(webhook_id)).data)

    @route(
        operation_id="webhookUpdate",
        tag="webhooks",
        summary="Change an endpoint's url, events, enabled or description",
        description="Only the members given change. A disabled endpoint gets no new deliveries "
        "(those already pending go on). A `url` refused as at registration → 400 "
        "`invalidRequest` (`details.field`: `url`).",
        body=WebhookUpdateSerializer,
        examples={"Disable": {"enabled": False}},
        answers={
            200: answer(
                WebhookSerializer,
                "The endpoint as changed.",
                {"Disabled": {**ex.WEBHOOK, "enabled": False}},
            )
        },
        raises=[WebhookNotFoundError],
    )
    def patch(self, request: Request, org_id: str, webhook_id: str) -> Response:
        changes = self.body(request)
        webhook = services.webhook_update(webhook=self.webhook(webhook_id), changes=changes)
        return Response(WebhookSerializer(webhook).data)

    @route(
        operation_id="webhookDelete",
        tag="webhooks",
        summary="Delete a webhook endpoint and its deliveries",
        answers={204: answer(None, "Deleted.")},
        raises=[WebhookNotFoundError],
    )
    def delete(self, request: Request, org_id: str, webhook_id: str) -> Response:
        services.webhook_delete(
            organization=self.scope.organization, webhook_id=uuid.UUID(webhook_id)
        )
        return Response(status=204)


class WebhookRotateSecretView(SecretAnswerView):
    @route(
        operation_id="webhookRotateSecret",
        tag="webhooks",
        summary="Replace an endpoint's signing secret (the new one is shown once)",
        description="For 24 h every delivery carries both signatures (`webhook-signature: "
        "v1,<new> v1,<old>`), so the receiver can switch secrets without losing a message. "
        "Every secret replaced signs for 24 h after it was replaced, at most three signatures "
        "at once (newest first): a rotation retried within the 24 h keeps the secret the "
        "receiver still has signing.",
        answers={
            200: answer(
                WebhookCreatedSerializer,
                "The endpoint and its new secret (never shown again).",
                {"Rotated": {**ex.WEBHOOK, "secret": ex.SECRET}},
            )
        },
        raises=[WebhookNotFoundError],
    )
    def post(self, request: Request, org_id: str, webhook_id: str) -> Response:
        rotated = services.webhook_secret_rotate(webhook=self.webhook(webhook_id))
        return Response(WebhookCreatedSerializer(rotated).data)


class WebhookTestView(WebhookView):
    @route(
        operation_id="webhookTest",
        tag="webhooks",
        summary="Send a `webhook.test` event to this endpoint only",
        description="One delivery, attempted as any other, whatever the endpoint subscribes "
        "to. A disabled endpoint → 409 `webhookDisabled`.",
        answers={
            202: answer(
                DeliverySerializer,
                "The test delivery, its first attempt scheduled now.",
                {"Scheduled": ex.TEST_DELIVERY},
            )
        },
        raises=[WebhookNotFoundError, WebhookDisabledError],
    )
    def post(self, request: Request, org_id: str, webhook_id: str) -> Response:
        webhook = self.webhook(webhook_id)
        delivery = services.webhook_test_send(webhook=webhook)
        return _delivery_accepted(delivery, webhook=webhook)


class DeliveryCollectionView(WebhookView):
    @route(
        operation_id="webhookDeliveryList",
        tag="webhooks",
        summary="List an endpoint's deliveries (newest first)",
        description="One delivery per event: `pending` while attempts remain (retries after "
        "5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), `delivered` after a 2xx within 10 s, else "
        "`failed`.",
        query=DeliveryListQuerySerializer,
        answers={
            200: answer(
                DeliveryListSerializer,
                "A page of deliveries.",
                {"A page": {"items": [ex.DELIVERY], "nextCursor": None}},
            )
        },
        raises=[WebhookNotFoundError],
    )
    def get(self, request: Request, org_id: str, webhook_id: str) -> Response:
        query = self.query_parse(request)
        page = selectors.delivery_list(
            webhook=self.webhook(webhook_id),
            status=query.get("status"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        return Response(DeliveryListSerializer(page).data)


class DeliveryDetailView(WebhookView):
    @route(
        operation_id="webhookDeliveryGet",
        tag="webhooks",
        summary="Read one delivery (as the list shows it)",
        description="An unknown delivery, another endpoint's or another organization's → 404 "
        "`webhookNotFound`.",
        answers={200: answer(DeliverySerializer, "The delivery.", {"A delivery": ex.DELIVERY})},
        raises=[WebhookNotFoundError],
    )
    def get(self, request: Request, org_id: str, webhook_id: str, delivery_id: str) -> Response:
        delivery = selectors.delivery_get(
            webhook=self.webhook(webhook_id), delivery_id=uuid.UUID(delivery_id)
        )
        return Response(DeliverySerializer(delivery).data)


class DeliveryRedeliverView(WebhookView):
    @route(
        operation_id="webhookRedeliver",
        tag="webhooks",
        summary="Attempt a delivery again now (same `webhook-id`)",
        description="A pending delivery's next attempt is brought forward; a delivered or "
        "failed one gets one more attempt, whose outcome is its new status.",
        answers={
            202: answer(
                DeliverySerializer,
                "The attempt is scheduled now.",
                {"Scheduled": {**ex.DELIVERY, "nextAttemptAt": ex.UPDATED_AT}},
            )
        },
        raises=[WebhookNotFoundError],
    )
    def post(self, request: Request, org_id: str, webhook_id: str, delivery_id: str) -> Response:
        webhook = self.webhook(webhook_id)
        delivery = selectors.delivery_get(webhook=webhook, delivery_id=uuid.UUID(delivery_id))
        delivery = services.delivery_redeliver(delivery=delivery)
        return _delivery_accepted(delivery, webhook=webhook)


class AttemptCollectionView(WebhookView):
    @route(
        operation_id="webhookAttemptList",
        tag="webhooks",
        summary="List a delivery's attempts (newest first)",
        description="One entry per attempt made; the delivery's `attempts` is their count.",
        query=PageQuerySerializer,
        answers={
            200: answer(
                AttemptListSerializer,
                "A page of attempts.",
                {"A page": {"items": [ex.ATTEMPT], "nextCursor": None}},
            )
        },
        raises=[WebhookNotFoundError],
    )
    def get(self, request: Request, org_id: str, webhook_id: str, delivery_id: str) -> Response:
        query = self.query_parse(request)
        delivery = selectors.delivery_get(
            webhook=self.webhook(webhook_id), delivery_id=uuid.UUID(delivery_id)
        )
        page = selectors.attempt_list(
            delivery=delivery, cursor=query["cursor"], limit=query["limit"]
        )
        return Response(AttemptListSerializer(page).data)


def webhook_location(webhook: Webhook) -> str:
    return f"/v2/orgs/{webhook.organization_id}/serenity/webhooks/{webhook.pk}"


def _delivery_accepted(delivery: WebhookDelivery, *, webhook: Webhook) -> Response:
    """A 202 of a delivery scheduled now, and where to read it (SPEC §13.6)."""
    path = f"{webhook_location(webhook)}/deliveries/{delivery.pk}"
    return Response(DeliverySerializer(delivery).data, status=202, headers={"Location": path})
