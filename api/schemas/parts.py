"""The building blocks of the operations' schemas (api.schemas.operations): the error
responses each group of checks can answer with, the request and response headers, and the
paging and filter parameters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from api.responses import ErrorEnvelopeSerializer
from api.schemas import examples as ex
from jobs.models import JobStatus
from serenity.models import BrandStatus

# --- Error responses ---------------------------------------------------------------------------

ErrorCodes = Mapping[int, Sequence[str]]

# SPEC §4's checks, in the order they run, for every `/v2/orgs/{orgId}/…` route; 406 for an
# `Accept` header that JSON does not satisfy (DRF's content negotiation, before anything else);
# 413 for a body (chunked or not) larger than SERENITY_MAX_BODY_BYTES, on any method
# (kernel.request_limits); and 429 for an address over its failed-authentication limit (a wrong
# token: api.throttling), which every route authenticates, and for a token over its write
# rate on the mutating ones.
ORG_CHECKS: ErrorCodes = {
    400: ["invalidRequest"],
    401: ["authenticationRequired"],
    403: ["forbidden"],
    404: ["notFound"],
    406: ["notAcceptable"],
    413: ["requestTooLarge"],
    429: ["rateLimited"],
    500: ["internalServerError"],
}
BRAND_CHECKS: ErrorCodes = {404: ["brandNotFound"]}
SERENITY_CHECKS: ErrorCodes = {404: ["serenityNotActive"]}
UPSTREAM: ErrorCodes = {
    401: ["upstreamUnauthorized"],
    403: ["upstreamForbidden"],
    502: ["serenityUpstreamError"],
    503: ["configurationError", "upstreamBusy"],
}
SETTLE: ErrorCodes = {502: ["subworkspaceCreationFailed"], 504: ["subworkspaceCreationTimeout"]}
# The brand's own workspace was deleted outside this service (SPEC §10.2).
GONE: ErrorCodes = {502: ["subworkspaceGone"]}
# Semrush accepted a publish but could not make the project live (SPEC §12.1).
PUBLISH: ErrorCodes = {502: ["publishFailed"]}
GUARD: ErrorCodes = {409: ["semrush_provisioning_in_progress"]}
# Every POST and PATCH under /v2: its body must be JSON (SPEC §10.2; also on the routes that
# take no fields) and its `Idempotency-Key` is honoured (SPEC §10.3).
WRITE_CHECKS: ErrorCodes = {
    409: ["idempotencyKeyInUse"],
    415: ["unsupportedMediaType"],
    422: ["idempotencyKeyReused"],
}
PAGED: ErrorCodes = {400: ["invalidRequest"]}


def error_responses(*code_sets: ErrorCodes) -> dict[int, OpenApiResponse]:
    """One error-envelope response per status, listing the `error` codes it can carry."""
    merged: dict[int, list[str]] = {}
    for codes in code_sets:
        for status, names in codes.items():
            listed = merged.setdefault(status, [])
            listed.extend(name for name in names if name not in listed)
    return {
        status: OpenApiResponse(
            ErrorEnvelopeSerializer,
            description="Error envelope; `error` is one of "
            + ", ".join(f"`{name}`" for name in names)
            + ".",
            examples=[ex.error_example(status, name) for name in names],
        )
        for status, names in sorted(merged.items())
    }


def ok(
    serializer: type[serializers.Serializer] | None, description: str, *examples: ex.OpenApiExample
) -> OpenApiResponse:
    """A success response with its examples."""
    return OpenApiResponse(serializer, description=description, examples=list(examples))


# --- Response headers ---------------------------------------------------------------------------

WWW_AUTHENTICATE = OpenApiParameter(
    "WWW-Authenticate",
    str,
    OpenApiParameter.HEADER,
    response=[401],
    description="`Bearer` on `authenticationRequired`.",
)
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7E]+$"},
    OpenApiParameter.HEADER,
    description="Optional; 1 to 255 printable ASCII characters, scoped to (caller, org, method, "
    "path). The first answer is stored for a day: a repeat with the same body replays it "
    "(`Idempotent-Replayed: true`; an async create replays the same `jobId`), another body → "
    "422 `idempotencyKeyReused`, a repeat while the first is running → 409 "
    "`idempotencyKeyInUse` (retry later). A 5xx is not stored.",
)
IDEMPOTENT_REPLAYED = OpenApiParameter(
    "Idempotent-Replayed",
    {"type": "string", "enum": ["true"]},
    OpenApiParameter.HEADER,
    response=True,
    description="`true` when this answer is the stored answer to an earlier request with the "
    "same `Idempotency-Key`.",
)
WRITE_PARAMETERS = [IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED]

PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {
            "type": "integer",
            "minimum": 1,
            "maximum": settings.SERENITY_PAGE_SIZE_MAX,
            "default": settings.SERENITY_PAGE_SIZE_DEFAULT,
        },
        OpenApiParameter.QUERY,
        description="Page size; out of range → 400 `invalidRequest`.",
    ),
    OpenApiParameter(
        "cursor",
        {"type": "string", "maxLength": 1000},
        OpenApiParameter.QUERY,
        description="The `nextCursor` of the previous page (opaque); a cursor of another list "
        "or a forged one → 400 `invalidRequest`.",
    ),
]


def accepted_headers(*, location: str, retry_after: str) -> list[OpenApiParameter]:
    """The headers of a 202: where to poll, and when."""
    return [
        OpenApiParameter(
            "Location",
            str,
            OpenApiParameter.HEADER,
            response=[202],
            required=True,
            description=location,
        ),
        OpenApiParameter(
            "Retry-After",
            int,
            OpenApiParameter.HEADER,
            response=[202],
            required=True,
            description=retry_after,
        ),
    ]


def polling_header(description: str) -> OpenApiParameter:
    """`Retry-After` on a 200 of something still in progress."""
    return OpenApiParameter(
        "Retry-After", int, OpenApiParameter.HEADER, response=[200], description=description
    )


ACCEPTED_HEADERS = accepted_headers(
    location="The path of `B/serenity/jobs/{jobId}` to poll.",
    retry_after="Whole seconds (1 to 60) until the chain's next scheduled step.",
)
POLLING_HEADERS = [
    polling_header(
        "Sent while the job is `IN_PROGRESS`: whole seconds (1 to 60) until the chain's next "
        "scheduled step (a `PENDING` step's `runAfter`)."
    )
]

BRAND_STATUS_QUERY = OpenApiParameter(
    "status",
    str,
    OpenApiParameter.QUERY,
    enum=BrandStatus.values,
    description="Only brands in this status (default: every status but `deleted`); "
    "an unknown status → 400 `invalidRequest`.",
)


def accepted(
    serializer: type[serializers.Serializer], value: Mapping[str, Any] = ex.JOB_ACCEPTED
) -> OpenApiResponse:
    return OpenApiResponse(
        serializer,
        description="`async: true`: the job was started; poll `Location`.",
        examples=[ex.example("Accepted", value)],
    )


JOB_STATUS_QUERY = OpenApiParameter(
    "status",
    str,
    OpenApiParameter.QUERY,
    enum=JobStatus.values,
    description="Only chains in this effective status; an unknown status → 400 `invalidRequest`.",
)
