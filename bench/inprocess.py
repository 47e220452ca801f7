"""SQL counted in-process: the same code as the server, through Django's test client, against a
stack's database and broker. Run by `bench.run` as a subprocess with the stack's environment:

    python -m bench.inprocess '{"orgId": ..., "token": ..., "marketBrands": [...], ...}'

Prints one JSON object: for each request, its status, the number of SQL statements and the list
of statements, each attributed to the innermost frame of this project's code that issued it
(`file:function:line`), so that whoever cuts queries knows where each one comes from.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
OUR_PACKAGES = ("serenity/", "provisioning/", "jobs/", "config/")


def _our_frame() -> str:
    for frame in reversed(traceback.extract_stack()[:-2]):
        try:
            relative = Path(frame.filename).resolve().relative_to(ROOT).as_posix()
        except ValueError:
            continue
        if relative.startswith(OUR_PACKAGES):
            return f"{relative}:{frame.name}:{frame.lineno}"
    return "?"


@contextmanager
def recorded_queries() -> Iterator[list[dict[str, Any]]]:
    """Every statement run on the default connection inside the block, with its origin."""
    from django.db import connection

    statements: list[dict[str, Any]] = []

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, ctx: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, ctx)
        finally:
            statements.append(
                {
                    "sql": " ".join(str(sql).split()),
                    "ms": round((time.perf_counter() - started) * 1000, 3),
                    "from": _our_frame(),
                }
            )

    with connection.execute_wrapper(wrapper):
        yield statements


def _request(
    client: Any, method: str, path: str, token: str, body: Any = None
) -> tuple[int, Any, list[dict[str, Any]]]:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    with recorded_queries() as statements:
        if method == "GET":
            response = client.get(path, **headers)
        else:
            response = client.generic(
                method, path, json.dumps(body), content_type="application/json", **headers
            )
    try:
        payload = json.loads(response.content) if response.content else None
    except ValueError:
        payload = None
    return response.status_code, payload, statements


def _build_chain(*, organization_id: str, brand_id: str, settle_reads: int) -> str:
    """A finished provisioning chain of `settle_reads` provision-workspace rows and a
    create-market row, written by the real job services (publishing disabled: no worker must
    run it). Returns the root id."""
    from jobs import services
    from jobs.models import JobStatus, JobStep, JobType

    with mock.patch("jobs.services.publish_job"):
        root = services.job_chains_create(
            [
                services.ChainSpec(
                    organization_id=organization_id,  # type: ignore[arg-type]
                    brand_id=brand_id,  # type: ignore[arg-type]
                    job_type=JobType.PROVISION_WORKSPACE,
                    first=services.StepSpec(JobStep.PROVISION_WORKSPACE, {}),
                    then=services.StepSpec(JobStep.CREATE_MARKET, {}),
                )
            ]
        )[0]
        current = root
        for _ in range(settle_reads - 1):
            claimed = services.job_claim(job_id=current.id)
            assert claimed is not None and claimed.claim_token is not None
            repeated = services.job_complete_and_repeat(
                job=claimed,
                claim_token=claimed.claim_token,
                result={"workspaceStatus": "notReady"},
                delay_seconds=0,
            )
            assert repeated is not None
            current = repeated
        claimed = services.job_claim(job_id=current.id)
        assert claimed is not None and claimed.claim_token is not None
        successor_id = services.job_complete_and_release_next(
            job=claimed,
            claim_token=claimed.claim_token,
            result={"workspaceStatus": "ready"},
        )
        assert successor_id is not None
        successor = services.job_claim(job_id=successor_id)
        assert successor is not None
        services.job_finish(
            job=successor,
            claim_token=successor.claim_token,
            status=JobStatus.COMPLETED,
            result={"status": 201, "body": {}, "outcome": "succeeded"},
        )
    return str(root.id)


def main(args: dict[str, Any]) -> dict[str, Any]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.conf import settings
    from django.test import Client

    # As a request to the stack's server: a host it allows (the test client's `testserver` is
    # one only under the test runner).
    host = next((h.lstrip(".") for h in settings.ALLOWED_HOSTS if h != "*"), "localhost")
    client = Client(HTTP_HOST=host)
    org = args["orgId"]
    token = args["token"]
    brands = f"/v2/orgs/{org}/brands"
    out: dict[str, Any] = {}

    def measure(name: str, method: str, path: str, body: Any = None) -> Any:
        from jobs.models import AsyncJob

        status, payload, statements = _request(client, method, path, token, body)
        if status >= 400:
            # A refused request runs no statement worth counting: the figure would be a lie.
            raise RuntimeError(f"{name}: {method} {path} answered {status}: {payload}")
        out[name] = {"status": status, "queries": len(statements), "statements": statements}
        if status == 202 and isinstance(payload, dict):
            # The publish after commit is part of the request: was the message sent?
            out[name]["published"] = AsyncJob.objects.filter(
                pk=payload["jobId"], published_at__isnull=False
            ).exists()
        return payload

    trivial_brand = args["marketBrands"][0]
    # Warm-up: the token's once-a-minute `last_used_at` write, the language catalogue cache.
    for _ in range(3):
        _request(client, "GET", f"{brands}/{trivial_brand}", token)
    measure("healthz", "GET", "/healthz")
    measure("brand_get", "GET", f"{brands}/{trivial_brand}")
    for index, brand_id in enumerate(args["marketBrands"][1:4]):
        measure(
            f"market_create_async_{index}",
            "POST",
            f"{brands}/{brand_id}/serenity/markets",
            {"market": "US", "languageCode": "en", "async": True},
        )
    for index in range(2):
        measure(
            f"brand_create_async_market_{index}",
            "POST",
            brands,
            {
                "name": f"Bench inprocess {time.time_ns()}",
                "baseUrl": "https://bench.example",
                "semrushMarket": {"market": "US", "languageCode": "en"},
                "async": True,
            },
        )
    # Polling: finished chains of 2 and 21 steps on one brand (SPEC §13.7).
    poll_brand = args["pollBrand"]
    for steps in (2, 21):
        root = _build_chain(organization_id=org, brand_id=poll_brand, settle_reads=steps - 1)
        out[f"chain_{steps}_root"] = root
        for repeat in range(2):
            payload = measure(
                f"poll_{steps}_steps_{repeat}",
                "GET",
                f"{brands}/{poll_brand}/serenity/jobs/{root}",
            )
        out[f"poll_{steps}_steps_payload"] = payload
    return out


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    sys.stdout.write(json.dumps(result) + "\n")
