"""The OpenAPI description of the onboarding routes (SPEC §11.2): one `extend_schema` per
operation. The response classes are the ones the views render with (api.onboardings)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from api.onboarding_serializers import (
    OnboardingAcceptedSerializer,
    OnboardingCreateSerializer,
    OnboardingListSerializer,
    OnboardingSerializer,
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
    accepted_headers,
    error_responses,
    ok,
    polling_header,
)
from jobs.models import JobStatus
from provisioning.models import OnboardingStatus

ONBOARDING_ID = "2d6f9b13-7c48-4e05-a1b7-5e3c9d0f8a26"
ONBOARDING_NOT_FOUND: ErrorCodes = {404: ["onboardingNotFound"]}
ACCEPTED: dict[str, Any] = {"onboardingId": ONBOARDING_ID, "status": "IN_PROGRESS", "total": 3}
COUNTS = {"inProgress": 1, "completed": 1, "failed": 1, "cancelled": 0}
ITEMS: list[dict[str, Any]] = [
    {
        "index": 0,
        "name": "Acme",
        "brandId": ex.BRAND_ID,
        "jobId": ex.JOB_ID,
        "status": "COMPLETED",
        "result": ex.JOB_COMPLETED["result"],
        "error": None,
    },
    {
        "index": 1,
        "name": "Acme",
        "brandId": None,
        "jobId": None,
        "status": "FAILED",
        "result": None,
        "error": {
            "code": "brandExists",
            "message": "A brand with this name already exists in the organization.",
            "retryable": False,
        },
    },
    {
        "index": 2,
        "name": "Globex",
        "brandId": "6a0e4c1f-3b7d-4f28-9e51-c2d8a7b04e93",
        "jobId": "0f8b2e5d-9c16-4a73-b4e0-7d2a6c3f1e85",
        "status": "IN_PROGRESS",
        "result": None,
        "error": None,
    },
]
SUMMARY: dict[str, Any] = {
    "onboardingId": ONBOARDING_ID,
    "status": "IN_PROGRESS",
    "total": 3,
    "counts": COUNTS,
    "createdAt": ex.CREATED_AT,
    "updatedAt": ex.UPDATED_AT,
    "finishedAt": None,
}
POLL_HEADER = polling_header(
    "Sent while the onboarding is `IN_PROGRESS`: seconds before polling again."
)
# An item is validated before anything is written (SPEC §11.2); its markets' slices as a market
# create's (`serenity.slices.slice_parse`). A name taken by a concurrent create at every try of
# the accept's transaction is `brandExists` for the whole request.
ACCEPT_REFUSALS: ErrorCodes = {
    400: ["unknownMarket", "unknownLanguage"],
    403: ["serenityNotEnabled"],
    409: ["brandExists"],
}
# The work one org can queue (SPEC §12.4): its open items past its cap, or too many markets.
ONBOARDING_LIMIT: ErrorCodes = {429: ["onboardingLimit"]}

ITEM_STATUS_QUERY = OpenApiParameter(
    "status",
    str,
    OpenApiParameter.QUERY,
    enum=JobStatus.values,
    description="Only items in this status (`counts` still cover every item); an unknown "
    "status → 400 `invalidRequest`.",
)
ONBOARDING_STATUS_QUERY = OpenApiParameter(
    "status",
    str,
    OpenApiParameter.QUERY,
    enum=OnboardingStatus.values,
    description="Only onboardings in this status; an unknown status → 400 `invalidRequest`.",
)

onboarding_create_schema = extend_schema(
    operation_id="onboardingCreate",
    tags=["onboardings"],
    summary="Onboard up to 1000 brands with their markets in one request (always async)",
    description="Each item is an async brand create (status `active`) with its markets: its "
    "own brand, attempt and chain (provision-workspace → create the markets). The whole body "
    "is validated before anything is written: a bad item → 400 naming "
    "`brands[i].field` in `details.field` (e.g. `brands[3].markets[0].market`); a member the "
    "body does not have (such as `async`: it is always asynchronous) → 400 `invalidRequest`. "
    "An item whose name exists in the organization or repeats an earlier item's ends "
    "`FAILED` `brandExists`, alone. An organization's items in progress are capped (5,000 "
    "unless an operator set its own cap) and one onboarding holds at most 5,000 markets in "
    "all: past either → 429 `onboardingLimit` with `Retry-After`, nothing written. Poll "
    "`Location`.",
    request=OnboardingCreateSerializer,
    examples=[
        ex.request(
            "Two brands",
            {
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
            },
        )
    ],
    parameters=[
        *WRITE_PARAMETERS,
        WWW_AUTHENTICATE,
        *accepted_headers(
            location="The onboarding's path, to poll.",
            retry_after="Seconds before the first poll.",
        ),
    ],
    responses={
        202: OpenApiResponse(
            OnboardingAcceptedSerializer,
            description="Accepted: every item's chain is started.",
            examples=[ex.example("Accepted", ACCEPTED)],
        ),
        **error_responses(ORG_CHECKS, ACCEPT_REFUSALS, ONBOARDING_LIMIT, WRITE_CHECKS),
    },
)

onboarding_get_schema = extend_schema(
    operation_id="onboardingGet",
    tags=["onboardings"],
    summary="Read an onboarding: counts over every item, and a page of its items",
    description="`counts` cover every item; `items` are paginated in `index` order. An item's "
    "`status`, `result` and `error` are its chain's, as job polling reports them. "
    "`IN_PROGRESS` until every item has ended, then `COMPLETED` (whatever the items' outcomes) "
    "or `CANCELLED` if it was cancelled.",
    parameters=[ITEM_STATUS_QUERY, *PAGE_PARAMETERS, POLL_HEADER, WWW_AUTHENTICATE],
    responses={
        200: ok(
            OnboardingSerializer,
            "The onboarding with a page of its items.",
            ex.example("In progress", {**SUMMARY, "items": ITEMS, "nextCursor": None}),
        ),
        **error_responses(ORG_CHECKS, ONBOARDING_NOT_FOUND, PAGED),
    },
)

onboarding_list_schema = extend_schema(
    operation_id="onboardingList",
    tags=["onboardings"],
    summary="List the organization's onboardings (newest first, without their items)",
    parameters=[ONBOARDING_STATUS_QUERY, *PAGE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            OnboardingListSerializer,
            "A page of onboardings.",
            ex.example("A page", {"items": [SUMMARY], "nextCursor": None}),
        ),
        **error_responses(ORG_CHECKS, PAGED),
    },
)

onboarding_cancel_schema = extend_schema(
    operation_id="onboardingCancel",
    tags=["onboardings"],
    summary="Cancel every item of an onboarding that has not ended",
    description="Each item is cancelled as the job cancel route cancels a chain; an item whose "
    "chained work is already running ends on its own. Answers the onboarding (first page). "
    "An onboarding that has ended (`COMPLETED` or `CANCELLED`) → 409 `onboardingFinished`, "
    "and nothing changes.",
    request=None,
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            OnboardingSerializer,
            "The onboarding after the cancel.",
            ex.example(
                "Cancelled",
                {
                    **SUMMARY,
                    "status": "CANCELLED",
                    "counts": {"inProgress": 0, "completed": 1, "failed": 1, "cancelled": 1},
                    "finishedAt": ex.UPDATED_AT,
                    "items": ITEMS[:2],
                    "nextCursor": None,
                },
            ),
        ),
        **error_responses(
            ORG_CHECKS, ONBOARDING_NOT_FOUND, {409: ["onboardingFinished"]}, WRITE_CHECKS
        ),
    },
)
