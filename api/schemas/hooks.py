"""drf-spectacular settings hooks: `GET_LIB_DOC_EXCLUDES` and the `POSTPROCESSING_HOOKS`
entry that names the path parameters as SPEC §4 does (`{orgId}`, not the URLconf's `{org_id}`),
keeps operationIds unique and documents the plain Django health views, which drf-spectacular
cannot see."""

from __future__ import annotations

from typing import Any

from drf_spectacular.plumbing import get_lib_doc_excludes

from api.errors import AuthenticationRequiredError
from api.fields import BodyObjectSerializer
from kernel.errors import DomainError, ForbiddenError
from kernel.pagination import CURSOR_PATTERN
from serenity.selectors import GEO_TARGET_ID_PATTERN
from serenity.slices import LANGUAGE_CODE_PATTERN


def doc_excludes() -> list[type]:
    """`GET_LIB_DOC_EXCLUDES`: drf-spectacular turns class docstrings into descriptions, and
    stops at these bases. Theirs describe our internals (DRF quirks), not the API. (An
    operation's description is its route's, never a view's docstring: api.schemas.routes.)"""
    return [*get_lib_doc_excludes(), BodyObjectSerializer]


# --- Post-processing ----------------------------------------------------------------------------

# URLconf kwarg → (SPEC §4 name, schema, description). Ids are validated after authentication,
# so a malformed one answers 400 `invalidRequest`, not 404.
UUID = {"type": "string", "format": "uuid"}
PATH_PARAMETERS: dict[str, tuple[str, dict[str, Any], str]] = {
    **{
        f"{entity}_id": (f"{entity}Id", UUID, f"The {noun}'s id.")
        for entity, noun in (
            ("org", "organization"),
            ("brand", "brand"),
            ("job", "job"),
            ("webhook", "webhook"),
            ("delivery", "delivery"),
            ("reconciliation", "reconciliation"),
        )
    },
    "onboarding_id": ("onboardingId", UUID, "The onboarding's id (the `onboardingId` of its 202)."),
    "geo_target_id": (
        "geoTargetId",
        {"type": "string", "pattern": GEO_TARGET_ID_PATTERN},
        "2000 + the ISO 3166-1 numeric country code, e.g. `2840` (US).",
    ),
    "language_code": (
        "languageCode",
        {"type": "string", "pattern": LANGUAGE_CODE_PATTERN},
        "A language code, e.g. `en` or `pt-br` (any case).",
    ),
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


def _json_response(
    description: str, schema: dict[str, Any], example: dict[str, Any]
) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema, "example": example}},
    }


def _error_response(description: str, error: type[DomainError]) -> dict[str, Any]:
    value = {"error": error.code, "message": error.default_message}
    envelope = {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}
    return {
        "description": description,
        "content": {"application/json": {**envelope, "examples": {error.code: {"value": value}}}},
    }


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
        "healthz",
        "Liveness",
        {"200": _json_response("The process answers.", _LIVENESS, {"status": "ok"})},
    ),
    "/readyz": _health_operation(
        "readyz",
        "Readiness: database and broker reachable",
        {
            "200": _json_response(
                "Ready.",
                _READINESS,
                {"status": "ok", "checks": {"database": "ok", "broker": "ok"}},
            ),
            "503": _json_response(
                "The database or the broker is unreachable.",
                _READINESS,
                {"status": "unavailable", "checks": {"database": "ok", "broker": "unreachable"}},
            ),
        },
    ),
    "/metrics": _health_operation(
        "metrics",
        "Prometheus metrics",
        {
            "200": {
                "description": "Prometheus text exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            "401": _error_response(
                "SERENITY_METRICS_TOKEN is set and the request does not carry it: "
                "`authenticationRequired`.",
                AuthenticationRequiredError,
            ),
            "403": _error_response(
                "No SERENITY_METRICS_TOKEN is set and the client is not on loopback: `forbidden`.",
                ForbiddenError,
            ),
        },
    ),
}
# /metrics: `Authorization: Bearer <SERENITY_METRICS_TOKEN>` (no API token), or nothing from
# loopback when no token is set.
HEALTH_PATHS["/metrics"]["get"]["security"] = [{"metricsToken": []}, {}]
METRICS_TOKEN_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "`SERENITY_METRICS_TOKEN`, for `/metrics` only.",
}
RETRY_AFTER_429 = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 1},
        "required": True,
        "description": "Whole seconds until the rate's window lets this request through.",
    }
}
RETRY_AFTER_503 = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 1},
        "required": False,
        "description": "With `upstreamBusy`: whole seconds until the Semrush quota of the "
        "organization's credential may let the request through; with `databaseUnavailable`: "
        "seconds to wait for a database connection; with `credentialRefused`: when the refused "
        "credential is checked again (none with `configurationError`).",
    }
}


def _rename_path(path: str) -> str:
    for kwarg, (name, _, _) in PATH_PARAMETERS.items():
        path = path.replace(f"{{{kwarg}}}", f"{{{name}}}")
    return path


def _rename_parameters(operation: dict[str, Any], path: str) -> None:
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        if parameter.get("in") == "query":
            # A blank `?x=` is refused; the pattern or the enum says so already.
            parameter["schema"].pop("minLength", None)
            if parameter["name"] == "cursor":
                parameter["schema"]["pattern"] = CURSOR_PATTERN
        if parameter.get("in") == "path" and parameter["name"] in PATH_PARAMETERS:
            name, schema, description = PATH_PARAMETERS[parameter["name"]]
            parameter.update(name=name, schema=dict(schema), description=description)
    # Path parameters in the order they appear in the path (spectacular sorts them by name).
    parameters.sort(
        key=lambda p: path.find(f"{{{p['name']}}}") if p.get("in") == "path" else len(path)
    )


def _apply_constraints(components: dict[str, Any]) -> None:
    """A request's string that may be blank (a webhook's description) still holds no NUL (the
    other strings' rules are their fields': api.schemas.extensions); a brand create's
    cross-field rules; every body closed to members it does not list."""
    for name, schema in components.items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False  # a typo is refused (SPEC §13.6: api.bodies)
        for prop in schema.get("properties", {}).values() if name.endswith("Request") else ():
            if prop.get("type") == "string" and not {"pattern", "enum", "format"} & set(prop):
                prop["pattern"] = "^[^\\x00]*$"
    if "BrandCreateRequest" in components:
        components["BrandCreateRequest"]["allOf"] = BRAND_CREATE_RULES


# SPEC §4.1's cross-field rules of a brand create (provisioning.flows.brand_create), stated with
# `allOf` beside the properties: an explicit `"status": "active"` or a `semrushMarket` needs a
# `baseUrl` (else 400 `baseUrlRequired`), and a `pending` brand cannot have a market (else 400
# `invalidRequest`). A null `semrushMarket` or `baseUrl` counts as absent.
_GIVEN_MARKET: dict[str, Any] = {
    "required": ["semrushMarket"],
    "properties": {"semrushMarket": {"type": "object"}},
}
BRAND_CREATE_RULES: list[dict[str, Any]] = [
    {
        "anyOf": [
            {"required": ["baseUrl"], "properties": {"baseUrl": {"type": "string"}}},
            {
                "not": {
                    "anyOf": [
                        {"required": ["status"], "properties": {"status": {"enum": ["active"]}}},
                        _GIVEN_MARKET,
                    ]
                }
            },
        ]
    },
    {
        "not": {
            "required": ["status", *_GIVEN_MARKET["required"]],
            "properties": {"status": {"enum": ["pending"]}, **_GIVEN_MARKET["properties"]},
        }
    },
]


# OpenAPI 3.0.3: `nullable: true` counts only beside a `type` in the same schema object. A
# nullable nested serializer comes out of drf-spectacular as `{allOf: [$ref], nullable: true}`,
# which therefore refuses null: it is stated as "that object, or null" instead.
NULL_OBJECT: dict[str, Any] = {"type": "object", "nullable": True, "enum": [None]}
_NON_SCHEMA_KEYS = frozenset({"example", "examples", "enum", "default"})


def _nullable_by_construction(node: Any) -> None:
    """Walk a schema (and every schema inside it) and restate each `nullable` that has no
    `type` beside it as an alternative that holds null: `{anyOf: [$ref, null]}` for a
    reference; a `oneOf` of enums already lists drf-spectacular's `NullEnum`."""
    if isinstance(node, list):
        for item in node:
            _nullable_by_construction(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("nullable") is True and "type" not in node:
        del node["nullable"]
        if "$ref" in node or "allOf" in node:
            alternatives = node.pop("allOf", None) or [{"$ref": node.pop("$ref")}]
            assert len(alternatives) == 1, alternatives  # one nested serializer, not a merge
            node["anyOf"] = [*alternatives, dict(NULL_OBJECT)]
    for key, value in node.items():
        if key not in _NON_SCHEMA_KEYS:
            _nullable_by_construction(value)


LOCATION = {"schema": {"type": "string"}, "required": True, "description": "Where it is."}


def _retry_after_headers(responses: dict[str, Any]) -> None:
    """Every 429 and 503 of the API says when to come back (api.errors); every 201 and 202
    says where (SPEC §13.6: `Location`, unless the route describes its own)."""
    for status, header in (("429", RETRY_AFTER_429), ("503", RETRY_AFTER_503)):
        if status in responses:
            responses[status].setdefault("headers", {}).update(header)
    for status in ("201", "202"):
        if status in responses:
            responses[status].setdefault("headers", {}).setdefault("Location", LOCATION)


def postprocess_schema(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """SPEC §4's path parameter names, unique operationIds, the health views, the
    constraints validation applies beyond the serializers' fields, and nulls stated as
    OpenAPI 3.0 reads them."""
    schemas = result.get("components", {}).get("schemas", {})
    _apply_constraints(schemas)
    _nullable_by_construction(schemas)
    _nullable_by_construction(result.get("paths", {}))
    paths: dict[str, Any] = {}
    for path, item in result.get("paths", {}).items():
        renamed = _rename_path(path)
        for operation in item.values():
            if isinstance(operation, dict):
                _rename_parameters(operation, renamed)
                _retry_after_headers(operation.get("responses", {}))
        if renamed == PROMPT_JOB_PATH:
            item["get"].update(PROMPT_JOB_OPERATION)
        paths[renamed] = item
    paths.update(HEALTH_PATHS)
    result["paths"] = paths
    result.setdefault("components", {}).setdefault("securitySchemes", {})["metricsToken"] = (
        METRICS_TOKEN_SCHEME
    )
    return result
