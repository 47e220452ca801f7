"""The OpenAPI description of the webhook routes (SPEC §11.3): one `extend_schema` per
operation. The response classes are the ones the views render with (serenity.api.webhooks)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema

from serenity.api.schemas import examples as ex
from serenity.api.schemas.parts import (
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
from serenity.api.webhook_serializers import (
    DeliveryListSerializer,
    DeliverySerializer,
    WebhookCreatedSerializer,
    WebhookCreateSerializer,
    WebhookListSerializer,
    WebhookSerializer,
)

WEBHOOK_NOT_FOUND: ErrorCodes = {404: ["webhookNotFound"]}
WEBHOOK_ID = "5e0a7c31-2b9d-4f68-8c14-9d3e6a2b7f05"
DELIVERY_ID = "9a4f2d6e-1c7b-5e83-a0d9-3b6f8e2c4d17"
EVENT_ID = "e2b7c9d4-8f13-5a6e-b0c2-7d4a1f9e3b68"
URL = "https://hooks.acme.example/serenity"
WEBHOOK: dict[str, Any] = {
    "id": WEBHOOK_ID,
    "url": URL,
    "events": ["job.completed", "job.failed", "job.cancelled", "onboarding.completed"],
    "createdAt": ex.CREATED_AT,
}
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
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        201: OpenApiResponse(
            WebhookCreatedSerializer,
            description="Registered; keep the secret (it is never shown again).",
            examples=[
                ex.example(
                    "Registered",
                    {
                        **WEBHOOK,
                        "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw6xKPUL3FxfM=",
                    },
                )
            ],
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

delivery_list_schema = extend_schema(
    operation_id="webhookDeliveryList",
    tags=["webhooks"],
    summary="List an endpoint's deliveries (newest first)",
    description="One delivery per event: `pending` while attempts remain (retries after 5 s, "
    "5 min, 30 min, 2 h, 5 h, 10 h, 10 h), `delivered` after a 2xx within 10 s, else `failed`.",
    parameters=[*PAGE_PARAMETERS, WWW_AUTHENTICATE],
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
