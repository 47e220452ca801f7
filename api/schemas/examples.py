"""Example values for the OpenAPI document (SPEC §10.3): the request bodies and answers the
routes' declarations show (api.routes), so that Swagger UI and Redoc show what a real exchange
looks like. The error envelopes' examples are derived from the error classes
(api.schemas.routes)."""

from __future__ import annotations

from typing import Any

from webhooks.models import SUBSCRIBABLE_EVENT_TYPES

ORG_ID = "7f3c2a9e-5d41-4b8e-9a36-0c2b7e1f4d58"
BRAND_ID = "3b8e1c47-9f20-4d6a-b5e3-8a71c0d92f64"
JOB_ID = "c41d7e28-6a3f-4b19-8e05-2f9a6b3d71c0"
B = f"/v2/orgs/{ORG_ID}/brands/{BRAND_ID}"
CREATED_AT = "2026-01-15T09:30:00.123456Z"
UPDATED_AT = "2026-01-15T09:30:04.654321Z"
CURSOR = "eyJrIjoiYnJhbmRzIiwidiI6WyJBbHBoYSIsIjNiOGUiXX0:1uX9aB:q1w2e3r4t5y6u7i8o9p0"

BRAND = {
    "id": BRAND_ID,
    "organizationId": ORG_ID,
    "name": "Acme",
    "status": "active",
    "baseUrl": "https://acme.example",
    "urls": ["https://acme.example/shop"],
    "aliases": ["ACME Corp"],
    "serenityEnabled": None,
    "semrushSubWorkspaceId": "ws-8d2f6a1c",
    "semrushProvisioningStatus": "ready",
    "semrushProvisioningError": None,
    "createdAt": CREATED_AT,
    "updatedAt": UPDATED_AT,
}
MARKET = {
    "brandId": BRAND_ID,
    "market": "US",
    "geoTargetId": 2840,
    "languageCode": "en",
    "name": "Acme US",
    "status": "live",
    "semrushProjectId": "prj-41c7e0b2",
    "workspaceId": "ws-8d2f6a1c",
    "publishError": None,
    "createdAt": CREATED_AT,
    "updatedAt": UPDATED_AT,
}
MARKET_CREATED = {
    "brandId": BRAND_ID,
    "geoTargetId": 2840,
    "languageCode": "en",
    "workspaceId": "ws-8d2f6a1c",
    "projectId": "prj-41c7e0b2",
    "published": True,
}
ACTIVATED = {
    "brandId": BRAND_ID,
    "status": "active",
    "baseUrl": "https://acme.example",
    "markets": [{"market": "US", "languageCode": "en", "status": 201, "body": MARKET_CREATED}],
}
ACTIVATED_PARTLY = {
    **ACTIVATED,
    "markets": [
        {
            "market": "US",
            "languageCode": "en",
            "status": 502,
            "body": {
                "error": "serenityUpstreamError",
                "message": "Semrush could not complete the request.",
            },
        }
    ],
}
ACTIVATION_INCOMPLETE = {
    "brandId": BRAND_ID,
    "status": "pending",
    "error": "serenityActivationIncomplete",
    "message": "The brand could not be activated.",
    "markets": [],
}
JOB_ACCEPTED = {"jobId": JOB_ID, "jobType": "provisionWorkspace", "status": "IN_PROGRESS"}
JOB_COMPLETED_ITEM = {
    "jobId": JOB_ID,
    "jobType": "provisionWorkspace",
    "brandId": BRAND_ID,
    "mode": "async",
    "status": "COMPLETED",
    "result": {"status": 201, "body": MARKET_CREATED, "outcome": "succeeded"},
    "error": None,
    "createdAt": CREATED_AT,
    "updatedAt": UPDATED_AT,
    "finishedAt": UPDATED_AT,
}
SETTLE_READ_DONE = {
    "step": "provisionWorkspace",
    "status": "COMPLETED",
    "startedAt": "2026-01-15T09:30:00.200000Z",
    "finishedAt": "2026-01-15T09:30:00.400000Z",
    "waitingFor": None,
}
PENDING_SETTLE_READ = {"step": "provisionWorkspace", "status": "PENDING", "startedAt": None}
JOB_IN_PROGRESS: dict[str, Any] = {
    **JOB_COMPLETED_ITEM,
    "status": "IN_PROGRESS",
    "result": None,
    "finishedAt": None,
    "steps": [
        SETTLE_READ_DONE,
        {
            **PENDING_SETTLE_READ,
            "finishedAt": None,
            "runAfter": "2026-01-15T09:30:05.400000Z",
            "waitingFor": None,
        },
    ],
}
JOB_COMPLETED = {
    **JOB_COMPLETED_ITEM,
    "steps": [
        SETTLE_READ_DONE,
        {
            "step": "createMarket",
            "status": "COMPLETED",
            "startedAt": "2026-01-15T09:30:00.410000Z",
            "finishedAt": "2026-01-15T09:30:04.654321Z",
            "waitingFor": None,
        },
    ],
}
JOB_CANCELLED = {
    **JOB_IN_PROGRESS,
    "status": "CANCELLED",
    "error": {
        "code": "provisioningCancelled",
        "message": "The provisioning was cancelled.",
        "retryable": True,
    },
    "steps": [SETTLE_READ_DONE],
    "finishedAt": UPDATED_AT,
}
BRAND_CREATE = {
    "name": "Acme",
    "baseUrl": "https://acme.example",
    "aliases": ["ACME Corp"],
    "semrushMarket": {"market": "US", "languageCode": "en"},
    "async": True,
}
BRAND_ACCEPTED = {
    **BRAND,
    "semrushSubWorkspaceId": None,
    "semrushProvisioningStatus": "pending",
    "jobId": JOB_ID,
    "jobStatus": "IN_PROGRESS",
}
ACTIVATE = {
    "brandDomain": "acme.example",
    "markets": [{"market": "US", "languageCode": "en"}],
    "async": True,
}
PROMPTS = {
    "prompts": [
        {
            "text": "best running shoes",
            "geoTargetId": 2840,
            "languageCode": "en",
            "tags": ["shoes"],
        },
        {"text": "acme store near me", "geoTargetId": 2840, "languageCode": "en"},
    ]
}

# --- Onboardings ---------------------------------------------------------------------------------

ONBOARDING_ID = "2d6f9b13-7c48-4e05-a1b7-5e3c9d0f8a26"
GLOBEX_ID = "6a0e4c1f-3b7d-4f28-9e51-c2d8a7b04e93"
ONBOARDING_CREATE = {
    "brands": [
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "markets": [{"market": "US", "languageCode": "en"}],
        },
        {
            "name": "Globex",
            "baseUrl": "https://globex.example",
            "aliases": ["Globex Corp"],
            "markets": [
                {"market": "DE", "languageCode": "de"},
                {"market": "FR", "languageCode": "fr", "name": "France"},
            ],
        },
    ]
}
ONBOARDING_ACCEPTED = {"onboardingId": ONBOARDING_ID, "status": "IN_PROGRESS", "total": 3}
ONBOARDING_ACCEPTED["retryOf"] = None
BRAND_EXISTS = {
    "code": "brandExists",
    "message": "A brand with this name already exists in the organization.",
    "retryable": False,
}
ONBOARDING_ITEMS: list[dict[str, Any]] = [
    {"index": index, "name": name, "brandId": brand, "jobId": job, "status": status}
    | {"result": result, "error": error}
    for index, name, brand, job, status, result, error in (
        (0, "Acme", BRAND_ID, JOB_ID, "COMPLETED", JOB_COMPLETED["result"], None),
        (1, "Acme", None, None, "FAILED", None, BRAND_EXISTS),
        (2, "Globex", GLOBEX_ID, "0f8b2e5d-9c16-4a73-b4e0-7d2a6c3f1e85", "IN_PROGRESS", None, None),
    )
]
ONBOARDING: dict[str, Any] = {
    "onboardingId": ONBOARDING_ID,
    "status": "IN_PROGRESS",
    "total": 3,
    "counts": {"inProgress": 1, "completed": 1, "failed": 1, "cancelled": 0},
    "createdAt": CREATED_AT,
    "updatedAt": UPDATED_AT,
    "finishedAt": None,
}
ONBOARDING.update(retryOf=None, maxFailedItems=None, cancelledBy=None)
ONBOARDING_DOCUMENT = {**ONBOARDING, "items": ONBOARDING_ITEMS, "nextCursor": None}
ONBOARDING_CANCELLED = {
    **ONBOARDING,
    "status": "CANCELLED",
    "counts": {"inProgress": 0, "completed": 1, "failed": 1, "cancelled": 1},
    "finishedAt": UPDATED_AT,
    "cancelledBy": "user",
    "items": ONBOARDING_ITEMS[:2],
    "nextCursor": None,
}

# --- Webhooks ------------------------------------------------------------------------------------

URL = "https://hooks.acme.example/serenity"
WEBHOOK: dict[str, Any] = {
    "id": "5e0a7c31-2b9d-4f68-8c14-9d3e6a2b7f05",
    "url": URL,
    "events": list(SUBSCRIBABLE_EVENT_TYPES),
    "enabled": True,
    "disabledReason": None,
    "description": "Provisioning alerts",
    "createdAt": CREATED_AT,
}
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw6xKPUL3FxfM="
DELIVERY: dict[str, Any] = {
    "id": "9a4f2d6e-1c7b-5e83-a0d9-3b6f8e2c4d17",
    "eventId": "e2b7c9d4-8f13-5a6e-b0c2-7d4a1f9e3b68",
    "type": "job.completed",
    "status": "pending",
    "attempts": 1,
    "lastStatusCode": 503,
    "lastError": "answered 503",
    "nextAttemptAt": "2026-01-15T09:30:09.123456Z",
    "createdAt": CREATED_AT,
}
TEST_DELIVERY = {
    **DELIVERY,
    "type": "webhook.test",
    "attempts": 0,
    "lastStatusCode": None,
    "lastError": None,
}
ATTEMPT = {"at": CREATED_AT, "statusCode": 503, "error": "answered 503", "durationMs": 84}
