"""A client generated from the served document (SPEC §12.2): openapi-python-client generates a
Python package from `/api/schema/`; every answer of a workflow (brands, markets, jobs, the
org-wide job list, an onboarding, webhooks with their deliveries and attempts, refusals) is
parsed by the generated code of its operation, and an error answer with a code the document
has never listed still parses (the codes that grow are open strings)."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from rest_framework.test import APIClient

from tests.api.test_answers_conform import brands_path, finish_chain, serenity_path
from tests.conformance import ServedDocument
from tests.conftest import Caller

PACKAGE = "serenity_generated_client"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, django_db_blocker: Any) -> Iterator[Any]:
    """The package openapi-python-client generates from the served document, imported."""
    root = tmp_path_factory.mktemp("client")
    with django_db_blocker.unblock():
        document = APIClient().get("/api/schema/", {"format": "json"}).json()
    (root / "openapi.json").write_text(json.dumps(document))
    (root / "config.yaml").write_text(f"package_name_override: {PACKAGE}\n")
    generator = Path(sys.executable).with_name("openapi-python-client")
    done = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            "openapi.json",
            "--config",
            "config.yaml",
            "--meta",
            "none",
            "--output-path",
            PACKAGE,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Every operation and schema was generated: the generator reports what it had to skip.
    assert "Unable to" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def operation_module(package: Any, operation_id: str) -> types.ModuleType:
    api = Path(package.__file__).parent / "api"
    for tag in sorted(p.name for p in api.iterdir() if (p / "__init__.py").exists()):
        if (api / tag / f"{_snake(operation_id)}.py").exists():
            return importlib.import_module(f"{package.__name__}.api.{tag}.{_snake(operation_id)}")
    raise AssertionError(f"no generated module for {operation_id}")


_DATETIME = re.compile(r"^\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)$")


def normalized(value: Any) -> Any:
    """Date-times as instants (the generated models write `+00:00` where we answer `Z`)."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, str) and _DATETIME.match(value):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


class Parser:
    """Parses test-client answers with the generated code of their operation."""

    def __init__(self, package: Any, document: ServedDocument) -> None:
        self.package = package
        self.document = document
        self.client = package.Client(
            base_url="http://serenity.test", raise_on_unexpected_status=True
        )
        self.parsed: list[tuple[str, int]] = []

    def __call__(self, response: Any) -> Any:
        method = response.request["REQUEST_METHOD"]
        found = self.document.operation(method, response.request["PATH_INFO"])
        assert found is not None, response.request["PATH_INFO"]
        operation_id = found[1]["operationId"]
        module = operation_module(self.package, operation_id)
        answer = httpx.Response(
            response.status_code, content=response.content, headers=dict(response.headers)
        )
        parsed = module._parse_response(client=self.client, response=answer)
        if response.content:
            assert parsed is not None, (operation_id, response.status_code)
            assert not isinstance(parsed, dict | list), (operation_id, parsed)
            # what the generated model holds is what was answered
            assert normalized(parsed.to_dict()) == normalized(response.json()), operation_id
        self.parsed.append((operation_id, response.status_code))
        return response


def test_a_generated_client_parses_every_answer_of_a_workflow(
    generated: Any, served_document: ServedDocument, sw_writer: Caller, sim: Any, settings: Any
) -> None:
    parse = Parser(generated, served_document)
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    sim.configure({"settleSeconds": 0})
    org = f"/v2/orgs/{sw_writer.org.id}"
    # webhooks
    hook = parse(sw_writer.post(f"{org}/serenity/webhooks", {"url": "http://127.0.0.1:9/h"}))
    hook_path = f"{org}/serenity/webhooks/{hook.json()['id']}"
    parse(sw_writer.patch(hook_path, {"description": "ops"}))
    parse(sw_writer.post(f"{hook_path}/rotate-secret"))
    # brands, markets, jobs
    brands = brands_path(sw_writer)
    brand = parse(sw_writer.post(brands, {"name": "Acme", "baseUrl": "https://acme.example"}))
    parse(sw_writer.get(brands))
    parse(sw_writer.get(f"{brands}/{brand.json()['id']}"))
    serenity = serenity_path(sw_writer, brand.json()["id"])
    market = {"market": "US", "languageCode": "en", "async": True}
    job = parse(sw_writer.post(f"{serenity}/markets", market)).json()["jobId"]
    parse(sw_writer.get(f"{serenity}/jobs/{job}"))
    finish_chain(job)
    parse(sw_writer.get(f"{serenity}/jobs/{job}"))
    parse(sw_writer.get(f"{serenity}/jobs"))
    parse(sw_writer.get(f"{serenity}/markets"))
    parse(sw_writer.get(f"{org}/serenity/jobs?status=COMPLETED"))
    parse(sw_writer.get(f"{org}/serenity/jobs/{job}"))
    # an onboarding, cancelled
    onboardings = f"{org}/serenity/onboardings"
    accepted = parse(
        sw_writer.post(onboardings, {"brands": [{"name": "Bulk", "baseUrl": "https://b.example"}]})
    )
    parse(sw_writer.get(accepted["Location"]))
    parse(sw_writer.post(f"{accepted['Location']}/cancel"))
    parse(sw_writer.get(f"{onboardings}?status=CANCELLED"))
    # the events those made, their deliveries and attempts
    deliveries = parse(sw_writer.get(f"{hook_path}/deliveries")).json()["items"]
    assert deliveries
    parse(sw_writer.post(f"{hook_path}/test"))
    parse(sw_writer.get(f"{hook_path}/deliveries/{deliveries[0]['id']}/attempts"))
    # refusals
    parse(sw_writer.post(f"{accepted['Location']}/cancel"))  # 409 onboardingFinished
    parse(sw_writer.get(f"{org}/serenity/jobs?expand=steps"))  # 400 naming it
    parse(sw_writer.post(brands, {"name": "X", "semrushMarket": {"market": "XX"}}))
    parse(sw_writer.get(f"{serenity}/jobs/00000000-0000-4000-8000-000000000000"))
    # then every answer was parsed by its operation's generated code
    assert {status for _, status in parse.parsed} >= {200, 201, 202, 400, 404, 409}


def test_a_generated_client_parses_an_error_with_a_code_it_has_never_seen(generated: Any) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    envelope = models.ErrorEnvelope.from_dict(
        {"error": "someNewCode", "message": "A code added later.", "details": {"field": "x"}}
    )
    assert envelope.error == "someNewCode"
    job_error = models.JobError.from_dict(
        {"code": "someNewJobCode", "message": "x", "retryable": False}
    )
    assert job_error.code == "someNewJobCode"
    delivery = models.Delivery.from_dict(
        {
            "id": "5e0a7c31-2b9d-4f68-8c14-9d3e6a2b7f05",
            "eventId": "e2b7c9d4-8f13-5a6e-b0c2-7d4a1f9e3b68",
            "type": "brand.renamed",
            "status": "pending",
            "attempts": 0,
            "lastStatusCode": None,
            "lastError": None,
            "nextAttemptAt": None,
            "createdAt": "2026-01-15T09:30:00Z",
        }
    )
    assert delivery.type_ == "brand.renamed"
