"""The OpenAPI 3 document at /api/schema/ and its UI at /api/docs/ (SPEC §4)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openapi_spec_validator import validate
from rest_framework.test import APIClient

B = "/v2/orgs/{orgId}/brands/{brandId}"

# Every route of SPEC §4's table, as (method, path template).
SPEC_ROUTES = {
    ("post", "/v2/orgs/{orgId}/brands"),
    ("get", "/v2/orgs/{orgId}/brands"),
    ("get", B),
    ("patch", B),
    ("get", f"{B}/serenity/markets"),
    ("post", f"{B}/serenity/markets"),
    ("get", f"{B}/serenity/markets/{{geoTargetId}}/{{languageCode}}"),
    ("delete", f"{B}/serenity/markets/{{geoTargetId}}/{{languageCode}}"),
    ("post", f"{B}/serenity/activate"),
    ("post", f"{B}/serenity/deactivate"),
    ("post", f"{B}/serenity/prompts"),
    ("get", f"{B}/serenity/jobs"),
    ("get", f"{B}/serenity/jobs/{{jobId}}"),
    ("get", f"{B}/serenity/prompts/jobs/{{jobId}}"),
    ("post", f"{B}/serenity/jobs/{{jobId}}/cancel"),
    ("get", "/v2/orgs/{orgId}/serenity/languages"),
}
# SPEC §11.3.
W = "/v2/orgs/{orgId}/serenity/webhooks"
WEBHOOK_ROUTES = {
    ("post", W),
    ("get", W),
    ("get", f"{W}/{{webhookId}}"),
    ("delete", f"{W}/{{webhookId}}"),
    ("get", f"{W}/{{webhookId}}/deliveries"),
    ("get", f"{W}/{{webhookId}}/deliveries/{{deliveryId}}"),
    ("post", f"{W}/{{webhookId}}/deliveries/{{deliveryId}}/redeliver"),
    # SPEC §12.2
    ("patch", f"{W}/{{webhookId}}"),
    ("post", f"{W}/{{webhookId}}/rotate-secret"),
    ("post", f"{W}/{{webhookId}}/test"),
    ("get", f"{W}/{{webhookId}}/deliveries/{{deliveryId}}/attempts"),
}
# SPEC §12.2: jobs across an organization.
ORG_JOB_ROUTES = {
    ("get", "/v2/orgs/{orgId}/serenity/jobs"),
    ("get", "/v2/orgs/{orgId}/serenity/jobs/{jobId}"),
    # SPEC §13.2: the org's state and its credential's.
    ("get", "/v2/orgs/{orgId}/serenity"),
}
# SPEC §11.2.
ONB = "/v2/orgs/{orgId}/serenity/onboardings"
ONBOARDING_ROUTES = {
    ("post", ONB),
    ("get", ONB),
    ("get", f"{ONB}/{{onboardingId}}"),
    ("post", f"{ONB}/{{onboardingId}}/cancel"),
    ("post", f"{ONB}/{{onboardingId}}/retry"),
    ("get", f"{ONB}/{{onboardingId}}/items"),
}
# SPEC §13.1.
REC = "/v2/orgs/{orgId}/serenity/reconciliations"
RECONCILIATION_ROUTES = {("post", REC), ("get", REC), ("get", f"{REC}/{{reconciliationId}}")}
HEALTH_ROUTES = {("get", "/healthz"), ("get", "/readyz"), ("get", "/metrics")}
# SPEC §13.4.
LEDGER_ROUTES = {("get", "/v2/orgs/{orgId}/serenity/upstream-calls")}
ASYNC_ROUTES = {
    ("post", "/v2/orgs/{orgId}/brands"),
    ("post", f"{B}/serenity/markets"),
    ("post", f"{B}/serenity/activate"),
    ("post", f"{B}/serenity/prompts"),
}
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
ERROR_ENVELOPE = "#/components/schemas/ErrorEnvelope"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    }


def request_schema(document: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any]:
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return document["components"]["schemas"][ref.rsplit("/", 1)[-1]]


def test_schema_needs_no_token_and_validates_as_openapi_3() -> None:
    # given no credentials
    client = APIClient()

    # when
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    # then
    assert response.status_code == 200
    body = response.json()
    assert body["openapi"].startswith("3.")
    validate(body)


def test_schema_documents_exactly_the_routes_of_spec_4(document: dict[str, Any]) -> None:
    assert (
        set(operations(document))
        == SPEC_ROUTES
        | WEBHOOK_ROUTES
        | ONBOARDING_ROUTES
        | ORG_JOB_ROUTES
        | HEALTH_ROUTES
        | LEDGER_ROUTES
        | RECONCILIATION_ROUTES
    )


def test_every_api_operation_needs_the_bearer_token_and_documents_the_error_envelope(
    document: dict[str, Any],
) -> None:
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token from `create_api_token`: `Authorization: Bearer <token>`.",
    }
    for key, operation in operations(document).items():
        if key == ("get", "/metrics"):
            assert operation["security"] == [{"metricsToken": []}, {}]
            continue
        if key in HEALTH_ROUTES:
            assert operation["security"] == [], key
            continue
        assert operation["security"] == [{"bearerAuth": []}], key
        responses = operation["responses"]
        for status in ("400", "401", "403", "404"):
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": ERROR_ENVELOPE}, (key, status)
        assert responses["401"]["headers"]["WWW-Authenticate"]["schema"] == {"type": "string"}


def test_error_envelope_schema(document: dict[str, Any]) -> None:
    envelope = document["components"]["schemas"]["ErrorEnvelope"]
    assert set(envelope["properties"]) == {"error", "message", "details"}
    assert envelope["required"] == ["error", "message"]


def test_async_is_a_boolean_and_202_sends_location_and_retry_after(
    document: dict[str, Any],
) -> None:
    found = operations(document)
    for key in ASYNC_ROUTES:
        operation = found[key]
        properties = request_schema(document, operation)["properties"]
        assert properties["async"]["type"] == "boolean", key
        assert "async_" not in properties, key
        accepted = operation["responses"]["202"]
        assert set(accepted["headers"]) == {"Location", "Retry-After", "Idempotent-Replayed"}, key
        assert accepted["headers"]["Retry-After"]["schema"] == {"type": "integer"}


def test_path_parameters_use_spec_names(document: dict[str, Any]) -> None:
    operation = operations(document)[
        ("delete", f"{B}/serenity/markets/{{geoTargetId}}/{{languageCode}}")
    ]
    parameters = [(p["name"], p["schema"]) for p in operation["parameters"] if p["in"] == "path"]
    assert parameters == [
        ("orgId", {"type": "string", "format": "uuid"}),
        ("brandId", {"type": "string", "format": "uuid"}),
        ("geoTargetId", {"type": "string", "pattern": "^[0-9]{1,10}$"}),
        ("languageCode", {"type": "string", "pattern": "^[A-Za-z]{2,3}(-[A-Za-z]{2,4})?$"}),
    ]


def test_docs_page_is_served_without_a_token() -> None:
    response = APIClient().get("/api/docs/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"swagger-ui" in response.content


# --- SPEC §10.3: offline docs, examples, constraints -----------------------------------------


@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/"])
def test_the_docs_pages_load_nothing_from_another_host(path, settings):
    import re

    settings.ALLOWED_HOSTS = ["serenity.test"]
    response = APIClient().get(path, HTTP_HOST="serenity.test")
    assert response.status_code == 200
    html = response.content.decode()
    urls = re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", html)
    assert [u for u in urls if not re.match(r"(https?:)?//serenity\.test/", u)] == []
    # the UI's scripts are served from our own static files
    assert "/static/drf_spectacular_sidecar/" in html


def test_the_sidecar_static_files_are_served_locally(settings):
    from django.contrib.staticfiles import finders

    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert finders.find("drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js")


def _has_example(content: dict[str, Any]) -> bool:
    media = content.get("application/json", {})
    return bool(media.get("example") or media.get("examples"))


def test_every_request_and_response_body_has_an_example(document):
    missing = []
    for (method, path), operation in operations(document).items():
        body = operation.get("requestBody")
        if body is not None and not _has_example(body["content"]):
            missing.append((method, path, "request"))
        for status, response in operation["responses"].items():
            content = response.get("content")
            if content is not None and "application/json" in content and not _has_example(content):
                missing.append((method, path, status))
    assert missing == []


def test_a_body_the_route_cannot_do_without_is_required_whatever_its_media_types(document):
    # given the operations whose body has required members (an onboarding's, also as CSV text)
    for (method, path), operation in operations(document).items():
        body = operation.get("requestBody")
        if body is None or "application/json" not in body["content"]:
            continue
        needs = bool(request_schema(document, operation).get("required"))
        # then the document says the body is required exactly when a member is (an absent body
        # is 400; drf-spectacular counted a text/csv string optional: found by schemathesis)
        assert bool(body.get("required")) == needs, (method, path)


def test_every_error_code_of_a_response_has_its_example(document):
    import re

    for (method, path), operation in operations(document).items():
        for status, response in operation["responses"].items():
            if not status.startswith("4"):
                continue
            codes = set(re.findall(r"`(\w+)`", response["description"])) - {"error"}
            examples = response["content"]["application/json"]["examples"]
            shown = {e["value"]["error"] for e in examples.values()}
            assert set(codes) <= shown, (method, path, status)


def test_the_202_and_the_409_guard_examples(document):
    ops = operations(document)
    market_create = ops[("post", f"{B}/serenity/markets")]
    accepted = market_create["responses"]["202"]["content"]["application/json"]["examples"]
    assert next(iter(accepted.values()))["value"] == {
        "jobId": "c41d7e28-6a3f-4b19-8e05-2f9a6b3d71c0",
        "jobType": "provisionWorkspace",
        "status": "IN_PROGRESS",
    }
    conflicts = market_create["responses"]["409"]["content"]["application/json"]["examples"]
    guard = [
        e["value"]
        for e in conflicts.values()
        if e["value"]["error"] == "semrush_provisioning_in_progress"
    ]
    assert guard[0]["details"] == {"jobId": "c41d7e28-6a3f-4b19-8e05-2f9a6b3d71c0"}


def test_every_post_and_patch_documents_the_idempotency_key(document):
    for (method, path), operation in operations(document).items():
        if method not in ("post", "patch") or not path.startswith("/v2/"):
            continue
        headers = {p["name"]: p for p in operation["parameters"] if p["in"] == "header"}
        assert headers["Idempotency-Key"]["schema"] == {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": "^[\\x20-\\x7E]+$",
        }, (method, path)
        assert "409" in operation["responses"] and "422" in operation["responses"], path


def test_the_lists_document_limit_cursor_and_next_cursor(document):
    ops = operations(document)
    for path in ["/v2/orgs/{orgId}/brands", f"{B}/serenity/markets", f"{B}/serenity/jobs"]:
        params = {p["name"]: p for p in ops[("get", path)]["parameters"] if p["in"] == "query"}
        assert params["limit"]["schema"] == {
            "type": "integer",
            "minimum": 1,
            "maximum": 500,
            "default": 100,
        }
        assert params["cursor"]["schema"] == {
            "type": "string",
            "maxLength": 1000,
            "pattern": "^[A-Za-z0-9_.:-]+$",
        }
    job_status = {
        p["name"]: p for p in ops[("get", f"{B}/serenity/jobs")]["parameters"] if p["in"] == "query"
    }["status"]
    assert sorted(job_status["schema"]["enum"]) == [
        "CANCELLED",
        "COMPLETED",
        "FAILED",
        "IN_PROGRESS",
    ]


def test_request_constraints_equal_the_validation(document):
    schemas = document["components"]["schemas"]
    market = schemas["MarketCreateRequest"]["properties"]
    assert market["market"]["pattern"].startswith("^(?:[Aa][DEFGILMOQRSTUWXZ")
    assert market["languageCode"]["pattern"] == "^[A-Za-z]{2,3}(-[A-Za-z]{2,4})?$"
    assert market["brandNames"]["minItems"] == 1
    assert market["brandNames"]["maxItems"] == 50
    # one rule for names (SPEC §11.4): a brand's name, its aliases, a market's brand names
    name_pattern = schemas["BrandCreateRequest"]["properties"]["name"]["pattern"]
    assert market["brandNames"]["items"]["pattern"] == name_pattern
    for component in ("BrandCreateRequest", "PatchedBrandUpdateRequest"):
        aliases = schemas[component]["properties"]["aliases"]
        assert aliases["items"]["pattern"] == name_pattern, component
    assert schemas["ActivateRequest"]["properties"]["brandNames"]["items"]["pattern"] == (
        name_pattern
    )
    prompts = schemas["PromptsRequest"]["properties"]["prompts"]
    assert (prompts["minItems"], prompts["maxItems"]) == (1, 500)
    markets = schemas["ActivateRequest"]["properties"]["markets"]
    assert (markets["minItems"], markets["maxItems"]) == (1, 50)
    assert schemas["BrandCreateRequest"]["properties"]["name"]["pattern"].startswith(
        "^\\s*[^\\x00-"
    )


# --- The stated constraints accept exactly what validation accepts ---------------------------


def _properties(document: dict[str, Any], component: str) -> dict[str, Any]:
    return document["components"]["schemas"][component]["properties"]


def test_every_market_the_pattern_allows_is_accepted_and_no_other(document):
    import re
    import string

    from kernel.errors import DomainError
    from serenity.slices import geo_target_id_for

    patterns = {
        _properties(document, name)["market"]["pattern"]
        for name in ("MarketCreateRequest", "ActivateMarketRequest", "SemrushMarketRequest")
    }
    assert len(patterns) == 1
    pattern = re.compile(patterns.pop())
    for a in string.ascii_letters:
        for b in string.ascii_letters:
            try:
                geo_target_id_for(a + b)
                accepted = True
            except DomainError:
                accepted = False
            assert bool(pattern.search(a + b)) == accepted, a + b
    assert not pattern.search("USA") and not pattern.search("1A")


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("https://acme.example", True),
        ("HTTP://Acme.Example:8080/shop?x=1&y=%20#top", True),
        ("https://acme.example/a:b@c/~d", True),
        ("ftp://acme.example", False),
        ("https://", False),
        ("https:///path", False),
        ("https://acme example", False),
        ("https://acme.example/é", False),
        ("https://user@acme.example", False),
        ("http://[::1]/", False),
        ("http://[abc", False),
        ("https://acme.example/%zz", False),
        ("acme.example", False),
    ],
)
def test_the_url_pattern_equals_the_url_validation(document, value, accepted):
    import re

    from api.brands import BrandUpdateSerializer

    props = _properties(document, "PatchedBrandUpdateRequest")
    assert props["urls"]["items"]["pattern"] == props["baseUrl"]["pattern"]
    assert bool(re.search(props["baseUrl"]["pattern"], value)) == accepted
    body = BrandUpdateSerializer(data={"baseUrl": value, "urls": [value]})
    assert body.is_valid() == accepted, body.errors


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("acme.example", True),
        ("ACME.example", True),
        ("a-b.c", True),
        ("-a.example", False),
        ("acme.example/", False),
        ("https://acme.example", False),
        ("acme..example", False),
        ("a" * 64 + ".example", False),
    ],
)
def test_the_brand_domain_pattern_equals_the_host_validation(document, value, accepted):
    import re

    from api.serenity_routes import ActivateSerializer

    pattern = _properties(document, "ActivateRequest")["brandDomain"]["pattern"]
    assert bool(re.search(pattern, value)) == accepted
    assert ActivateSerializer(data={"brandDomain": value}).is_valid() == accepted


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("Acme", True),
        (" Acme ", True),
        ("Ac me", True),
        ("  ", False),
        ("Ac\x01me", False),
        ("Ac\u202eme", False),
        ("Ac\x00me", False),
    ],
)
def test_the_brand_name_pattern_equals_the_name_validation(document, value, accepted):
    import re

    from api.brands import BrandCreateSerializer

    pattern = _properties(document, "BrandCreateRequest")["name"]["pattern"]
    assert bool(re.search(pattern, value)) == accepted
    body = BrandCreateSerializer(data={"name": value})
    assert body.is_valid() == accepted, body.errors


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("en", True),
        ("EN", True),
        ("pt-br", True),
        ("pt-BR", True),
        ("fil", True),
        ("e", False),
        ("english", False),
        ("pt_br", False),
        ("en-", False),
        ("1n", False),
    ],
)
def test_the_language_patterns_equal_the_language_validation(document, value, accepted):
    import re

    from kernel.errors import DomainError
    from serenity.slices import normalize_language

    detail = operations(document)[
        ("delete", f"{B}/serenity/markets/{{geoTargetId}}/{{languageCode}}")
    ]
    path_pattern = next(p for p in detail["parameters"] if p["name"] == "languageCode")["schema"]
    body_pattern = _properties(document, "MarketCreateRequest")["languageCode"]["pattern"]
    assert path_pattern["pattern"] == body_pattern
    try:
        normalize_language(value)
        valid = True
    except DomainError:
        valid = False
    assert bool(re.search(body_pattern, value)) == accepted == valid


def test_a_cursor_outside_the_pattern_is_refused_and_every_issued_cursor_matches_it():
    import re

    from kernel.errors import DomainError
    from kernel.pagination import CURSOR_PATTERN, cursor_decode, cursor_encode

    issued = cursor_encode(
        ["Acme Ünïcode " * 20, "c41d7e28-6a3f-4b19-8e05-2f9a6b3d71c0"], kind="brands"
    )
    assert re.search(CURSOR_PATTERN, issued)
    assert cursor_decode(issued, kind="brands", width=2)[1].startswith("c41d")
    with pytest.raises(DomainError):
        cursor_decode("not a cursor", kind="brands", width=2)


@pytest.mark.parametrize("status", [None, "active", "pending"])
@pytest.mark.parametrize("base_url", [None, "absent", "https://acme.example"])
@pytest.mark.parametrize("market", [None, "absent", {"market": "US", "languageCode": "en"}])
def test_the_brand_create_rules_equal_the_flows_checks(document, status, base_url, market):
    import jsonschema

    from api.brands import BrandCreateSerializer, _brand_input
    from kernel.errors import DomainError
    from provisioning.flows.brand_create import brand_input_check
    from serenity.models import Organization

    # given a body with every combination of status, baseUrl and semrushMarket
    body: dict[str, Any] = {"name": "Acme"}
    for key, value in (("status", status), ("baseUrl", base_url), ("semrushMarket", market)):
        if value != "absent" and not (key == "status" and value is None):
            body[key] = value
    rules = document["components"]["schemas"]["BrandCreateRequest"]["allOf"]
    schema_valid = jsonschema.Draft4Validator({"allOf": rules}).is_valid(body)
    serializer = BrandCreateSerializer(data=body)
    assert serializer.is_valid(), serializer.errors
    # when the flow checks it for a Serenity org
    try:
        brand_input_check(
            organization=Organization(serenity_enabled=True, semrush_parent_workspace_id="p"),
            data=_brand_input(serializer.validated_data),
        )
        refusal = None
    except DomainError as error:
        refusal = error.code
    # then the document's rules refuse exactly what the flow refuses
    assert (refusal is None) == schema_valid, (body, refusal)
    assert refusal in (None, "baseUrlRequired", "invalidRequest")


# --- 413 and 429 where they can occur (SPEC §11.4) ---------------------------------------------


def _error_codes(response: dict[str, Any]) -> set[str]:
    examples = response["content"]["application/json"]["examples"]
    return {example["value"]["error"] for example in examples.values()}


def test_every_post_and_patch_documents_413_request_too_large(document):
    for (method, path), operation in operations(document).items():
        if method in ("post", "patch") and path.startswith("/v2/"):
            assert "413" in operation["responses"], (method, path)
            assert _error_codes(operation["responses"]["413"]) == {"requestTooLarge"}


def test_every_v2_operation_documents_429_rate_limited_with_retry_after(document):
    for (method, path), operation in operations(document).items():
        if not path.startswith("/v2/"):
            continue
        refused = operation["responses"].get("429")
        assert refused is not None, (method, path)
        # an onboarding also past the work one org can queue (SPEC §12.4), and a request that
        # would queue markets past the org's queued markets (SPEC §13.6)
        queues = {"brandCreate", "marketCreate", "brandActivate", "onboardingCreate"}
        limits = {"queuedMarketsLimit"} if operation["operationId"] in queues else set()
        if operation["operationId"] in ("onboardingCreate", "onboardingRetry"):
            limits.add("onboardingLimit")
        assert _error_codes(refused) == {"rateLimited"} | limits
        assert refused["headers"]["Retry-After"]["required"] is True


def test_metrics_documents_its_token_and_refusals(document):
    metrics = document["paths"]["/metrics"]["get"]
    assert metrics["security"] == [{"metricsToken": []}, {}]
    assert set(metrics["responses"]) == {"200", "401", "403"}
    assert document["components"]["securitySchemes"]["metricsToken"]["scheme"] == "bearer"


# --- Nulls, enums and headers as a strict OpenAPI 3.0 reader sees them (SPEC §11.5) -------------


def _schemas(node: Any) -> Any:
    """Every dict of the document, depth first (examples left out: they are values)."""
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key not in ("example", "examples"):
                yield from _schemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from _schemas(item)


def test_every_nullable_stands_beside_a_type(document):
    # OpenAPI 3.0.3: `nullable` without `type` in the same object allows no null
    assert [s for s in _schemas(document) if s.get("nullable") is True and "type" not in s] == []
    job = document["components"]["schemas"]["Job"]["properties"]
    assert job["result"]["anyOf"] == [
        {"$ref": "#/components/schemas/JobResult"},
        {"type": "object", "nullable": True, "enum": [None]},
    ]


def _domain_error_codes() -> set[str]:
    import importlib
    import pkgutil

    from kernel.errors import DomainError

    for package in ("kernel", "serenity", "provisioning", "jobs", "webhooks"):
        root = importlib.import_module(package)
        for module in pkgutil.walk_packages(root.__path__, f"{package}."):
            if ".migrations" not in module.name and ".simulator" not in module.name:
                importlib.import_module(module.name)
    found, todo = set(), [DomainError]
    while todo:
        error = todo.pop()
        found.add(error.code)
        todo.extend(error.__subclasses__())
    return found


def _open_codes(document: dict[str, Any], component: str, prop: str) -> set[str]:
    """The known values of an open code (SPEC §12.2, §13.6): a reference to a named component
    (never a generated `…Enum` name), a string with `x-extensible-enum`, each value also
    named in its description, and no closed `enum`."""
    schemas = document["components"]["schemas"]
    schema = schemas[component]["properties"][prop]
    schema = schema.get("items", schema)
    ref = schema.get("$ref") or schema["allOf"][0]["$ref"]
    name = ref.rsplit("/", 1)[-1]
    assert not name.endswith("Enum"), name
    schema = schemas[name]
    assert schema["type"] == "string" and "enum" not in schema, schema
    known = schema["x-extensible-enum"]
    assert len(known) == len(set(known)), known
    assert all(f"`{code}`" in schema["description"] for code in known), schema
    return set(known)


def _component_name(document: dict[str, Any], component: str, prop: str) -> str:
    schema = document["components"]["schemas"][component]["properties"][prop]
    schema = schema.get("items", schema)
    return (schema.get("$ref") or schema["allOf"][0]["$ref"]).rsplit("/", 1)[-1]


def test_the_codes_that_grow_are_open_strings_listing_their_known_values(document):
    framework = {
        "authenticationRequired",
        "unsupportedMediaType",
        "methodNotAllowed",
        "notAcceptable",
        "rateLimited",
        "requestTooLarge",
        "lengthRequired",
    }
    assert _open_codes(document, "ErrorEnvelope", "error") == _domain_error_codes() | framework
    assert _open_codes(document, "ActivationIncomplete", "error") == _open_codes(
        document, "ErrorEnvelope", "error"
    )
    assert _open_codes(document, "JobError", "code") == {
        "jobFailed",
        "provisioningCancelled",
        "provisioningStale",
        "brandExists",
        "ambiguousWorkspace",
        "workspaceNotEmpty",
        "subworkspaceCreationFailed",
        "subworkspaceCreationTimeout",
        "subworkspaceGone",
        "serenityUpstreamError",
        "upstreamBusy",
        "credentialRefused",
        "upstreamUnauthorized",
        "upstreamForbidden",
        "publishFailed",
        "publishTimeout",
    }
    subscribable = {
        "job.completed",
        "job.failed",
        "job.cancelled",
        "onboarding.completed",
        "onboarding.cancelled",
        "credential.refused",
        "drift.detected",
        "drift.repaired",
    }
    # One open schema of every event type, wherever one is named (SPEC §13.6); a request
    # says in its own description which it accepts today (all but `webhook.test`).
    every = subscribable | {"webhook.test"}
    for component, prop in (
        ("Webhook", "events"),
        ("WebhookCreateRequest", "events"),
        ("PatchedWebhookUpdateRequest", "events"),
        ("Delivery", "type"),
    ):
        assert _open_codes(document, component, prop) == every, component
        assert _component_name(document, component, prop) == "WebhookEventType", component


def test_step_names_job_types_and_provisioning_error_codes_are_open_with_stable_names(document):
    """SPEC §13.6: the enums that grow are open, each a component of a name that does not
    depend on drf-spectacular's naming (no `CodeEnum`, `StepEnum`, `JobTypeEnum`), each value
    listed once in the whole document."""
    from jobs.models import JobStep, JobType
    from provisioning.models import AttemptReason

    assert _open_codes(document, "JobStep", "step") == set(JobStep.values)
    assert _component_name(document, "JobStep", "step") == "JobStepName"
    for component in ("Job", "JobSummary", "JobAccepted"):
        assert _open_codes(document, component, "jobType") == set(JobType.values), component
        assert _component_name(document, component, "jobType") == "JobType"
    assert _open_codes(document, "ProvisioningError", "code") == set(AttemptReason.values)
    assert _component_name(document, "ProvisioningError", "code") == "ProvisioningErrorCode"
    schemas = document["components"]["schemas"]
    for generated in ("CodeEnum", "StepEnum", "JobTypeEnum", "EventsEnum", "SubscribableEventType"):
        assert generated not in schemas, generated
    # each open value appears once: in its component's list
    text = json.dumps({k: v for k, v in schemas.items()})
    for value in ("createMarket", "activateMarkets", "exhausted", "stale"):
        assert text.count(f'"{value}"') == 1, value


def test_statuses_stay_closed_enums(document):
    schemas = document["components"]["schemas"]
    for name in ("JobStatusEnum", "OnboardingStatusEnum", "BrandStatusEnum"):
        assert schemas[name]["type"] == "string" and schemas[name]["enum"], name


def test_a_job_result_body_is_one_of_the_answers_it_stands_for(document):
    body = document["components"]["schemas"]["JobResult"]["properties"]["body"]
    assert {ref["$ref"].rsplit("/", 1)[-1] for ref in body["anyOf"]} == {
        "MarketCreated",
        "ActivateAnswer",
        "ActivationIncomplete",
        "PromptsAnswer",
        "WorkspaceReady",
        "RepairAnswer",
        "DeactivateAnswer",
        "ErrorEnvelope",
    }


def test_every_v2_operation_documents_the_statuses_any_route_can_answer(document):
    for (method, path), operation in operations(document).items():
        if not path.startswith("/v2/"):
            continue
        statuses = set(operation["responses"])
        assert {"400", "401", "403", "404", "406", "413", "429", "500"} <= statuses, path
        if method in ("post", "patch"):
            assert {"409", "415", "422"} <= statuses, (method, path)
            assert _error_codes(operation["responses"]["415"]) == {"unsupportedMediaType"}


def test_every_503_and_429_documents_retry_after(document):
    for (_method, path), operation in operations(document).items():
        for status in ("429", "503"):
            if status in operation["responses"] and path.startswith("/v2/"):
                header = operation["responses"][status]["headers"]["Retry-After"]
                assert header["schema"] == {"type": "integer", "minimum": 1}, (path, status)
                assert header["required"] is (status == "429"), (path, status)


def test_every_response_example_is_a_valid_answer(document):
    from openapi_schema_validator import OAS30StrictValidator

    wrong = []
    for (method, path), operation in operations(document).items():
        for status, response in operation["responses"].items():
            media = response.get("content", {}).get("application/json")
            if media is None:
                continue
            schema = {**media["schema"], "components": document["components"]}
            validator = OAS30StrictValidator(
                schema, format_checker=OAS30StrictValidator.FORMAT_CHECKER
            )
            values = [e["value"] for e in media.get("examples", {}).values()]
            values += [media["example"]] if "example" in media else []
            for value in values:
                wrong += [(method, path, status, e.message) for e in validator.iter_errors(value)]
    assert wrong == []


@pytest.mark.parametrize("wanted", ["xml", "html", "x" * 300])
def test_an_unknown_schema_format_is_a_400_naming_it_never_a_500(wanted):
    """SPEC §13.6: `?format=xml` answered 500 with a traceback, unauthenticated."""
    response = APIClient().get("/api/schema/", {"format": wanted})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"] == "invalidRequest"
    assert body["details"] == {"field": "format"}
    assert body["message"].startswith("format: ") and body["message"].endswith(
        "is not one of json, yaml."
    )
    assert len(body["message"]) <= 500


def test_an_accept_the_schema_cannot_satisfy_is_a_406_in_json():
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/xml")
    assert response.status_code == 406
    assert response.json() == {"error": "notAcceptable", "message": "Not acceptable."}


@pytest.mark.parametrize("wanted", ["json", "yaml"])
def test_the_known_schema_formats_still_answer(wanted):
    assert APIClient().get("/api/schema/", {"format": wanted}).status_code == 200
