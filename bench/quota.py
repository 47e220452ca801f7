"""SPEC §11.6's quota measurements: an onboarding burst at Semrush's published limits (10
requests/s and 10 calls in flight per token, 100 ms per call, S = 5 s, stale threshold 60 s)
with a second org's create mid-run, on its own credential and on the first org's; and 1000
single creates at 50 requests/s for the calls each brand costs."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from typing import Any

from bench.load import LoadResult, run_load, warm_up
from bench.scenarios import (
    SETTLE_SECONDS,
    Tenant,
    _brand_body,
    _healthz,
    _org_with_credential,
    _post_brand,
    chain_timeline,
    started,
)
from bench.stack import BenchStack, WorkerSetup
from tests.harness import wait_for

# P of SPEC §12.5: how long the simulator takes to publish a project (confirmed by a read).
PUBLISH_SECONDS = 2.0

# Operations by the shape of their upstream path (the simulator logs method and path).
_OPERATIONS = (
    ("GET", re.compile(r"/family$"), "family"),
    ("POST", re.compile(r"/child$"), "create workspace"),
    ("GET", re.compile(r"/status$"), "status read"),
    ("GET", re.compile(r"/projects$"), "list projects"),
    ("POST", re.compile(r"/projects$"), "create project"),
    ("PATCH", re.compile(r"/projects/[^/]+$"), "tracked URL"),
    ("GET", re.compile(r"/projects/[^/]+$"), "confirm read"),
    ("POST", re.compile(r"/publish$"), "publish"),
    ("GET", re.compile(r"/languages$"), "languages"),
)


def operation_of(method: str, path: str) -> str:
    for wanted, pattern, name in _OPERATIONS:
        if method == wanted and pattern.search(path):
            return name
    return f"{method} other"


def _at(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(entry["at"].replace("Z", "+00:00")).timestamp()


def in_flight(log: list[dict[str, Any]], origin: float) -> tuple[int, list[int]]:
    """The most calls in flight at once, overall and per second since `origin`, from each
    entry's arrival (`at`) and `durationMs`."""
    events: list[tuple[float, int]] = []
    for entry in log:
        start = _at(entry) - origin
        events.append((start, 1))
        events.append((start + (entry.get("durationMs") or 0.0) / 1000.0, -1))
    events.sort(key=lambda e: (e[0], e[1]))
    peak, current = 0, 0
    per_second: dict[int, int] = {}
    for when, delta in events:
        current += delta
        peak = max(peak, current)
        second = max(int(when), 0)
        per_second[second] = max(per_second.get(second, 0), current)
    horizon = max(per_second) + 1 if per_second else 0
    return peak, [per_second.get(i, 0) for i in range(horizon)]


def _finished(stack: BenchStack, org_id: str) -> int:
    rows = stack.query(
        "SELECT count(*) AS n FROM jobs_asyncjob WHERE step = 'createMarket'"
        " AND status <> 'IN_PROGRESS' AND organization_id = %s",
        (org_id,),
    )
    return int(rows[0]["n"])


def _create_and_wait(stack: BenchStack, who: Tenant, tag: str) -> dict[str, Any]:
    """One async create with a market, polled to its end: seconds, status, its steps."""
    client = who.client_factory(stack)()
    try:
        posted = time.monotonic()
        posted_wall = time.time()
        answer = client.post(client.brands_path, _brand_body(tag, market=("US", "en")))
        job_id, brand_id = answer.body["jobId"], answer.body["id"]
        polled = answer
        while time.monotonic() - posted < 120:
            polled = client.job(brand_id, job_id)
            if polled.body.get("status") != "IN_PROGRESS":
                break
            time.sleep(0.05)
        return {
            "seconds": round(time.monotonic() - posted, 3),
            "posted_wall": posted_wall,
            "accept_status": answer.status,
            "status": polled.body.get("status"),
            "result_status": (polled.body.get("result") or {}).get("status"),
            "steps": chain_timeline(stack, job_id, posted_wall),
        }
    finally:
        client.close()


def published_limits(
    *,
    workers: WorkerSetup,
    count: int = 300,
    shared: bool = False,
    rate: int = 10,
    concurrency: int = 10,
    latency_ms: int = 100,
    stale_seconds: float = 60.0,
    warm: int = 3,
    clients: int = 8,
    via_onboarding: bool = False,
    publish_seconds: float = PUBLISH_SECONDS,
) -> dict[str, Any]:
    """`count` async brand creates with a market by org A at the simulator's published limits
    (`rateLimitPerSecond` and `concurrencyLimit` per token, `latencyMs` per call), the service
    at its defaults; `warm` creates first so that the parent's settle time is learned (steady
    state). When half of A's chains are done, org B (its own credential, or A's with `shared`)
    starts one async create. Wall from A's first burst request to its last chain's end against
    1.05 x (calls ÷ rate) + S + P (SPEC §13.7; P: the simulator's `publishSeconds`, SPEC §12.5:
    every publish is confirmed before its chain ends); calls per brand by operation; 429s;
    calls in flight.
    `via_onboarding`: the `count` brands arrive in one bulk onboarding request (SPEC §11.2),
    whose calls (the second org's own chain's taken out) are held against 5.5 x N + 10."""
    stack = BenchStack(
        workers=workers,
        settle_seconds=SETTLE_SECONDS,
        env={
            "SEMRUSH_RATE_LIMIT_PER_SECOND": str(rate),
            "SEMRUSH_CONCURRENCY_LIMIT": str(concurrency),
        },
        settings={
            "SERENITY_PROVISIONING_STALE_AFTER_SECONDS": stale_seconds,
            "SERENITY_STALE_SWEEP_INTERVAL_SECONDS": 10,
        },
    )
    with started(stack):
        stack.sim_config(
            rateLimitPerSecond=rate,
            concurrencyLimit=concurrency,
            latencyMs=latency_ms,
            publishSeconds=publish_seconds,
        )
        token_a, token_b = f"bench-a-{uuid.uuid4().hex}", f"bench-b-{uuid.uuid4().hex}"
        stack.sim_add_token(token_a)
        stack.sim_add_token(token_b)
        org_a = _org_with_credential(stack, token_a)
        org_b = _org_with_credential(stack, token_a if shared else token_b)
        make_a = org_a.client_factory(stack)
        warm_up(make_a, _healthz, times=5)
        warmers = [
            threading.Thread(target=_create_and_wait, args=(stack, org_a, f"warm {i}"))
            for i in range(warm)
        ]
        for thread in warmers:
            thread.start()
        for thread in warmers:
            thread.join()
        calls = [_post_brand(f"onboard {i}", market=("US", "en")) for i in range(count)]
        box: dict[str, LoadResult] = {}
        second: dict[str, Any] = {}

        def second_org() -> None:
            wait_for(
                lambda: _finished(stack, org_a.org_id) >= warm + count // 2,
                timeout=900,
                what="half",
                interval=0.2,
            )
            second.update(_create_and_wait(stack, org_b, "second"))

        began_wall = time.time()
        began = time.monotonic()

        def onboard() -> None:
            client = make_a()
            try:
                answer = client.post(
                    f"/v2/orgs/{org_a.org_id}/serenity/onboardings",
                    {
                        "brands": [
                            {
                                "name": f"onboard {i}",
                                "baseUrl": f"https://onboard-{i}.example",
                                "markets": [{"market": "US", "languageCode": "en"}],
                            }
                            for i in range(count)
                        ]
                    },
                )
                box["onboarding"] = answer  # type: ignore[assignment]
            finally:
                client.close()

        sender = threading.Thread(
            target=onboard
            if via_onboarding
            else lambda: box.setdefault(
                "r", run_load(make_client=make_a, calls=calls, clients=clients)
            )
        )
        watcher = threading.Thread(target=second_org)
        sender.start()
        watcher.start()
        sender.join()
        accepted_s = time.monotonic() - began
        try:
            wait_for(
                lambda: _finished(stack, org_a.org_id) >= warm + count,
                timeout=1800,
                what="every chain to finish",
                interval=0.2,
            )
        except Exception as exc:
            return {"count": count, "shared": shared, "error": str(exc)}
        wall = time.monotonic() - began
        watcher.join(timeout=180)
        log = [e for e in stack.sim_requests() if _at(e) >= began_wall]
        rows = stack.query(
            "SELECT j.status, j.result FROM jobs_asyncjob j WHERE j.step = 'createMarket'"
            " AND j.organization_id = %s",
            (org_a.org_id,),
        )
        stale = stack.query(
            "SELECT count(*) AS n FROM provisioning_provisioningattempt WHERE reason = 'stale'"
        )[0]["n"]
        second_workspace = stack.query(
            "SELECT semrush_sub_workspace_id AS ws FROM serenity_brand WHERE organization_id = %s",
            (org_b.org_id,),
        )
        violations = stack.violations()
    calls_total = len(log)
    limited = sum(1 for e in log if e["status"] == 429)
    created = sum(1 for r in rows if (r["result"] or {}).get("status") == 201)
    by_operation = Counter(operation_of(e["method"], e["path"]) for e in log if e["status"] != 429)
    brands = count + 1  # the burst and the second org's create
    per_second: dict[int, int] = {}
    for entry in log:
        when = int(max(_at(entry) - began_wall, 0))
        per_second[when] = per_second.get(when, 0) + 1
    horizon = max(per_second) + 1 if per_second else 0
    peak, flight = in_flight(log, began_wall)
    bound = 1.05 * (calls_total / rate) + SETTLE_SECONDS + publish_seconds
    second_bound = SETTLE_SECONDS + publish_seconds + 2.0
    # The second org's chain: its family and create (on the parent) and every call naming its
    # workspace.
    ws = (second_workspace[0]["ws"] if second_workspace else None) or "-"
    second_calls = 2 + sum(1 for e in log if ws in e["path"])
    onboarding_calls = calls_total - limited - second_calls
    onboarding = box.get("onboarding")
    return {
        "via_onboarding": via_onboarding,
        "onboarding_accept_status": getattr(onboarding, "status", None),
        "onboarding_calls": onboarding_calls,
        "onboarding_calls_bound": int(5.5 * count + 10),
        "count": count,
        "shared": shared,
        "workers": workers.describe(),
        "rate_per_token": rate,
        "concurrency_per_token": concurrency,
        "latency_ms": latency_ms,
        "stale_seconds": stale_seconds,
        "settle_seconds": SETTLE_SECONDS,
        "publish_seconds": publish_seconds,
        "warm": warm,
        "clients": clients,
        "accept_s": round(accepted_s, 3),
        "accept": box["r"].summary() if "r" in box else None,
        "wall_s": round(wall, 3),
        "upstream_calls": calls_total,
        "bound_s": round(bound, 2),
        "within_bound": wall <= bound,
        "rate_limited_429": limited,
        "rate_limited_pct": round(100.0 * limited / calls_total, 3) if calls_total else 0.0,
        "created_201": created - warm,
        "failed_chains": count + warm - created,
        "stale_attempts": int(stale),
        "calls_per_brand": round((calls_total - limited) / brands, 2),
        "calls_by_operation": dict(by_operation.most_common()),
        "peak_in_flight": peak,
        "in_flight_per_second": flight,
        "calls_per_second": [per_second.get(i, 0) for i in range(horizon)],
        "second_org": {**second, "bound_s": second_bound},
        "second_org_within_bound": (second.get("seconds") or 1e9) <= second_bound
        and second.get("status") == "COMPLETED",
        "second_org_started_s": round(second.get("posted_wall", began_wall) - began_wall, 2),
        "violations": violations,
    }
