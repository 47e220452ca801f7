"""The OpenAPI 3 description of the HTTP API (SPEC §4), for drf-spectacular.

The views render plain dicts built by `payloads.py`, `jobs.selectors.chain_payload` and the
orchestration outcomes, so the response serializers below are documentation only: nothing
validates or renders with them. Keep them in step with those builders (the OpenAPI test checks
the routes, not every field).

Each `*_schema` decorator describes one operation: its request body, each success body and the
error envelopes it can answer with. `postprocess_schema` (a `POSTPROCESSING_HOOKS` entry) names
the path parameters as SPEC §4 does (`{orgId}`, not the URLconf's `{org_id}`) and documents the
plain Django health views, which drf-spectacular cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import build_basic_type, get_lib_doc_excludes
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from jobs.models import JobStatus, JobStep, JobType
from serenity.api.base import OrgScopedView
from serenity.api.fields import BodyObjectSerializer
from serenity.api.serializers import (
    ActivateSerializer,
    BrandCreateSerializer,
    BrandUpdateSerializer,
    MarketCreateSerializer,
    PromptsSerializer,
)
from serenity.models import BrandStatus, MarketStatus

# --- Extensions ------------------------------------------------------------------------------


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "serenity.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from `create_api_token`: `Authorization: Bearer <token>`.",
        }


class StrictBooleanFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "serenity.api.fields.StrictBooleanField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            **(build_basic_type(OpenApiTypes.BOOL) or {"type": "boolean"}),
            "description": "JSON `true` or `false` only: a string, number or null is "
            "400 `invalidRequest`.",
        }


def doc_excludes() -> list[type]:
    """`GET_LIB_DOC_EXCLUDES`: drf-spectacular turns class docstrings into descriptions, and
    stops at these bases. Theirs describe our internals (check order, DRF quirks), not the API."""
    return [*get_lib_doc_excludes(), OrgScopedView, BodyObjectSerializer]


# --- Response bodies (documentation only) ----------------------------------------------------


class ErrorEnvelopeSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A stable machine code, e.g. `brandNotFound`.")
    message = serializers.CharField(
        help_text="One line, at most 500 characters; never upstream text, URLs or ids."
    )
    details = serializers.DictField(
        required=False, help_text="Optional; e.g. `{field}` for `invalidRequest`."
    )


class ProvisioningErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class BrandSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    organizationId = serializers.UUIDField()  # noqa: N815
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=BrandStatus.choices)
    baseUrl = serializers.URLField(allow_null=True)  # noqa: N815
    urls = serializers.ListField(child=serializers.URLField())
    aliases = serializers.ListField(child=serializers.CharField())
    serenityEnabled = serializers.BooleanField(  # noqa: N815
        allow_null=True, help_text="The brand's override; null inherits the organization's flag."
    )
    semrushSubWorkspaceId = serializers.CharField(allow_null=True)  # noqa: N815
    semrushProvisioningStatus = serializers.ChoiceField(  # noqa: N815
        choices=["pending", "failed", "ready"],
        allow_null=True,
        help_text="null: never provisioned, or deactivated.",
    )
    semrushProvisioningError = ProvisioningErrorSerializer(  # noqa: N815
        allow_null=True, help_text="Set only when semrushProvisioningStatus is `failed`."
    )
    createdAt = serializers.DateTimeField()  # noqa: N815
    updatedAt = serializers.DateTimeField()  # noqa: N815


class BrandListSerializer(serializers.Serializer):
    brands = BrandSerializer(many=True)


class MarketSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    market = serializers.CharField(allow_null=True, help_text="ISO 3166-1 alpha-2, upper case.")
    geoTargetId = serializers.IntegerField(help_text="2000 + ISO numeric, e.g. 2840.")  # noqa: N815
    languageCode = serializers.CharField()  # noqa: N815
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=MarketStatus.choices)
    semrushProjectId = serializers.CharField(allow_null=True)  # noqa: N815
    workspaceId = serializers.CharField(allow_null=True)  # noqa: N815
    createdAt = serializers.DateTimeField()  # noqa: N815
    updatedAt = serializers.DateTimeField()  # noqa: N815


class MarketListSerializer(serializers.Serializer):
    items = MarketSerializer(many=True)


class BrandCreatedSerializer(BrandSerializer):
    market = MarketSerializer(
        required=False, help_text="Present when the request carried `semrushMarket`."
    )


class BrandAcceptedSerializer(BrandSerializer):
    jobId = serializers.UUIDField()  # noqa: N815
    jobStatus = serializers.ChoiceField(  # noqa: N815
        choices=JobStatus.choices, help_text="Always `IN_PROGRESS`."
    )


class MarketCreatedSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    geoTargetId = serializers.IntegerField()  # noqa: N815
    languageCode = serializers.CharField()  # noqa: N815
    workspaceId = serializers.CharField()  # noqa: N815
    projectId = serializers.CharField()  # noqa: N815
    published = serializers.BooleanField()


class JobAcceptedSerializer(serializers.Serializer):
    jobId = serializers.UUIDField()  # noqa: N815
    jobType = serializers.ChoiceField(choices=JobType.choices)  # noqa: N815
    status = serializers.ChoiceField(choices=JobStatus.choices, help_text="Always `IN_PROGRESS`.")


class ActivatedMarketSerializer(serializers.Serializer):
    market = serializers.CharField(help_text="ISO 3166-1 alpha-2, upper case.")
    languageCode = serializers.CharField()  # noqa: N815
    status = serializers.IntegerField(
        help_text="This market's own HTTP-like status: 201 created, 409 already live, 4xx/5xx."
    )
    body = serializers.DictField(help_text="What a market create would have answered.")


class ActivateAnswerSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    status = serializers.ChoiceField(choices=[BrandStatus.ACTIVE, BrandStatus.PENDING])
    baseUrl = serializers.URLField(  # noqa: N815
        required=False, allow_null=True, help_text="Project activation (branch C) only."
    )
    markets = ActivatedMarketSerializer(
        many=True, help_text="Empty for branches A and B; one entry per market for branch C."
    )


class ActivationIncompleteSerializer(ErrorEnvelopeSerializer):
    """502 on activate: the error envelope, plus the brand fields for
    `serenityActivationIncomplete` (the workspace exists but the status write failed)."""

    brandId = serializers.UUIDField(required=False)  # noqa: N815
    status = serializers.ChoiceField(
        choices=[BrandStatus.ACTIVE, BrandStatus.PENDING], required=False
    )
    markets = ActivatedMarketSerializer(many=True, required=False)


class DeactivateAnswerSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    status = serializers.ChoiceField(
        choices=[BrandStatus.ACTIVE, BrandStatus.PENDING], help_text="Always `pending`."
    )


class JobResultSerializer(serializers.Serializer):
    status = serializers.IntegerField(help_text="The HTTP status the sync path would answer.")
    body = serializers.DictField(help_text="The body the sync path would answer.")
    outcome = serializers.ChoiceField(choices=["succeeded", "partial", "failed"])


class JobErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField(help_text="Generic for upstream failures.")
    retryable = serializers.BooleanField()


class JobStepSerializer(serializers.Serializer):
    step = serializers.ChoiceField(choices=JobStep.choices)
    status = serializers.ChoiceField(choices=["PENDING", *JobStatus.values])
    startedAt = serializers.DateTimeField(allow_null=True)  # noqa: N815
    finishedAt = serializers.DateTimeField(allow_null=True)  # noqa: N815


class JobSerializer(serializers.Serializer):
    jobId = serializers.UUIDField(help_text="Always the id that was asked for.")  # noqa: N815
    jobType = serializers.ChoiceField(choices=JobType.choices)  # noqa: N815
    status = serializers.ChoiceField(
        choices=JobStatus.choices, help_text="The effective status of the whole chain."
    )
    result = JobResultSerializer(allow_null=True, help_text="Non-null only when `COMPLETED`.")
    error = JobErrorSerializer(
        allow_null=True, help_text="Non-null only when `FAILED` or `CANCELLED`."
    )
    steps = JobStepSerializer(many=True)
    createdAt = serializers.DateTimeField()  # noqa: N815
    updatedAt = serializers.DateTimeField()  # noqa: N815


class LanguageSerializer(serializers.Serializer):
    id = serializers.CharField()
    code = serializers.CharField()


class LanguageListSerializer(serializers.Serializer):
    items = LanguageSerializer(many=True)


class PromptsAnswerSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    skipped = serializers.IntegerField()
    failed = serializers.IntegerField()


# --- Error responses ---------------------------------------------------------------------------

ErrorCodes = Mapping[int, Sequence[str]]

# SPEC §4's checks, in the order they run, for every `/v2/orgs/{orgId}/…` route.
ORG_CHECKS: ErrorCodes = {
    400: ["invalidRequest"],
    401: ["authenticationRequired"],
    403: ["forbidden"],
    404: ["notFound"],
    500: ["internalServerError"],
}
BRAND_CHECKS: ErrorCodes = {404: ["brandNotFound"]}
SERENITY_CHECKS: ErrorCodes = {404: ["serenityNotActive"]}
JSON_BODY: ErrorCodes = {415: ["unsupportedMediaType"]}
UPSTREAM: ErrorCodes = {
    401: ["upstreamUnauthorized"],
    403: ["upstreamForbidden"],
    502: ["serenityUpstreamError"],
    503: ["configurationError"],
}
SETTLE: ErrorCodes = {502: ["subworkspaceCreationFailed"], 504: ["subworkspaceCreationTimeout"]}
GUARD: ErrorCodes = {409: ["semrush_provisioning_in_progress"]}


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
        )
        for status, names in sorted(merged.items())
    }


# --- Response headers ---------------------------------------------------------------------------

WWW_AUTHENTICATE = OpenApiParameter(
    "WWW-Authenticate",
    str,
    OpenApiParameter.HEADER,
    response=[401],
    description="`Bearer` on `authenticationRequired`.",
)
ACCEPTED_HEADERS = [
    OpenApiParameter(
        "Location",
        str,
        OpenApiParameter.HEADER,
        response=[202],
        required=True,
        description="The path of `B/serenity/jobs/{jobId}` to poll.",
    ),
    OpenApiParameter(
        "Retry-After",
        int,
        OpenApiParameter.HEADER,
        response=[202],
        required=True,
        description="Whole seconds (at least 1) to wait before polling.",
    ),
]
POLLING_HEADERS = [
    OpenApiParameter(
        "Retry-After",
        int,
        OpenApiParameter.HEADER,
        response=[200],
        description="Sent while the job is `IN_PROGRESS`: whole seconds before polling again.",
    ),
]

BRAND_STATUS_QUERY = OpenApiParameter(
    "status",
    str,
    OpenApiParameter.QUERY,
    enum=BrandStatus.values,
    description="Only brands in this status (default: every status but `deleted`); "
    "an unknown status → 400 `invalidRequest`.",
)


def accepted(serializer: type[serializers.Serializer]) -> OpenApiResponse:
    return OpenApiResponse(
        serializer, description="`async: true`: the job was started; poll `Location`."
    )


# --- Operations --------------------------------------------------------------------------------

brand_list_schema = extend_schema(
    operation_id="brandList",
    tags=["brands"],
    summary="List brands",
    description="By name; excludes `deleted` brands unless `status=deleted` is asked for.",
    parameters=[BRAND_STATUS_QUERY, WWW_AUTHENTICATE],
    responses={200: BrandListSerializer, **error_responses(ORG_CHECKS)},
)

brand_create_schema = extend_schema(
    operation_id="brandCreate",
    tags=["brands"],
    summary="Create a brand (optionally with an initial market), sync or async",
    description="The stored status is `active` when `baseUrl` is given, else `pending`; "
    '`"status": "pending"` makes a draft (no provisioning; `async` ignored). In a Serenity '
    "org the brand's sub-workspace is created or adopted and, with `semrushMarket`, that "
    "market's project is created and published (201 with `market`); elsewhere a plain row "
    "is created (`semrushMarket` → 403 `serenityNotEnabled`). `async: true` → 202 with the "
    "brand payload plus `jobId` and `jobStatus`.",
    request=BrandCreateSerializer,
    parameters=[*ACCEPTED_HEADERS, WWW_AUTHENTICATE],
    responses={
        201: OpenApiResponse(
            BrandCreatedSerializer, description="Created (and provisioned, sync)."
        ),
        202: accepted(BrandAcceptedSerializer),
        **error_responses(
            ORG_CHECKS,
            {
                400: ["baseUrlRequired", "unknownMarket", "unknownLanguage"],
                403: ["serenityNotEnabled"],
                404: ["noParentWorkspace"],
                409: ["brandExists", "sliceExists", "quotaExceeded", "ambiguousWorkspace"],
                502: ["workspaceNotEmpty"],
            },
            JSON_BODY,
            UPSTREAM,
            SETTLE,
        ),
    },
)

brand_get_schema = extend_schema(
    operation_id="brandGet",
    tags=["brands"],
    summary="Read a brand",
    description="The brand payload, with `semrushProvisioningStatus` and "
    "`semrushProvisioningError` so a client can tell when a workspace is being provisioned.",
    parameters=[WWW_AUTHENTICATE],
    responses={200: BrandSerializer, **error_responses(ORG_CHECKS, BRAND_CHECKS)},
)

brand_update_schema = extend_schema(
    operation_id="brandUpdate",
    tags=["brands"],
    summary="Update baseUrl, urls, aliases, serenityEnabled (no upstream call)",
    description="Changes only the fields given; `serenityEnabled: null` inherits the "
    "organization's flag. Never calls Semrush.",
    request=BrandUpdateSerializer,
    parameters=[WWW_AUTHENTICATE],
    responses={200: BrandSerializer, **error_responses(ORG_CHECKS, BRAND_CHECKS, JSON_BODY)},
)

market_list_schema = extend_schema(
    operation_id="marketList",
    tags=["markets"],
    summary="List the brand's markets",
    description="The brand's markets that are not deleted.",
    parameters=[WWW_AUTHENTICATE],
    responses={
        200: MarketListSerializer,
        **error_responses(ORG_CHECKS, BRAND_CHECKS, SERENITY_CHECKS),
    },
)

market_create_schema = extend_schema(
    operation_id="marketCreate",
    tags=["markets"],
    summary="Create a market, sync or async",
    description="Creates (or resumes a draft of) the slice's project, sets its tracked URL "
    "and publishes it: in the brand's sub-workspace, or in the organization's parent for a "
    "flat brand. `brandNames` defaults to the brand's name and aliases, `brandDomain` to the "
    "host of `baseUrl`. `async: true` → 202 `{jobId, jobType, status}`.",
    request=MarketCreateSerializer,
    parameters=[*ACCEPTED_HEADERS, WWW_AUTHENTICATE],
    responses={
        201: OpenApiResponse(MarketCreatedSerializer, description="Created and published."),
        202: accepted(JobAcceptedSerializer),
        **error_responses(
            ORG_CHECKS,
            BRAND_CHECKS,
            SERENITY_CHECKS,
            {
                400: ["unknownMarket", "unknownLanguage"],
                404: ["noParentWorkspace"],
                409: [
                    "sliceExists",
                    "workspaceMisconfigured",
                    "semrush_provisioning_incomplete",
                    "quotaExceeded",
                ],
            },
            GUARD,
            JSON_BODY,
            UPSTREAM,
            SETTLE,
        ),
    },
)

market_get_schema = extend_schema(
    operation_id="marketGet",
    tags=["markets"],
    summary="Read one market",
    description="One market by slice; none → 404 `marketNotFound`.",
    parameters=[WWW_AUTHENTICATE],
    responses={
        200: MarketSerializer,
        **error_responses(ORG_CHECKS, BRAND_CHECKS, SERENITY_CHECKS, {404: ["marketNotFound"]}),
    },
)

market_delete_schema = extend_schema(
    operation_id="marketDelete",
    tags=["markets"],
    summary="Delete a market (idempotent)",
    description="Deletes the upstream project (an upstream 404 counts as done), then "
    "tombstones the market; no market → 204. Any other upstream failure → 502 and the market "
    "is kept; a market still being created → 409 `marketBusy`.",
    parameters=[WWW_AUTHENTICATE],
    responses={
        204: OpenApiResponse(description="Deleted, or there was no such market."),
        **error_responses(
            ORG_CHECKS, BRAND_CHECKS, SERENITY_CHECKS, {409: ["marketBusy"]}, UPSTREAM
        ),
    },
)

activate_schema = extend_schema(
    operation_id="brandActivate",
    tags=["activation"],
    summary="Activate a brand or its markets, sync or async",
    description="The branch comes from the stored brand: A `pending` → `active`; B bare "
    "re-activation (`active`, no `brandDomain`); C project activation (`active` with "
    "`brandDomain`). An empty or absent body is valid.",
    request=ActivateSerializer,
    parameters=[*ACCEPTED_HEADERS, WWW_AUTHENTICATE],
    responses={
        200: OpenApiResponse(ActivateAnswerSerializer, description="Active (every market live)."),
        202: accepted(JobAcceptedSerializer),
        207: OpenApiResponse(
            ActivateAnswerSerializer,
            description="B: the status write failed; C: some markets are not live.",
        ),
        **error_responses(
            ORG_CHECKS,
            BRAND_CHECKS,
            SERENITY_CHECKS,
            {400: ["baseUrlRequired", "unknownMarket", "unknownLanguage"]},
            GUARD,
            {409: ["ambiguousWorkspace"]},
            JSON_BODY,
            UPSTREAM,
            {504: ["subworkspaceCreationTimeout"]},
        ),
        502: OpenApiResponse(
            ActivationIncompleteSerializer,
            description="Error envelope; `error` is one of `serenityActivationIncomplete` "
            "(with `brandId`, `status`, `markets`), `serenityUpstreamError`, "
            "`subworkspaceCreationFailed`, `workspaceNotEmpty`.",
        ),
    },
)

deactivate_schema = extend_schema(
    operation_id="brandDeactivate",
    tags=["activation"],
    summary="Decommission the brand's Semrush objects",
    description="Cancels the brand's pending provisioning work, deletes every project in its "
    "sub-workspace (never the workspace itself), clears the pointer, tombstones the markets "
    "and sets the brand `pending`. A failure → 502 with the pointer and status untouched.",
    request=None,
    parameters=[WWW_AUTHENTICATE],
    responses={
        200: DeactivateAnswerSerializer,
        **error_responses(ORG_CHECKS, BRAND_CHECKS, GUARD, UPSTREAM),
    },
)

prompts_create_schema = extend_schema(
    operation_id="promptsCreate",
    tags=["prompts"],
    summary="Add prompts to the brand's markets, sync or async",
    description="1 to 500 prompts, each naming a market of the brand whose project exists; "
    "duplicates (same market, same text trimmed and case-folded) are skipped. Sync → 200 "
    "counts; `async: true` → 202, a `classifyPrompts` job whose result is the same counts.",
    request=PromptsSerializer,
    parameters=[*ACCEPTED_HEADERS, WWW_AUTHENTICATE],
    responses={
        200: OpenApiResponse(PromptsAnswerSerializer, description="Prompt counts."),
        202: accepted(JobAcceptedSerializer),
        # Upstream failures are not errors here: their prompts count as `failed`.
        **error_responses(
            ORG_CHECKS, BRAND_CHECKS, SERENITY_CHECKS, JSON_BODY, {503: ["configurationError"]}
        ),
    },
)

JOB_NOT_FOUND: ErrorCodes = {404: ["jobNotFound"]}

job_get_schema = extend_schema(
    operation_id="jobGet",
    tags=["jobs"],
    summary="Poll a job of this brand (the effective state of its chain)",
    description="`IN_PROGRESS` until the chain's last step has finished, then that step's "
    "`status`, `result` and `error`. An unknown job, or a job of another brand → 404 "
    "`jobNotFound`.",
    parameters=[*POLLING_HEADERS, WWW_AUTHENTICATE],
    responses={200: JobSerializer, **error_responses(ORG_CHECKS, BRAND_CHECKS, JOB_NOT_FOUND)},
)

job_cancel_schema = extend_schema(
    operation_id="jobCancel",
    tags=["jobs"],
    summary="Cancel an in-flight provisioning job",
    description="Cancels a provisioning chain that has not finished → 200 with the job's new "
    "state. A finished job → 409 `jobFinished`; a running chained step or a `classifyPrompts` "
    "job → 409 `jobNotCancellable`.",
    request=None,
    parameters=[*POLLING_HEADERS, WWW_AUTHENTICATE],
    responses={
        200: OpenApiResponse(JobSerializer, description="The job's new state."),
        **error_responses(
            ORG_CHECKS, BRAND_CHECKS, JOB_NOT_FOUND, {409: ["jobFinished", "jobNotCancellable"]}
        ),
    },
)

language_list_schema = extend_schema(
    operation_id="languageList",
    tags=["languages"],
    summary="The upstream language catalogue (cached)",
    description="The languages Semrush accepts for markets, from a cached catalogue.",
    parameters=[WWW_AUTHENTICATE],
    responses={200: LanguageListSerializer, **error_responses(ORG_CHECKS, UPSTREAM)},
)


# --- Post-processing ----------------------------------------------------------------------------

# URLconf kwarg → (SPEC §4 name, schema, description). Ids are validated after authentication,
# so a malformed one answers 400 `invalidRequest`, not 404.
PATH_PARAMETERS: dict[str, tuple[str, dict[str, Any], str]] = {
    "org_id": ("orgId", {"type": "string", "format": "uuid"}, "The organization's id."),
    "brand_id": ("brandId", {"type": "string", "format": "uuid"}, "The brand's id."),
    "job_id": ("jobId", {"type": "string", "format": "uuid"}, "The job's id."),
    "geo_target_id": (
        "geoTargetId",
        {"type": "string", "pattern": "^[0-9]+$"},
        "2000 + the ISO 3166-1 numeric country code, e.g. `2840` (US).",
    ),
    "language_code": ("languageCode", {"type": "string"}, "A language code, e.g. `en`."),
}

# One handler serves both job paths; operationIds must be unique per path.
PROMPT_JOB_PATH = "/v2/orgs/{orgId}/brands/{brandId}/serenity/prompts/jobs/{jobId}"
PROMPT_JOB_OPERATION = {
    "operationId": "promptJobGet",
    "summary": "Poll a job of this brand (the older path of prompt jobs)",
}


def _health_operation(
    operation_id: str, summary: str, responses: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    return {
        "get": {
            "operationId": operation_id,
            "tags": ["operations"],
            "summary": summary,
            "security": [],  # no token needed
            "responses": responses,
        }
    }


def _json_response(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_REACHABILITY = {"type": "string", "enum": ["ok", "unreachable"]}
_READINESS = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["ok", "unavailable"]},
        "checks": {
            "type": "object",
            "properties": {"database": _REACHABILITY, "broker": _REACHABILITY},
        },
    },
    "required": ["status", "checks"],
}
_LIVENESS = {
    "type": "object",
    "properties": {"status": {"type": "string", "enum": ["ok"]}},
    "required": ["status"],
}

HEALTH_PATHS: dict[str, dict[str, Any]] = {
    "/healthz": _health_operation(
        "healthz", "Liveness", {"200": _json_response("The process answers.", _LIVENESS)}
    ),
    "/readyz": _health_operation(
        "readyz",
        "Readiness: database and broker reachable",
        {
            "200": _json_response("Ready.", _READINESS),
            "503": _json_response("The database or the broker is unreachable.", _READINESS),
        },
    ),
    "/metrics": _health_operation(
        "metrics",
        "Prometheus metrics",
        {
            "200": {
                "description": "Prometheus text exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
    ),
}


def _rename_path(path: str) -> str:
    for kwarg, (name, _, _) in PATH_PARAMETERS.items():
        path = path.replace(f"{{{kwarg}}}", f"{{{name}}}")
    return path


def _rename_parameters(operation: dict[str, Any], path: str) -> None:
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        if parameter.get("in") == "path" and parameter["name"] in PATH_PARAMETERS:
            name, schema, description = PATH_PARAMETERS[parameter["name"]]
            parameter.update(name=name, schema=dict(schema), description=description)
    # Path parameters in the order they appear in the path (spectacular sorts them by name).
    parameters.sort(
        key=lambda p: path.find(f"{{{p['name']}}}") if p.get("in") == "path" else len(path)
    )


def postprocess_schema(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """SPEC §4's path parameter names, unique operationIds, and the health views."""
    paths: dict[str, Any] = {}
    for path, item in result.get("paths", {}).items():
        renamed = _rename_path(path)
        for operation in item.values():
            if isinstance(operation, dict):
                _rename_parameters(operation, renamed)
        if renamed == PROMPT_JOB_PATH:
            item["get"].update(PROMPT_JOB_OPERATION)
        paths[renamed] = item
    paths.update(HEALTH_PATHS)
    result["paths"] = paths
    return result
