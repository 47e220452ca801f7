"""Helpers shared by the chaos scenarios: requests through the API and the end-of-test checks
that every scenario makes (SPEC §6.4, §7; issue 5 acceptance)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tests.harness import ApiClient, Response, Stack, wait_for

MARKETS = [("US", "en"), ("DE", "de"), ("FR", "fr"), ("GB", "en"), ("ES", "es"), ("IT", "it")]


@dataclass
class Accepted:
    brand_id: str
    job_id: str
    response: Response


def accepted(response: Response, brand_id: str | None = None) -> Accepted:
    """Assert a 202 with its job; returns the brand and job ids."""
    assert response.status == 202, (response.status, response.body)
    body = response.body
    assert body["jobId"], body
    assert response.headers["Location"].endswith(f"/serenity/jobs/{body['jobId']}")
    return Accepted(brand_id=brand_id or body["id"], job_id=body["jobId"], response=response)


def brand_body(name: str, market: tuple[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "baseUrl": f"https://{name.lower().replace(' ', '-')}.example",
        **extra,
    }
    if market is not None:
        body["semrushMarket"] = {"market": market[0], "languageCode": market[1]}
    return body


def create_brand_async(api: ApiClient, name: str, market: tuple[str, str] | None) -> Accepted:
    return accepted(api.post(api.brands_path, brand_body(name, market, **{"async": True})))


def create_ready_brand(api: ApiClient, name: str) -> str:
    """A brand whose workspace exists (sync bare create: skip mode, pointer set at once)."""
    response = api.post(api.brands_path, brand_body(name))
    assert response.status == 201, (response.status, response.body)
    return str(response.body["id"])


def create_market_async(api: ApiClient, brand_id: str, market: tuple[str, str]) -> Accepted:
    response = api.post(
        api.serenity_path(brand_id, "markets"),
        {"market": market[0], "languageCode": market[1], "async": True},
    )
    return accepted(response, brand_id)


def poll_until_finished(api: ApiClient, brand_id: str, job_id: str, timeout: float = 60) -> Any:
    def finished() -> Any:
        response = api.job(brand_id, job_id)
        assert response.status == 200, (response.status, response.body)
        return response.body if response.body["status"] != "IN_PROGRESS" else None

    return wait_for(finished, timeout=timeout, what=f"job {job_id}", interval=0.25)


def assert_converged(
    stack: Stack, timeout: float = 90, audit: tuple[int, dict[str, Any]] | None = None
) -> None:
    """The end-of-test checks of every scenario: every job terminal, every attempt `ready` or
    `failed` with a reason (never `stale`: the dispatcher, not the stale sweep, must have
    recovered every job), `provisioning_audit` clean (exit 0), one project per slice upstream,
    markets pointing at existing projects, no reservation left behind. `audit`: the result of
    a `provisioning_audit` already run on the quiet stack (a soak's takes minutes)."""
    stack.wait_until_quiet(timeout=timeout)
    problems = stack.violations(audit)
    assert problems == [], "\n".join(problems)
    # Delivery recovered everything: nothing waited for the stale sweep (60 s here).
    stale = [a["id"] for a in stack.attempts() if a["reason"] == "stale"]
    assert stale == [], f"attempts reconciled as stale: {stale}"


def wait_in_flight_upstream(stack: Stack, method: str, suffix: str, timeout: float = 30) -> None:
    """Until a request `method …suffix` is in flight at the simulator (no status yet)."""

    def in_flight() -> bool:
        return any(
            r["method"] == method and r["path"].endswith(suffix) and r["status"] is None
            for r in stack.sim_requests()
        )

    wait_for(in_flight, timeout=timeout, what=f"{method} …{suffix} in flight")


def workspace_of(stack: Stack, brand_id: str) -> str | None:
    rows = stack.query(
        "SELECT semrush_sub_workspace_id FROM serenity_brand WHERE id = %s", (brand_id,)
    )
    return rows[0]["semrush_sub_workspace_id"] if rows else None


def projects_in(stack: Stack, workspace_id: str) -> list[dict[str, Any]]:
    return [p for p in stack.sim_state()["projects"] if p["workspaceId"] == workspace_id]


def sleep(seconds: float) -> None:
    time.sleep(seconds)
