"""One `extend_schema` decorator per operation of SPEC §4: its request body, each success
body, the response headers and the error envelopes it can answer with."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from api.responses import (
    ActivateAnswerSerializer,
    ActivationIncompleteSerializer,
    BrandAcceptedSerializer,
    BrandCreatedSerializer,
    BrandListSerializer,
    BrandSerializer,
    DeactivateAnswerSerializer,
    JobAcceptedSerializer,
    JobListSerializer,
    LanguageListSerializer,
    MarketCreatedSerializer,
    MarketListSerializer,
    MarketSerializer,
    OrgJobListSerializer,
    PromptsAnswerSerializer,
)
from api.schemas import examples as ex
from api.schemas.parts import (
    ACCEPTED_HEADERS,
    BRAND_CHECKS,
    BRAND_STATUS_QUERY,
    GONE,
    GUARD,
    JOB_STATUS_QUERY,
    ORG_CHECKS,
    PAGE_PARAMETERS,
    PAGED,
    POLLING_HEADERS,
    PUBLISH,
    SERENITY_CHECKS,
    SETTLE,
    UPSTREAM,
    WRITE_CHECKS,
    WRITE_PARAMETERS,
    WWW_AUTHENTICATE,
    ErrorCodes,
    accepted,
    error_responses,
    ok,
)
from api.serializers import (
    ActivateSerializer,
    BrandCreateSerializer,
    BrandUpdateSerializer,
    MarketCreateSerializer,
    PromptsSerializer,
)
from jobs.models import JobType
from provisioning.serializers import JobSerializer

# --- Operations --------------------------------------------------------------------------------

brand_list_schema = extend_schema(
    operation_id="brandList",
    tags=["brands"],
    summary="List brands",
    description="By name; excludes `deleted` brands unless `status=deleted` is asked for.",
    parameters=[BRAND_STATUS_QUERY, *PAGE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            BrandListSerializer,
            "A page of brands by name, then id.",
            ex.example("A page", {"brands": [ex.BRAND], "nextCursor": ex.CURSOR}),
        ),
        **error_responses(ORG_CHECKS, PAGED),
    },
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
    examples=[
        ex.request(
            "Async create with a market",
            {
                "name": "Acme",
                "baseUrl": "https://acme.example",
                "aliases": ["ACME Corp"],
                "semrushMarket": {"market": "US", "languageCode": "en"},
                "async": True,
            },
        ),
    ],
    parameters=[*ACCEPTED_HEADERS, *WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        201: ok(
            BrandCreatedSerializer,
            "Created (and provisioned, sync).",
            ex.example("Created with a market", {**ex.BRAND, "market": ex.MARKET}),
        ),
        202: accepted(
            BrandAcceptedSerializer,
            {
                **ex.BRAND,
                "semrushSubWorkspaceId": None,
                "semrushProvisioningStatus": "pending",
                "jobId": ex.JOB_ID,
                "jobStatus": "IN_PROGRESS",
            },
        ),
        **error_responses(
            ORG_CHECKS,
            {
                400: ["baseUrlRequired", "unknownMarket", "unknownLanguage"],
                403: ["serenityNotEnabled"],
                404: ["noParentWorkspace"],
                409: ["brandExists", "sliceExists", "quotaExceeded", "ambiguousWorkspace"],
                502: ["workspaceNotEmpty"],
            },
            UPSTREAM,
            SETTLE,
            PUBLISH,
            WRITE_CHECKS,
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
    responses={
        200: ok(BrandSerializer, "The brand.", ex.example("A brand", ex.BRAND)),
        **error_responses(ORG_CHECKS, BRAND_CHECKS),
    },
)

brand_update_schema = extend_schema(
    operation_id="brandUpdate",
    tags=["brands"],
    summary="Update baseUrl, urls, aliases, serenityEnabled (no upstream call)",
    description="Changes only the fields given; `serenityEnabled: null` inherits the "
    "organization's flag. Never calls Semrush.",
    request=BrandUpdateSerializer,
    examples=[ex.request("New aliases", {"aliases": ["ACME Corp", "Acme Inc"]})],
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            BrandSerializer,
            "The updated brand.",
            ex.example("Updated", {**ex.BRAND, "aliases": ["ACME Corp", "Acme Inc"]}),
        ),
        **error_responses(ORG_CHECKS, BRAND_CHECKS, WRITE_CHECKS),
    },
)

market_list_schema = extend_schema(
    operation_id="marketList",
    tags=["markets"],
    summary="List the brand's markets",
    description="The brand's markets that are not deleted, by geoTargetId then languageCode.",
    parameters=[*PAGE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            MarketListSerializer,
            "A page of markets.",
            ex.example("The last page", {"items": [ex.MARKET], "nextCursor": None}),
        ),
        **error_responses(ORG_CHECKS, BRAND_CHECKS, SERENITY_CHECKS, PAGED),
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
    examples=[
        ex.request("Async create", {"market": "US", "languageCode": "en", "async": True}),
    ],
    parameters=[*ACCEPTED_HEADERS, *WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        201: ok(
            MarketCreatedSerializer,
            "Created and published.",
            ex.example("Created", ex.MARKET_CREATED),
        ),
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
            UPSTREAM,
            SETTLE,
            GONE,
            PUBLISH,
            WRITE_CHECKS,
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
        200: ok(MarketSerializer, "The market.", ex.example("A market", ex.MARKET)),
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
    examples=[
        ex.request(
            "Project activation",
            {
                "brandDomain": "acme.example",
                "markets": [{"market": "US", "languageCode": "en"}],
                "async": True,
            },
        ),
    ],
    parameters=[*ACCEPTED_HEADERS, *WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            ActivateAnswerSerializer,
            "Active (every market live).",
            ex.example("Project activation", ex.ACTIVATED),
        ),
        202: accepted(JobAcceptedSerializer),
        207: ok(
            ActivateAnswerSerializer,
            "B: the status write failed; C: some markets are not live.",
            ex.example("A market failed", ex.ACTIVATED_PARTLY),
        ),
        **error_responses(
            ORG_CHECKS,
            BRAND_CHECKS,
            SERENITY_CHECKS,
            {400: ["baseUrlRequired", "unknownMarket", "unknownLanguage"]},
            GUARD,
            {404: ["noParentWorkspace"], 409: ["ambiguousWorkspace", "workspaceMisconfigured"]},
            UPSTREAM,
            {504: ["subworkspaceCreationTimeout"]},
            WRITE_CHECKS,
        ),
        502: OpenApiResponse(
            ActivationIncompleteSerializer,
            description="Error envelope; `error` is one of `serenityActivationIncomplete` "
            "(with `brandId`, `status`, `markets`), `serenityUpstreamError`, "
            "`subworkspaceCreationFailed`, `subworkspaceGone`, `workspaceNotEmpty`.",
            examples=[
                ex.example("502 serenityActivationIncomplete", ex.ACTIVATION_INCOMPLETE),
                *(
                    ex.error_example(502, code)
                    for code in (
                        "serenityUpstreamError",
                        "subworkspaceCreationFailed",
                        "subworkspaceGone",
                        "workspaceNotEmpty",
                    )
                ),
            ],
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
    parameters=[*WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            DeactivateAnswerSerializer,
            "Decommissioned.",
            ex.example("Deactivated", {"brandId": ex.BRAND_ID, "status": "pending"}),
        ),
        **error_responses(
            ORG_CHECKS,
            BRAND_CHECKS,
            GUARD,
            # a flat brand's projects are in the parent; a pointer equal to the parent is refused
            {404: ["noParentWorkspace"], 409: ["workspaceMisconfigured"]},
            UPSTREAM,
            WRITE_CHECKS,
        ),
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
    examples=[
        ex.request(
            "Two prompts",
            {
                "prompts": [
                    {
                        "text": "best running shoes",
                        "geoTargetId": 2840,
                        "languageCode": "en",
                        "tags": ["shoes"],
                    },
                    {"text": "acme store near me", "geoTargetId": 2840, "languageCode": "en"},
                ]
            },
        ),
    ],
    parameters=[*ACCEPTED_HEADERS, *WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            PromptsAnswerSerializer,
            "Prompt counts.",
            ex.example("Counts", {"created": 2, "skipped": 0, "failed": 0}),
        ),
        202: accepted(JobAcceptedSerializer, {**ex.JOB_ACCEPTED, "jobType": "classifyPrompts"}),
        # A failed push is not an error here: its prompts count as `failed`. A workspace gone
        # upstream is (after the heal, whose own upstream read may fail: UPSTREAM).
        **error_responses(
            ORG_CHECKS,
            BRAND_CHECKS,
            SERENITY_CHECKS,
            UPSTREAM,
            GONE,
            WRITE_CHECKS,
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
    responses={
        200: ok(
            JobSerializer,
            "The chain's effective state.",
            ex.example("In progress (a settle read scheduled)", ex.JOB_IN_PROGRESS),
            ex.example("Completed", ex.JOB_COMPLETED),
        ),
        **error_responses(ORG_CHECKS, BRAND_CHECKS, JOB_NOT_FOUND),
    },
)

job_list_schema = extend_schema(
    operation_id="jobList",
    tags=["jobs"],
    summary="List the brand's jobs (newest first)",
    description="The ids clients hold (one per chain: the job a 202 answered with), each with "
    "the chain's effective state as polling reports it, without `steps`.",
    parameters=[JOB_STATUS_QUERY, *PAGE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            JobListSerializer,
            "A page of jobs, newest first.",
            ex.example("A page", {"items": [ex.JOB_COMPLETED_ITEM], "nextCursor": None}),
        ),
        **error_responses(ORG_CHECKS, BRAND_CHECKS, PAGED),
    },
)

job_cancel_schema = extend_schema(
    operation_id="jobCancel",
    tags=["jobs"],
    summary="Cancel an in-flight provisioning job",
    description="Cancels a provisioning chain that has not finished → 200 with the job's new "
    "state. A finished job → 409 `jobFinished`; a running chained step or a `classifyPrompts` "
    "job → 409 `jobNotCancellable`.",
    request=None,
    parameters=[*POLLING_HEADERS, *WRITE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(JobSerializer, "The job's new state.", ex.example("Cancelled", ex.JOB_CANCELLED)),
        **error_responses(
            ORG_CHECKS,
            BRAND_CHECKS,
            JOB_NOT_FOUND,
            {409: ["jobFinished", "jobNotCancellable"]},
            WRITE_CHECKS,
        ),
    },
)

ORG_JOB_QUERY = [
    JOB_STATUS_QUERY,
    OpenApiParameter(
        "brandId",
        {"type": "string", "format": "uuid"},
        OpenApiParameter.QUERY,
        description="Only this brand's jobs; not a UUID → 400 `invalidRequest`.",
    ),
    OpenApiParameter(
        "jobType",
        str,
        OpenApiParameter.QUERY,
        enum=JobType.values,
        description="Only jobs of this type; an unknown type → 400 `invalidRequest`.",
    ),
    OpenApiParameter(
        "createdAfter",
        {"type": "string", "format": "date-time"},
        OpenApiParameter.QUERY,
        description="Only jobs created after this instant (ISO 8601).",
    ),
]

org_job_list_schema = extend_schema(
    operation_id="orgJobList",
    tags=["jobs"],
    summary="List the organization's jobs across its brands (newest first)",
    description="The ids clients hold (one per chain), each with the chain's effective state "
    "as polling reports it, without `steps`, with its `brandId`. Filters combine.",
    parameters=[*ORG_JOB_QUERY, *PAGE_PARAMETERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            OrgJobListSerializer,
            "A page of jobs, newest first.",
            ex.example(
                "A page",
                {"items": [{**ex.JOB_COMPLETED_ITEM, "brandId": ex.BRAND_ID}], "nextCursor": None},
            ),
        ),
        **error_responses(ORG_CHECKS, PAGED),
    },
)

org_job_get_schema = extend_schema(
    operation_id="orgJobGet",
    tags=["jobs"],
    summary="Poll any job of the organization, without knowing its brand",
    description="The same document as the brand's job route. An unknown job, or a job of "
    "another organization → 404 `jobNotFound`.",
    parameters=[*POLLING_HEADERS, WWW_AUTHENTICATE],
    responses={
        200: ok(
            JobSerializer,
            "The chain's effective state.",
            ex.example("Completed", ex.JOB_COMPLETED),
        ),
        **error_responses(ORG_CHECKS, JOB_NOT_FOUND),
    },
)

language_list_schema = extend_schema(
    operation_id="languageList",
    tags=["languages"],
    summary="The upstream language catalogue (cached)",
    description="The languages Semrush accepts for markets, from a cached catalogue.",
    parameters=[WWW_AUTHENTICATE],
    responses={
        200: ok(
            LanguageListSerializer,
            "The catalogue.",
            ex.example(
                "Languages", {"items": [{"id": "1", "code": "en"}, {"id": "7", "code": "de"}]}
            ),
        ),
        **error_responses(ORG_CHECKS, UPSTREAM),
    },
)
