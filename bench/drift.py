"""The drift measurements (SPEC §13.7).

- `plan`: an org of 1,000 brands with one market each (made by one onboarding with the
  simulator's limits out of the way), then the simulator at Semrush's limits (10 requests/s and
  10 in flight per token, 100 ms a call, P = 2 s) and the service at its defaults: a plan-only
  reconciliation of the org. Its upstream calls (the simulator's request log, the org's token)
  against 1,000 + family pages + 5, all reads; its wall time against calls ÷ (half the rate) +
  30 s; and another org's single async create, started once the plan has checked a third of
  the brands, against S + P + 2 s.
- `repair`: 10 of those markets' projects deleted behind the service's back, then a repairing
  reconciliation of those brands: its calls beyond the plan's listings against 40 + confirm
  reads, and no duplicate project (the simulator's state).

    .venv/bin/python -m bench.drift [count]

prints one JSON object with both figures.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from collections import Counter
from typing import Any

from bench.quota import _create_and_wait
from bench.scenarios import SETTLE_SECONDS, Tenant, _org_with_credential, started
from bench.stack import BenchStack, WorkerSetup
from tests.harness import wait_for

RATE = 10
CONCURRENCY = 10
LATENCY_MS = 100
PUBLISH_SECONDS = 2.0
PE = "/enterprise/projects/api"
PROJECT_READ = re.compile(r"/workspaces/[^/]+/projects/[^/]+$")


def _org_requests(stack: BenchStack, since: int) -> list[dict[str, Any]]:
    return stack.sim_requests()[since:]


def _reconcile(stack: BenchStack, who: Tenant, body: dict[str, Any]) -> dict[str, Any]:
    client = who.client_factory(stack)()
    try:
        path = f"/v2/orgs/{who.org_id}/serenity/reconciliations"
        accepted = client.post(path, body)
        if accepted.status != 202:
            raise RuntimeError(f"reconciliation refused: {accepted.status} {accepted.body}")
        return {"id": accepted.body["id"], "path": f"{path}/{accepted.body['id']}"}
    finally:
        client.close()


def _read(stack: BenchStack, who: Tenant, path: str) -> dict[str, Any]:
    client = who.client_factory(stack)()
    try:
        return dict(client.get(path).body)
    finally:
        client.close()


def _setup(stack: BenchStack, who: Tenant, count: int) -> None:
    """`count` brands with a US/en market, by one onboarding, the limits out of the way."""
    client = who.client_factory(stack)()
    try:
        answer = client.post(
            f"/v2/orgs/{who.org_id}/serenity/onboardings",
            {
                "brands": [
                    {
                        "name": f"drift {i}",
                        "baseUrl": f"https://drift-{i}.example",
                        "markets": [{"market": "US", "languageCode": "en"}],
                    }
                    for i in range(count)
                ]
            },
        )
        if answer.status != 202:
            raise RuntimeError(f"onboarding refused: {answer.status} {answer.body}")
    finally:
        client.close()

    def live() -> int:
        rows = stack.query(
            "SELECT count(*) AS n FROM serenity_market m JOIN serenity_brand b"
            " ON b.id = m.brand_id WHERE b.organization_id = %s AND m.status = 'live'",
            (who.org_id,),
        )
        return int(rows[0]["n"])

    wait_for(lambda: live() >= count, timeout=3600, what="the setup's markets", interval=1.0)


def drift(*, workers: WorkerSetup, count: int = 1000, repairs: int = 10) -> dict[str, Any]:
    stack = BenchStack(
        workers=workers,
        settle_seconds=SETTLE_SECONDS,
        env={
            "SEMRUSH_RATE_LIMIT_PER_SECOND": str(RATE),
            "SEMRUSH_CONCURRENCY_LIMIT": str(CONCURRENCY),
        },
    )
    with started(stack):
        token_a, token_b = f"drift-a-{uuid.uuid4().hex}", f"drift-b-{uuid.uuid4().hex}"
        stack.sim_add_token(token_a)
        stack.sim_add_token(token_b)
        stack.sim_config(settleSeconds=1, publishSeconds=0, latencyMs=0, rateLimitPerSecond=0)
        org_a = _org_with_credential(stack, token_a, rate=400, burst=40)
        org_b = _org_with_credential(stack, token_b)
        setup_began = time.monotonic()
        _setup(stack, org_a, count)
        setup_s = time.monotonic() - setup_began
        # Semrush's limits from here on, the org at the service's defaults.
        stack.query(
            "UPDATE serenity_organization SET semrush_rate_limit_per_second = NULL,"
            " semrush_rate_limit_burst = NULL, semrush_concurrency_limit = NULL WHERE id = %s",
            (org_a.org_id,),
        )
        stack.sim_config(
            settleSeconds=SETTLE_SECONDS,
            publishSeconds=PUBLISH_SECONDS,
            latencyMs=LATENCY_MS,
            rateLimitPerSecond=RATE,
            concurrencyLimit=CONCURRENCY,
        )
        time.sleep(2)  # the setup's bucket refills
        plan = _plan(stack, org_a, org_b, count)
        repair = _repair(stack, org_a, token_a, repairs)
    return {
        "count": count,
        "setup_seconds": round(setup_s, 1),
        "rate": RATE,
        "settle_seconds": SETTLE_SECONDS,
        "publish_seconds": PUBLISH_SECONDS,
        "plan": plan,
        "repair": repair,
    }


def _plan(stack: BenchStack, org_a: Tenant, org_b: Tenant, count: int) -> dict[str, Any]:
    since = len(stack.sim_requests())
    began = time.monotonic()
    started_plan = _reconcile(stack, org_a, {})
    second: dict[str, Any] = {}

    def second_org() -> None:
        wait_for(
            lambda: _read(stack, org_a, started_plan["path"])["counts"]["checked"] >= count // 3,
            timeout=1800,
            what="a third of the plan",
            interval=0.5,
        )
        second.update(_create_and_wait(stack, org_b, "second"))

    watcher = threading.Thread(target=second_org)
    watcher.start()
    wait_for(
        lambda: _read(stack, org_a, started_plan["path"])["status"] != "IN_PROGRESS",
        timeout=3600,
        what="the plan",
        interval=0.5,
    )
    wall = time.monotonic() - began
    watcher.join()
    document = _read(stack, org_a, started_plan["path"])
    # The simulator's log does not name the token: the second org's chain is in it too (its
    # writes, its status and confirm reads, and one family listing, counted here).
    calls = _org_requests(stack, since)
    methods = Counter(r["method"] for r in calls)
    family_pages = sum(1 for r in calls if r["path"].endswith("/family"))
    plan_calls = sum(
        1 for r in calls if r["method"] == "GET" and r["path"].endswith(("/projects", "/family"))
    )
    bound_calls = count + family_pages + 5
    bound_wall = plan_calls / (RATE / 2) + 30
    s_p = SETTLE_SECONDS + PUBLISH_SECONDS + 2
    return {
        "status": document["status"],
        "counts": document["counts"],
        "calls": plan_calls,
        "calls_bound": bound_calls,
        "methods_seen": dict(methods),
        "wall_seconds": round(wall, 1),
        "wall_bound": round(bound_wall, 1),
        "second_org_seconds": second.get("seconds"),
        "second_org_status": second.get("status"),
        "second_org_bound": s_p,
    }


def _repair(stack: BenchStack, org_a: Tenant, token_a: str, repairs: int) -> dict[str, Any]:
    import requests  # the simulator's own API, as Semrush's UI would call it

    rows = stack.query(
        "SELECT b.id AS brand, m.workspace_id AS ws, m.semrush_project_id AS project"
        " FROM serenity_market m JOIN serenity_brand b ON b.id = m.brand_id"
        " WHERE b.organization_id = %s AND m.status = 'live' ORDER BY b.id LIMIT %s",
        (org_a.org_id, repairs),
    )
    for row in rows:
        requests.delete(
            f"{stack.sim_url}{PE}/v1/workspaces/{row['ws']}/projects/{row['project']}",
            headers={"Authorization": f"Bearer {token_a}"},
            timeout=10,
        ).raise_for_status()
    since = len(stack.sim_requests())
    began = time.monotonic()
    started_repair = _reconcile(
        stack, org_a, {"brandIds": [str(r["brand"]) for r in rows], "repair": True}
    )
    wait_for(
        lambda: _read(stack, org_a, started_repair["path"])["status"] != "IN_PROGRESS",
        timeout=600,
        what="the repair",
        interval=0.5,
    )
    wall = time.monotonic() - began
    document = _read(stack, org_a, started_repair["path"])
    calls = _org_requests(stack, since)
    listings = [r for r in calls if r["method"] == "GET" and r["path"].endswith("/family")]
    plan_listings = len(rows) + len(listings)
    # A confirm read is a GET of one project (`…/workspaces/{ws}/projects/{id}`); the Project
    # Engine's prefix (`/enterprise/projects/api`) is in every path.
    confirm_reads = sum(1 for r in calls if r["method"] == "GET" and PROJECT_READ.search(r["path"]))
    repair_calls = len(calls) - plan_listings - confirm_reads
    by_call = Counter(
        f"{r['method']} {re.sub(r'[0-9a-f-]{36}|parent-[0-9a-f-]+', '{id}', r['path'])}"
        for r in calls
    )
    state = stack.sim_state()
    per_workspace = Counter(p["workspaceId"] for p in state["projects"])
    duplicates = sum(n - 1 for n in per_workspace.values() if n > 1)
    return {
        "status": document["status"],
        "counts": document["counts"],
        "markets": len(rows),
        "calls_without_plan_or_confirm": repair_calls,
        "calls_bound": 4 * len(rows),
        "confirm_reads": confirm_reads,
        "duplicate_projects": duplicates,
        "calls_by_route": dict(sorted(by_call.items())),
        "wall_seconds": round(wall, 1),
    }


if __name__ == "__main__":
    brands = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(json.dumps(drift(workers=WorkerSetup(), count=brands), indent=2))
