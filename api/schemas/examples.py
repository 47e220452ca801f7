"""Example values for the OpenAPI document (SPEC §10.3): one per request body and per
response, so that Swagger UI and Redoc show what a real exchange looks like."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample

ORG_ID = "7f3c2a9e-5d41-4b8e-9a36-0c2b7e1f4d58"
BRAND_ID = "3b8e1c47-9f20-4d6a-b5e3-8a71c0d92f64"
JOB_ID = "c41d7e28-6a3f-4b19-8e05-2f9a6b3d71c0"
B = f"/v2/orgs/{ORG_ID}/brands/{BRAND_ID}"
CREATED_AT = "2026-01-15T09:30:00.123456Z"
UPDATED_AT = "2026-01-15T09:30:04.654321Z"
CURSOR = "eyJrIjoiYnJhbmRzIiwidiI6WyJBbHBoYSIsIjNiOGUiXX0:1uX9aB:q1w2e3r4t5y6u7i8o9p0"

# Messages of the error examples; codes not listed get a generic one.
ERROR_MESSAGES = {
    "invalidRequest": "market: must be two letters.",
    "authenticationRequired": "Authentication credentials were not provided or are invalid.",
    "forbidden": "You are not allowed to do this.",
    "notFound": "Organization not found.",
    "brandNotFound": "Brand not found.",
    "serenityNotActive": "Serenity is not active for this brand.",
    "jobNotFound": "Job not found.",
    "webhookNotFound": "Webhook not found.",
    "brandExists": "A brand with this name already exists in the organization.",
    "idempotencyKeyInUse": "A request with this Idempotency-Key is still being processed; "
    "retry after it finishes.",
    "idempotencyKeyReused": "This Idempotency-Key was already used with a different request body.",
    "internalServerError": "An unexpected error occurred.",
    "rateLimited": "Too many requests.",
    "onboardingLimit": "The organization may have at most 5000 onboarding items in progress; "
    "4800 are, and this onboarding adds 300.",
    "requestTooLarge": "The body is larger than 1048576 bytes.",
}


def error_example(status: int, code: str) -> OpenApiExample:
    value: dict[str, Any] = {
        "error": code,
        "message": ERROR_MESSAGES.get(code, f"The request was refused ({code})."),
    }
    if code == "invalidRequest":
        value["details"] = {"field": "market"}
    if code == "semrush_provisioning_in_progress":
        # The job already running for this brand: poll it instead of retrying.
        value["details"] = {"jobId": JOB_ID}
    return OpenApiExample(f"{status} {code}", value=value, response_only=True)


def example(name: str, value: Any, **kwargs: Any) -> OpenApiExample:
    return OpenApiExample(name, value=value, **kwargs)


def request(name: str, value: Any) -> OpenApiExample:
    return OpenApiExample(name, value=value, request_only=True)


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
}
JOB_IN_PROGRESS: dict[str, Any] = {
    "jobId": JOB_ID,
    "jobType": "provisionWorkspace",
    "status": "IN_PROGRESS",
    "result": None,
    "error": None,
    "steps": [
        {
            "step": "provisionWorkspace",
            "status": "COMPLETED",
            "startedAt": "2026-01-15T09:30:00.200000Z",
            "finishedAt": "2026-01-15T09:30:00.400000Z",
        },
        {
            "step": "provisionWorkspace",
            "status": "PENDING",
            "startedAt": None,
            "finishedAt": None,
            "runAfter": "2026-01-15T09:30:05.400000Z",
        },
    ],
    "createdAt": CREATED_AT,
    "updatedAt": UPDATED_AT,
    "finishedAt": None,
}
JOB_COMPLETED = {
    **JOB_COMPLETED_ITEM,
    "steps": [
        {
            "step": "provisionWorkspace",
            "status": "COMPLETED",
            "startedAt": "2026-01-15T09:30:00.200000Z",
            "finishedAt": "2026-01-15T09:30:00.400000Z",
        },
        {
            "step": "createMarket",
            "status": "COMPLETED",
            "startedAt": "2026-01-15T09:30:00.410000Z",
            "finishedAt": "2026-01-15T09:30:04.654321Z",
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
