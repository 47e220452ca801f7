"""The OpenAPI description of the webhook routes (SPEC §11.3): one `extend_schema` per
operation. The response classes are the ones the views render with (api.webhooks)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiCallback,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)

from api.schemas import examples as ex
from api.schemas.parts import (
    ORG_CHECKS,
    PAGE_PARAMETERS,
    PAGED,
    WRITE_CHECKS,
    WRITE_PARAMETERS,
    WWW_AUTHENTICATE,
    ErrorCodes,
    error_responses,
    ok,
)
from api.webhook_serializers import (
    EVENT_SERIALIZERS,
    AttemptListSerializer,
    DeliveryListSerializer,
    DeliverySerializer,
    WebhookCreatedSerializer,
    WebhookCreateSerializer,
    WebhookListSerializer,
    WebhookSerializer,
    WebhookUpdateSerializer,
)
from webhooks.models import SUBSCRIBABLE_EVENT_TYPES, DeliveryStatus

WEBHOOK_NOT_FOUND: ErrorCodes = {404: ["webhookNotFound"]}
WEBHOOK_ID = "5e0a7c31-2b9d-4f68-8c14-9d3e6a2b7f05"
DELIVERY_ID = "9a4f2d6e-1c7b-5e83-a0d9-3b6f8e2c4d17"
EVENT_ID = "e2b7c9d4-8f13-5a6e-b0c2-7d4a1f9e3b68"
URL = "https://hooks.acme.example/serenity"
WEBHOOK: dict[str, Any] = {
    "id": WEBHOOK_ID,
    "url": URL,
    "events": list(SUBSCRIBABLE_EVENT_TYPES),
    "enabled": True,
    "disabledReason": None,
    "description": "Provisioning alerts",
    "createdAt": ex.CREATED_AT,
}
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw6xKPUL3FxfM="
DELIVERY: dict[str, Any] = {
    "id": DELIVERY_ID,
    "eventId": EVENT_ID,
    "type": "job.completed",
    "status": "pending",
    "attempts": 1,
    "lastStatusCode": 503,
    "lastError": "answered 503",
    "nextAttemptAt": "2026-01-15T09:30:09.123456Z",
    "createdAt": ex.CREATED_AT,
}


SIGNED = (
    "Signed as Standard Webhooks specifies: `webhook-id` (the event's id, the same on every "
    "attempt), `webhook-timestamp` (this attempt's time, seconds since the epoch) and "
    '`webhook-signature` (`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, one per '
    "secret, space-separated: for 24 h after a rotation, `v1,<new> v1,<old>`)."
)


def _event_callback(event_type: str) -> OpenApiCallback:
    """What an endpoint receives for one event type: the signed POST of its body."""
    return OpenApiCallback(
        name=str(event_type),
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


webhook_create_schema = extend_schema(
    operation_id="webhookCreate",
    tags=["webhooks"],
    summary="Register a webhook endpoint (at most 10 per organization)",
    description="Events are POSTed as `{type, timestamp, data}`, signed as Standard Webhooks "
    "specifies (`webhook-id`, `webhook-timestamp`, `webhook-signature`). `secret` appears in "
    "this answer only. An 11th endpoint, a URL that is not `https://`, longer than 2048 "
    "characters, or whose host resolves to a non-public address → 400 `invalidRequest` "
    "(`details.field`: `url`).",
    request=WebhookCreateSerializer,
    examples=[
        ex.request("Job endings only", {"url": URL, "events": ["job.completed", "job.failed"]})
    ],
    callbacks=[_event_callback(str(event_type)) for event_type in EVENT_SERIALIZERS],
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        201: OpenApiResponse(
            WebhookCreatedSerializer,
            description="Registered; keep the secret (it is never shown again).",
            examples=[ex.example("Registered", {**WEBHOOK, "secret": SECRET})],
        ),
        **error_responses(ORG_CHECKS, WRITE_CHECKS),
    },
)

webhook_list_schema = extend_schema(
    operation_id="webhookList",
    tags=["webhooks"],
    summary="List the organization's webhook endpoints (newest first, without secrets)",
    parameters=[*PAGE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            WebhookListSerializer,
            "A page of endpoints.",
            ex.example("A page", {"items": [WEBHOOK], "nextCursor": None}),
        ),
        **error_responses(ORG_CHECKS, PAGED),
    },
)

webhook_get_schema = extend_schema(
    operation_id="webhookGet",
    tags=["webhooks"],
    summary="Read one webhook endpoint (without its secret)",
    parameters=[WWW_AUTHENTICATE],
    responses={
        200: ok(WebhookSerializer, "The endpoint.", ex.example("An endpoint", WEBHOOK)),
        **error_responses(ORG_CHECKS, WEBHOOK_NOT_FOUND),
    },
)

webhook_delete_schema = extend_schema(
    operation_id="webhookDelete",
    tags=["webhooks"],
    summary="Delete a webhook endpoint and its deliveries",
    parameters=[WWW_AUTHENTICATE],
    responses={
        204: OpenApiResponse(description="Deleted."),
        **error_responses(ORG_CHECKS, WEBHOOK_NOT_FOUND),
    },
)

DELIVERY_STATUS_QUERY = OpenApiParameter(
    "status",
    str,
    OpenApiParameter.QUERY,
    enum=DeliveryStatus.values,
    description="Only deliveries in this status; an unknown status → 400 `invalidRequest`.",
)

delivery_list_schema = extend_schema(
    operation_id="webhookDeliveryList",
    tags=["webhooks"],
    summary="List an endpoint's deliveries (newest first)",
    description="One delivery per event: `pending` while attempts remain (retries after 5 s, "
    "5 min, 30 min, 2 h, 5 h, 10 h, 10 h), `delivered` after a 2xx within 10 s, else `failed`.",
    parameters=[DELIVERY_STATUS_QUERY, *PAGE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            DeliveryListSerializer,
            "A page of deliveries.",
            ex.example("A page", {"items": [DELIVERY], "nextCursor": None}),
        ),
        **error_responses(ORG_CHECKS, WEBHOOK_NOT_FOUND, PAGED),
    },
)

delivery_redeliver_schema = extend_schema(
    operation_id="webhookRedeliver",
    tags=["webhooks"],
    summary="Attempt a delivery again now (same `webhook-id`)",
    description="A pending delivery's next attempt is brought forward; a delivered or failed "
    "one gets one more attempt, whose outcome is its new status.",
    request=None,
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        202: OpenApiResponse(
            DeliverySerializer,
            description="The attempt is scheduled now.",
            examples=[ex.example("Scheduled", {**DELIVERY, "nextAttemptAt": ex.UPDATED_AT})],
        ),
        **error_responses(ORG_CHECKS, WEBHOOK_NOT_FOUND, WRITE_CHECKS),
    },
)

webhook_update_schema = extend_schema(
    operation_id="webhookUpdate",
    tags=["webhooks"],
    summary="Change an endpoint's url, events, enabled or description",
    description="Only the members given change. A disabled endpoint gets no new deliveries "
    "(those already pending go on). A `url` refused as at registration → 400 "
    "`invalidRequest` (`details.field`: `url`).",
    request=WebhookUpdateSerializer,
    examples=[ex.request("Disable", {"enabled": False})],
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            WebhookSerializer,
            "The endpoint as changed.",
            ex.example("Disabled", {**WEBHOOK, "enabled": False}),
        ),
        **error_responses(ORG_CHECKS, WEBHOOK_NOT_FOUND, WRITE_CHECKS),
    },
)

webhook_rotate_secret_schema = extend_schema(
    operation_id="webhookRotateSecret",
    tags=["webhooks"],
    summary="Replace an endpoint's signing secret (the new one is shown once)",
    description="For 24 h every delivery carries both signatures (`webhook-signature: "
    "v1,<new> v1,<old>`), so the receiver can switch secrets without losing a message.",
    request=None,
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            WebhookCreatedSerializer,
            "The endpoint and its new secret (never shown again).",
            ex.example("Rotated", {**WEBHOOK, "secret": SECRET}),
        ),
        **error_responses(ORG_CHECKS, WEBHOOK_NOT_FOUND, WRITE_CHECKS),
    },
)

webhook_test_schema = extend_schema(
    operation_id="webhookTest",
    tags=["webhooks"],
    summary="Send a `webhook.test` event to this endpoint only",
    description="One delivery, attempted as any other, whatever the endpoint subscribes to. "
    "A disabled endpoint → 409 `webhookDisabled`.",
    request=None,
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        202: OpenApiResponse(
            DeliverySerializer,
            description="The test delivery, its first attempt scheduled now.",
            examples=[
                ex.example(
                    "Scheduled",
                    {
                        **DELIVERY,
                        "type": "webhook.test",
                        "attempts": 0,
                        "lastStatusCode": None,
                        "lastError": None,
                    },
                )
            ],
        ),
        **error_responses(ORG_CHECKS, WEBHOOK_NOT_FOUND, {409: ["webhookDisabled"]}, WRITE_CHECKS),
    },
)

attempt_list_schema = extend_schema(
    operation_id="webhookAttemptList",
    tags=["webhooks"],
    summary="List a delivery's attempts (newest first)",
    description="One entry per attempt made; the delivery's `attempts` is their count.",
    parameters=[*PAGE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            AttemptListSerializer,
            "A page of attempts.",
            ex.example(
                "A page",
                {
                    "items": [
                        {
                            "at": ex.CREATED_AT,
                            "statusCode": 503,
                            "error": "answered 503",
                            "durationMs": 84,
                        }
                    ],
                    "nextCursor": None,
                },
            ),
        ),
        **error_responses(ORG_CHECKS, WEBHOOK_NOT_FOUND, PAGED),
    },
)
