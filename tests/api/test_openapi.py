"""The OpenAPI 3 document at /api/schema/ and its UI at /api/docs/ (SPEC §4)."""

from __future__ import annotations

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
    ("get", f"{B}/serenity/jobs/{{jobId}}"),
    ("get", f"{B}/serenity/prompts/jobs/{{jobId}}"),
    ("post", f"{B}/serenity/jobs/{{jobId}}/cancel"),
    ("get", "/v2/orgs/{orgId}/serenity/languages"),
}
HEALTH_ROUTES = {("get", "/healthz"), ("get", "/readyz"), ("get", "/metrics")}
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
    assert set(operations(document)) == SPEC_ROUTES | HEALTH_ROUTES


def test_every_api_operation_needs_the_bearer_token_and_documents_the_error_envelope(
    document: dict[str, Any],
) -> None:
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token from `create_api_token`: `Authorization: Bearer <token>`.",
    }
    for key, operation in operations(document).items():
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
        assert set(accepted["headers"]) == {"Location", "Retry-After"}, key
        assert accepted["headers"]["Retry-After"]["schema"] == {"type": "integer"}


def test_path_parameters_use_spec_names(document: dict[str, Any]) -> None:
    operation = operations(document)[
        ("delete", f"{B}/serenity/markets/{{geoTargetId}}/{{languageCode}}")
    ]
    parameters = [(p["name"], p["schema"]) for p in operation["parameters"] if p["in"] == "path"]
    assert parameters == [
        ("orgId", {"type": "string", "format": "uuid"}),
        ("brandId", {"type": "string", "format": "uuid"}),
        ("geoTargetId", {"type": "string", "pattern": "^[0-9]+$"}),
        ("languageCode", {"type": "string"}),
    ]


def test_docs_page_is_served_without_a_token() -> None:
    response = APIClient().get("/api/docs/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"swagger-ui" in response.content
