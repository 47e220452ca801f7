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
import yaml
from rest_framework.test import APIClient

from tests.api.test_answers_conform import brands_path, finish_chain, serenity_path
from tests.conformance import ServedDocument
from tests.conftest import Caller

PACKAGE = "serenity_generated_client"


PREVIOUS_RELEASE = Path(__file__).with_name("openapi-2.3.0.yaml")
PREVIOUS_PACKAGE = "serenity_client_2_3_0"


def _generate(root: Path, document: dict[str, Any], package: str) -> Any:
    """The package openapi-python-client generates from `document`, imported."""
    (root / "openapi.json").write_text(json.dumps(document))
    (root / "config.yaml").write_text(f"package_name_override: {package}\n")
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
            package,
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
    return importlib.import_module(package)


def _forget(root: Path, package: str) -> None:
    sys.path.remove(str(root))
    for name in [m for m in sys.modules if m.split(".")[0] == package]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, django_db_blocker: Any) -> Iterator[Any]:
    """The package openapi-python-client generates from the served document, imported."""
    root = tmp_path_factory.mktemp("client")
    with django_db_blocker.unblock():
        document = APIClient().get("/api/schema/", {"format": "json"}).json()
    try:
        yield _generate(root, document, PACKAGE)
    finally:
        _forget(root, PACKAGE)


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The package generated from the previous release's document, kept in the suite as it
    was served (SPEC §13.6: yesterday's client keeps working)."""
    root = tmp_path_factory.mktemp("client-2.3.0")
    document = yaml.safe_load(PREVIOUS_RELEASE.read_text())
    assert document["info"]["version"] == "2.3.0"
    try:
        yield _generate(root, document, PREVIOUS_PACKAGE)
    finally:
        _forget(root, PREVIOUS_PACKAGE)


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


class GeneratedClient:
    """A generated client's own calls (its operation functions build the method, path, headers
    and body from its models), carried to the service by the test client and answered there;
    the client parses each answer with its own code (an undocumented status raises)."""

    def __init__(self, package: Any, caller: Caller) -> None:
        self.package = package
        self.caller = caller
        self.client = package.AuthenticatedClient(
            base_url="http://testserver",
            token=caller.token,
            raise_on_unexpected_status=True,
            httpx_args={"transport": httpx.MockTransport(self._forward)},
        )
        self.seen: list[tuple[str, int]] = []

    def _forward(self, request: httpx.Request) -> httpx.Response:
        headers = {
            f"HTTP_{name.upper().replace('-', '_')}": value
            for name, value in request.headers.items()
            if name.lower() in ("idempotency-key", "accept")
        }
        answer = self.caller.client.generic(
            request.method,
            request.url.raw_path.decode(),
            data=request.content,
            content_type=request.headers.get("content-type", "application/json"),
            **headers,
        )
        return httpx.Response(
            answer.status_code, content=answer.content, headers=dict(answer.headers)
        )

    def model(self, name: str, value: Any) -> Any:
        """A request body (or a query's enum) as the client holds it: its generated model."""
        model = getattr(importlib.import_module(f"{self.package.__name__}.models"), name)
        return model.from_dict(value) if isinstance(value, dict) else model(value)

    def __call__(self, operation_id: str, **arguments: Any) -> Any:
        module = operation_module(self.package, operation_id)
        response = module.sync_detailed(client=self.client, **arguments)
        if response.content:
            parsed = response.parsed
            assert parsed is not None, (operation_id, response.status_code)
            assert not isinstance(parsed, dict | list), (operation_id, parsed)
            # what the generated model holds is what was answered (new members included)
            assert normalized(parsed.to_dict()) == normalized(json.loads(response.content)), (
                operation_id
            )
        self.seen.append((operation_id, int(response.status_code)))
        return response


def test_a_client_generated_from_the_previous_release_runs_the_workflow(
    previous_release: Any, sw_writer: Caller, sim: Any, settings: Any
) -> None:
    """SPEC §13.6: the 2.3.0 document's client, unchanged, against this release."""
    call = GeneratedClient(previous_release, sw_writer)
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    sim.configure({"settleSeconds": 0})
    org = sw_writer.org.id
    # webhooks, with the default events
    hook = call(
        "webhookCreate",
        org_id=org,
        body=call.model("WebhookCreateRequest", {"url": "http://127.0.0.1:9/h"}),
    )
    assert hook.status_code == 201
    hook_id = hook.parsed.id
    call(
        "webhookUpdate",
        org_id=org,
        webhook_id=hook_id,
        body=call.model("PatchedWebhookUpdateRequest", {"description": "ops"}),
    )
    call("webhookRotateSecret", org_id=org, webhook_id=hook_id)
    # brands, markets, jobs
    brand = call(
        "brandCreate",
        org_id=org,
        body=call.model("BrandCreateRequest", {"name": "Acme", "baseUrl": "https://acme.example"}),
    )
    assert brand.status_code == 201
    brand_id = brand.parsed.id
    call("brandList", org_id=org)
    call("brandGet", org_id=org, brand_id=brand_id)
    accepted = call(
        "marketCreate",
        org_id=org,
        brand_id=brand_id,
        body=call.model(
            "MarketCreateRequest", {"market": "US", "languageCode": "en", "async": True}
        ),
    )
    assert accepted.status_code == 202
    job = accepted.parsed.job_id
    call("jobGet", org_id=org, brand_id=brand_id, job_id=job)
    finish_chain(str(job))
    done = call("jobGet", org_id=org, brand_id=brand_id, job_id=job)
    assert done.parsed.status == "COMPLETED"
    call("jobList", org_id=org, brand_id=brand_id)
    call("marketList", org_id=org, brand_id=brand_id)
    call("orgJobList", org_id=org, status=call.model("OrgJobListStatus", "COMPLETED"))
    call("orgJobGet", org_id=org, job_id=job)
    # an onboarding, cancelled
    onboarding = call(
        "onboardingCreate",
        org_id=org,
        body=call.model(
            "OnboardingCreateRequest",
            {"brands": [{"name": "Bulk", "baseUrl": "https://b.example"}]},
        ),
    )
    assert onboarding.status_code == 202
    onboarding_id = onboarding.parsed.onboarding_id
    call("onboardingGet", org_id=org, onboarding_id=onboarding_id)
    call("onboardingCancel", org_id=org, onboarding_id=onboarding_id)
    call("onboardingList", org_id=org, status=call.model("OnboardingListStatus", "CANCELLED"))
    # the events those made, their deliveries and attempts
    deliveries = call("webhookDeliveryList", org_id=org, webhook_id=hook_id).parsed.items
    assert deliveries
    call("webhookTest", org_id=org, webhook_id=hook_id)
    call("webhookAttemptList", org_id=org, webhook_id=hook_id, delivery_id=deliveries[0].id)
    # refusals, parsed as the error envelope
    assert call("onboardingCancel", org_id=org, onboarding_id=onboarding_id).status_code == 409
    refused = call(
        "brandCreate",
        org_id=org,
        body=call.model(
            "BrandCreateRequest",
            {
                "name": "X",
                "baseUrl": "https://x.example",
                "semrushMarket": {"market": "XX", "languageCode": "en"},
            },
        ),
    )
    assert refused.status_code == 400
    assert {status for _, status in call.seen} >= {200, 201, 202, 400, 409}
