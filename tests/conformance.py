"""Real answers against the OpenAPI document the service serves (SPEC §11.5), under a strict
OpenAPI 3.0 validator (`openapi_schema_validator.OAS30StrictValidator`: `nullable` counts only
beside a `type`, formats such as `uuid` and `date-time` are checked).

`ServedDocument.check(response)` finds the documented operation of a test client's answer and
asserts that its status is documented there, that its body validates against that status's
schema (nulls included), and that the response headers the document marks required are sent
and valid. An answer to a path or method the document does not describe (an unknown route, a
method that answers 405) has nothing to be checked against and is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from openapi_schema_validator import OAS30StrictValidator

HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@dataclass(frozen=True)
class Checked:
    """What one answer was checked against: its operation and status."""

    operation_id: str
    status: int


@dataclass
class ServedDocument:
    document: dict[str, Any]
    _validators: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    _recorders: list[set[Checked]] = field(default_factory=list)

    @contextmanager
    def recording(self) -> Iterator[set[Checked]]:
        """The answers checked inside the block, as (operation, status)."""
        seen: set[Checked] = set()
        self._recorders.append(seen)
        try:
            yield seen
        finally:
            self._recorders.remove(seen)

    def operation_ids(self) -> set[str]:
        return {
            operation["operationId"]
            for item in self.document["paths"].values()
            for method, operation in item.items()
            if method in HTTP_METHODS
        }

    @cached_property
    def _templates(self) -> list[tuple[re.Pattern[str], str]]:
        """Path templates as patterns, those with the most literal segments first (so that
        `…/serenity/prompts/jobs/{jobId}` wins over a template with a parameter there)."""
        templates = []
        for template in self.document["paths"]:
            pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
            literal = sum(1 for part in template.split("/") if part and "{" not in part)
            templates.append((literal, re.compile(f"^{pattern}$"), template))
        templates.sort(key=lambda t: -t[0])
        return [(pattern, template) for _, pattern, template in templates]

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any]] | None:
        for pattern, template in self._templates:
            if pattern.match(path):
                operation = self.document["paths"][template].get(method.lower())
                return (template, operation) if operation is not None else None
        return None

    def _validator(self, template: str, method: str, status: str, schema: dict[str, Any]) -> Any:
        key = (template, method, status)
        if key not in self._validators:
            root = {**schema, "components": self.document["components"]}
            self._validators[key] = OAS30StrictValidator(
                root, format_checker=OAS30StrictValidator.FORMAT_CHECKER
            )
        return self._validators[key]

    def check(self, response: Any) -> Checked | None:
        checked = self._check(response)
        if checked is not None:
            for seen in self._recorders:
                seen.add(checked)
        return checked

    def _check(self, response: Any) -> Checked | None:
        method = response.request["REQUEST_METHOD"].lower()
        path = response.request["PATH_INFO"]
        found = self.operation(method, path)
        if found is None:
            return None
        template, operation = found
        where = f"{method.upper()} {path} → {response.status_code}"
        status = str(response.status_code)
        documented = operation["responses"].get(status)
        assert documented is not None, f"{where}: status not documented on {template}"
        self._check_headers(documented, response, where)
        content = documented.get("content")
        if getattr(response, "streaming", False):
            media = response["Content-Type"].split(";")[0].strip()
            assert content is not None and media in content, f"{where}: {media} not documented"
            return Checked(operation["operationId"], response.status_code)
        if not response.content:
            assert content is None or response.status_code == 204, f"{where}: no body"
            return Checked(operation["operationId"], response.status_code)
        media = response["Content-Type"].split(";")[0].strip()
        assert content is not None and media in content, f"{where}: {media} not documented"
        if media == "application/json":
            schema = content[media]["schema"]
            validator = self._validator(template, method, status, schema)
            errors = [
                f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                for e in validator.iter_errors(response.json())
            ]
            assert errors == [], f"{where}: {errors} in {response.json()}"
        return Checked(operation["operationId"], response.status_code)

    def _event_schemas(self) -> dict[str, dict[str, Any]]:
        """The callbacks of the webhook create: one per event type, its request body's schema."""
        create = self.document["paths"]["/v2/orgs/{orgId}/serenity/webhooks"]["post"]
        return {
            event_type: next(iter(expression.values()))["post"]["requestBody"]["content"][
                "application/json"
            ]["schema"]
            for event_type, expression in create["callbacks"].items()
        }

    def event_types(self) -> list[str]:
        return list(self._event_schemas())

    def check_event(self, body: dict[str, Any]) -> None:
        """An event's body against its type's documented schema, strictly: every member of the
        body and of its `data` declared (no member the schema does not list)."""
        schema = self._event_schemas()[body["type"]]
        validator = OAS30StrictValidator(
            {**schema, "components": self.document["components"]},
            format_checker=OAS30StrictValidator.FORMAT_CHECKER,
        )
        errors = [e.message for e in validator.iter_errors(body)]
        assert errors == [], (body["type"], errors)
        component = self.document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
        assert set(body) == set(component["properties"]), body
        data = component["properties"]["data"]
        data_ref = data.get("$ref") or data["allOf"][0]["$ref"]
        declared = self.document["components"]["schemas"][data_ref.rsplit("/", 1)[-1]]
        assert set(body["data"]) <= set(declared["properties"]), (body["type"], body["data"])

    def _check_headers(self, documented: dict[str, Any], response: Any, where: str) -> None:
        for name, header in documented.get("headers", {}).items():
            if name not in response.headers:
                assert not header.get("required"), f"{where}: header {name} missing"
                continue
            value: Any = response.headers[name]
            if header["schema"].get("type") == "integer":
                assert re.fullmatch(r"-?[0-9]+", value), f"{where}: {name}: {value!r}"
                value = int(value)
            validator = OAS30StrictValidator(header["schema"])
            assert validator.is_valid(value), f"{where}: {name}: {value!r}"
