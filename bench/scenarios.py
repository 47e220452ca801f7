"""The measurements of issue 6, each on its own fresh stack. Every function returns a plain
dict (JSON) that `bench.report` renders."""

from __future__ import annotations

import json
import random
import signal
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.load import Call, LoadResult, latency_summary, run_load, warm_up
from bench.profile import Profiler
from bench.stack import BenchStack, WorkerSetup, cpu_by_component, cpu_delta, machine_info
from tests.harness import PYTHON, ROOT, ApiClient, Response, wait_for

# The settle time of issue 6 (aligned with the first backoff step).
SETTLE_SECONDS = 5.0

# Fifty distinct valid slices for the guard scenario (country, language).
GUARD_COUNTRIES = [
    "US",
    "GB",
    "DE",
    "FR",
    "ES",
    "IT",
    "NL",
    "BE",
    "AT",
    "CH",
    "SE",
    "NO",
    "DK",
    "FI",
    "PL",
    "CZ",
    "PT",
    "IE",
    "GR",
    "HU",
    "RO",
    "BG",
    "HR",
    "SI",
    "SK",
    "LT",
    "LV",
    "EE",
    "CA",
    "MX",
    "BR",
    "AR",
    "CL",
    "CO",
    "PE",
    "AU",
    "NZ",
    "JP",
    "KR",
    "IN",
    "SG",
    "MY",
    "TH",
    "ID",
    "PH",
    "VN",
    "ZA",
    "EG",
    "TR",
    "IL",
]


@dataclass
class Tenant:
    org_id: str
    token: str

    def client_factory(self, stack: BenchStack) -> Callable[[], ApiClient]:
        return lambda: stack.client(self.token, self.org_id, timeout=60.0)


@contextmanager
def started(stack: BenchStack) -> Iterator[BenchStack]:
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def tenant(stack: BenchStack) -> Tenant:
    org_id, token = stack.create_org_and_token()
    return Tenant(org_id, token)


def _brand_body(tag: str, *, market: tuple[str, str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"Bench {tag} {uuid.uuid4().hex[:10]}",
        "baseUrl": f"https://{tag.lower().replace(' ', '-')}.bench.example",
    }
    if market is not None:
        body["semrushMarket"] = {"market": market[0], "languageCode": market[1]}
        body["async"] = True
    return body


def create_bare_brands(stack: BenchStack, who: Tenant, count: int) -> list[str]:
    """`count` brands with a sub-workspace (sync bare create: the pointer is set on 201)."""

    def create(index: int) -> Call:
        return lambda c: c.post(c.brands_path, _brand_body(f"setup {index}"))

    result = run_load(
        make_client=who.client_factory(stack),
        calls=[create(i) for i in range(count)],
        clients=8,
        start_together=False,
    )
    ids = [s.body["id"] for s in result.samples if s.status == 201]
    if len(ids) != count:
        raise RuntimeError(f"setup: {len(ids)}/{count} brands created: {result.statuses}")
    return ids


def _post_market(brand_id: str, market: str, language: str) -> Call:
    body = {"market": market, "languageCode": language, "async": True}
    return lambda c: c.post(c.serenity_path(brand_id, "markets"), body)


def _post_brand(tag: str, *, market: tuple[str, str] | None = None) -> Call:
    body = _brand_body(tag, market=market)
    return lambda c: c.post(c.brands_path, body)


def _get_brand(brand_id: str) -> Call:
    return lambda c: c.get(c.brand_path(brand_id))


def _healthz(c: ApiClient) -> Response:
    return c.get("/healthz")


# --- 1. Accept path ----------------------------------------------------------------------------


def accept_path(
    *, workers: WorkerSetup, brands: int = 400, clients: int = 16, profile_dir: Path | None = None
) -> dict[str, Any]:
    """Async market create on `brands` brands (one each) at `clients` concurrent clients, against
    trivial routes of the same server.

    Phases (one stack): trivial routes alone; accepts alone with the workers paused (SIGSTOP:
    the API's own cost); accepts and brand reads shuffled together with the workers running
    the chains the accepts start (the headline ratio: both kinds meet the same moments); a
    profiled accept phase (py-spy on the API workers, workers paused, so the profile is the
    API's); the SQL of each request, counted in-process.
    """
    stack = BenchStack(workers=workers, settle_seconds=0.2)
    with started(stack):
        who = tenant(stack)
        make = who.client_factory(stack)
        brand_ids = create_bare_brands(stack, who, brands)
        poll_brand = create_bare_brands(stack, who, 1)[0]
        stack.wait_until_quiet(timeout=120)
        warm_up(make, _get_brand(brand_ids[0]), times=50)
        warm_up(make, _post_market(brand_ids[0], "US", "en"), times=1)
        stack.wait_until_quiet(timeout=120)
        targets = brand_ids[1:]

        healthz = run_load(make_client=make, calls=[_healthz] * len(targets), clients=clients)
        brand_get = run_load(
            make_client=make, calls=[_get_brand(b) for b in targets], clients=clients
        )
        with paused_workers(stack):
            alone = run_load(
                make_client=make,
                calls=[_post_market(b, "DE", "de") for b in targets],
                clients=clients,
            )
        stack.wait_until_quiet(timeout=300)
        mixed_calls: list[tuple[str, Call]] = [
            ("accept", _post_market(b, "FR", "fr")) for b in targets
        ] + [("brand_get", _get_brand(b)) for b in targets]
        random.Random(6).shuffle(mixed_calls)
        mixed = _run_tagged(make, mixed_calls, clients)
        stack.wait_until_quiet(timeout=300)
        profiler = Profiler(stack.api_worker_pids(), profile_dir, "api-accept")
        with paused_workers(stack), profiler:
            profiled = run_load(
                make_client=make,
                calls=[_post_market(b, "IT", "it") for b in targets],
                clients=clients,
            )
        stack.wait_until_quiet(timeout=300)
        queries = run_inprocess(
            stack,
            {
                "orgId": who.org_id,
                "token": who.token,
                "marketBrands": [brand_ids[0], *brand_ids[1:4]],
                "pollBrand": poll_brand,
            },
        )
        stack.wait_until_quiet(timeout=120)
        return {
            "workers": workers.describe(),
            "api": "gunicorn -w 2 --threads 4 (gthread)",
            "brands": brands,
            "clients": clients,
            "machine": machine_info(stack),
            "healthz": healthz.summary(),
            "brand_get": brand_get.summary(),
            "accept": alone.summary(),
            "accept_workers_paused": True,
            "mixed": {tag: r.summary() for tag, r in mixed.items()},
            "profiled_accept": profiled.summary(),
            "queries": queries,
            "profile": profiler.summary(),
            "violations": stack.violations(),
        }


@contextmanager
def paused_workers(stack: BenchStack) -> Iterator[None]:
    """SIGSTOP every Celery worker (and its pool) inside the block; SIGCONT after. Messages
    queue up in Redis meanwhile and run once the workers continue."""
    for worker in stack.workers:
        worker.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for worker in stack.workers:
            worker.signal(signal.SIGCONT)


def _run_tagged(
    make: Callable[[], ApiClient], calls: list[tuple[str, Call]], clients: int
) -> dict[str, LoadResult]:
    """Run shuffled calls of two kinds; split the samples by kind (a brand read answers the
    brand payload, an accept does not)."""
    result = run_load(make_client=make, calls=[c for _, c in calls], clients=clients)
    by_tag: dict[str, LoadResult] = {
        "accept": LoadResult(wall_seconds=result.wall_seconds, clients=clients),
        "brand_get": LoadResult(wall_seconds=result.wall_seconds, clients=clients),
    }
    for sample in result.samples:
        is_brand = isinstance(sample.body, dict) and "organizationId" in sample.body
        by_tag["brand_get" if is_brand else "accept"].samples.append(sample)
    return by_tag


def run_inprocess(stack: BenchStack, args: dict[str, Any]) -> dict[str, Any]:
    completed = subprocess.run(  # noqa: S603 - our own argv
        [PYTHON, "-m", "bench.inprocess", json.dumps(args)],
        env={**stack.env, "LOG_LEVEL": "WARNING"},
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"bench.inprocess failed:\n{completed.stdout}\n{completed.stderr}")
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


# --- 2. End-to-end overhead ----------------------------------------------------------------


def end_to_end(*, workers: WorkerSetup, runs: int = 20) -> dict[str, Any]:
    """Async brand create with a market, S = 5 s, default backoff: time until a poller (every
    100 ms) sees COMPLETED, minus S. Runs one at a time."""
    stack = BenchStack(workers=workers, settle_seconds=SETTLE_SECONDS)
    samples: list[dict[str, Any]] = []
    with started(stack):
        who = tenant(stack)
        client = who.client_factory(stack)()
        warm_up(who.client_factory(stack), _healthz, times=5)
        for index in range(runs):
            began = time.monotonic()
            answer = client.post(
                client.brands_path, _brand_body(f"e2e {index}", market=("US", "en"))
            )
            if answer.status != 202:
                raise RuntimeError(f"e2e: {answer.status} {answer.body}")
            brand_id, job_id = answer.body["id"], answer.body["jobId"]
            polls = 0
            while True:
                polls += 1
                seen = client.job(brand_id, job_id)
                status = seen.body.get("status") if isinstance(seen.body, dict) else None
                if status != "IN_PROGRESS":
                    break
                if time.monotonic() - began > 120:
                    raise RuntimeError(f"e2e: job {job_id} still in progress after 120 s")
                time.sleep(0.1)
            seen_at = time.monotonic() - began
            chain = stack.chain(job_id)
            samples.append(
                {
                    "status": status,
                    "result_status": (seen.body.get("result") or {}).get("status"),
                    "accept_ms": round(answer.elapsed * 1000, 1),
                    "seen_s": round(seen_at, 3),
                    "overhead_s": round(seen_at - SETTLE_SECONDS, 3),
                    "polls": polls,
                    "steps": _step_timeline(chain, began_wall=_wall_of(chain[0]["created_at"])),
                }
            )
        client.close()
        violations = stack.violations()
    overheads = [s["overhead_s"] for s in samples]
    return {
        "workers": workers.describe(),
        "settle_seconds": SETTLE_SECONDS,
        "backoff": "5,10,20,40,80",
        "runs": runs,
        "median_overhead_s": round(statistics.median(overheads), 3),
        "min_overhead_s": round(min(overheads), 3),
        "max_overhead_s": round(max(overheads), 3),
        "all_completed": all(s["status"] == "COMPLETED" for s in samples),
        "result_statuses": sorted({str(s["result_status"]) for s in samples}),
        "samples": samples,
        "violations": violations,
    }


def _wall_of(value: Any) -> float:
    return float(value.timestamp())


def _step_timeline(chain: list[dict[str, Any]], *, began_wall: float) -> list[dict[str, Any]]:
    """Each row: when it became due, started and finished, in seconds after the root's insert."""

    def rel(value: Any) -> float | None:
        return round(_wall_of(value) - began_wall, 3) if value is not None else None

    return [
        {
            "step": row["step"],
            "due": rel(row["run_after"]),
            "started": rel(row["started_at"]),
            "finished": rel(row["finished_at"]),
            "status": row["status"],
        }
        for row in chain
    ]


# --- 3. Fan-out ----------------------------------------------------------------------------


def fan_out(
    *,
    workers: WorkerSetup,
    count: int,
    clients: int = 32,
    profile_dir: Path | None = None,
    profile_tag: str = "",
    drain: bool = False,
    rate: float | None = None,
) -> dict[str, Any]:
    """`count` async brand creates with a market, sent as fast as `clients` threads can, S = 5 s:
    wall time from the first request to the last chain COMPLETED, divided by S. `rate`: the
    service's rate limit per credential (None: its default).

    With `drain`, the workers are paused while the requests are answered and the clock starts
    when they resume: what the workers alone take for `count` chains already accepted (the
    accept path's own cost left out)."""
    env = {"SEMRUSH_RATE_LIMIT_PER_SECOND": f"{rate:g}"} if rate else None
    stack = BenchStack(workers=workers, settle_seconds=SETTLE_SECONDS, env=env)
    with started(stack):
        who = tenant(stack)
        make = who.client_factory(stack)
        warm_up(make, _healthz, times=5)
        calls = [_post_brand(f"fan {i}", market=("US", "en")) for i in range(count)]
        profiler = Profiler(stack.worker_exec_pids(), profile_dir, f"workers-fanout{profile_tag}")
        accepted_box: dict[str, LoadResult] = {}

        def send() -> None:
            accepted_box["r"] = run_load(make_client=make, calls=calls, clients=clients)

        if drain:
            with paused_workers(stack):
                send()
            accepted_s = 0.0
        cpu_before = cpu_by_component(stack)
        began_wall = time.time()
        began = time.monotonic()
        with profiler:
            if not drain:
                sender = threading.Thread(target=send)
                sender.start()
                sender.join()
                accepted_s = time.monotonic() - began
            accepted = accepted_box["r"]

            def all_finished() -> bool:
                rows = stack.query(
                    "SELECT count(*) FILTER (WHERE status = 'IN_PROGRESS') AS open,"
                    " count(*) FILTER (WHERE step = 'createMarket' AND status <> 'IN_PROGRESS')"
                    " AS done FROM jobs_asyncjob"
                )
                return rows[0]["open"] == 0 and rows[0]["done"] >= count

            try:
                wait_for(all_finished, timeout=600, what="every chain to finish", interval=0.1)
            except Exception as exc:
                return {"count": count, "error": str(exc), "workers": workers.describe()}
            wall = time.monotonic() - began
        cpu = cpu_delta(cpu_before, cpu_by_component(stack))
        rows = stack.query(
            "SELECT id, root_id, step, status, position, run_after, started_at, finished_at,"
            " created_at, result FROM jobs_asyncjob"
        )
        violations = stack.violations()
    finished = sorted(
        _wall_of(r["finished_at"]) - began_wall for r in rows if r["step"] == "createMarket"
    )
    results = [r["result"] or {} for r in rows if r["step"] == "createMarket"]
    ok = sum(1 for r in rows if r["step"] == "createMarket" and r["status"] == "COMPLETED")
    created_201 = sum(1 for r in results if r.get("status") == 201)
    busy = sum(
        _wall_of(r["finished_at"]) - _wall_of(r["started_at"])
        for r in rows
        if r["started_at"] is not None and r["finished_at"] is not None
    )
    by_step: dict[str, list[float]] = {}
    for r in rows:
        if r["started_at"] is not None and r["finished_at"] is not None:
            by_step.setdefault(r["step"], []).append(
                _wall_of(r["finished_at"]) - _wall_of(r["started_at"])
            )
    created = {
        r["id"]: max(_wall_of(r["created_at"]), began_wall) for r in rows if r["root_id"] is None
    }
    # Per chain: from its accept (the root's insert) to its last step's end. Ideal: S.
    chain_latency = [
        _wall_of(r["finished_at"]) - created[r["root_id"]]
        for r in rows
        if r["step"] == "createMarket" and r["finished_at"] is not None and r["root_id"] in created
    ]
    last_accept = max(created.values()) - began_wall if created else 0.0
    return {
        "count": count,
        "rate": rate,
        "drain": drain,
        "workers": workers.describe(),
        "settle_seconds": SETTLE_SECONDS,
        "chain_s": {
            k.replace("_ms", "_s"): round(v / 1000, 2)
            for k, v in latency_summary(chain_latency).items()
        },
        "after_last_accept_s": round(wall - last_accept, 2),
        "clients": clients,
        "accept_s": round(accepted_s, 3),
        "accept": accepted.summary(),
        "wall_s": round(wall, 3),
        "wall_over_s": round(wall / SETTLE_SECONDS, 2),
        "completed": ok,
        "created_201": created_201,
        "failures": count - created_201,
        "step_rows": len(rows),
        "settle_reads": sum(1 for r in rows if r["step"] == "provisionWorkspace"),
        "busy_slot_s": round(busy, 2),
        "cpu_s": cpu,
        "step_ms": {k: latency_summary(v) for k, v in by_step.items()},
        "completion_curve": [round(x, 3) for x in finished],
        "profile": profiler.summary(),
        "violations": violations,
    }


# --- 4. Polling ----------------------------------------------------------------------------


def polling(*, workers: WorkerSetup, requests: int = 400) -> dict[str, Any]:
    """The job route on finished chains of 2 and 21 steps: query count (in-process) and latency
    (over HTTP, one client, the two chains alternating)."""
    stack = BenchStack(workers=workers, settle_seconds=0.2)
    with started(stack):
        who = tenant(stack)
        make = who.client_factory(stack)
        brands = create_bare_brands(stack, who, 5)
        stack.wait_until_quiet(timeout=60)
        inproc = run_inprocess(
            stack,
            {
                "orgId": who.org_id,
                "token": who.token,
                "marketBrands": brands[:4],
                "pollBrand": brands[4],
            },
        )
        stack.wait_until_quiet(timeout=60)
        roots = {2: inproc["chain_2_root"], 21: inproc["chain_21_root"]}
        client = make()
        for steps in (2, 21):
            for _ in range(30):
                client.job(brands[4], roots[steps])
        latencies: dict[int, list[float]] = {2: [], 21: []}
        for _ in range(requests):
            for steps in (2, 21):
                answer = client.job(brands[4], roots[steps])
                if answer.status != 200 or len(answer.body["steps"]) != steps:
                    raise RuntimeError(f"polling: {answer.status} {answer.body}")
                latencies[steps].append(answer.elapsed)
        client.close()
    out: dict[str, Any] = {"workers": workers.describe(), "requests": requests}
    for steps in (2, 21):
        out[f"steps_{steps}"] = {
            **latency_summary(latencies[steps]),
            "queries": inproc[f"poll_{steps}_steps_1"]["queries"],
            "statements": inproc[f"poll_{steps}_steps_1"]["statements"],
        }
    out["ratio_p50"] = round(out["steps_21"]["p50_ms"] / out["steps_2"]["p50_ms"], 3)
    out["ratio_p99"] = round(out["steps_21"]["p99_ms"] / out["steps_2"]["p99_ms"], 3)
    return out


# --- 5. Guard contention -------------------------------------------------------------------


def guard_contention(*, workers: WorkerSetup, concurrent: int = 50) -> dict[str, Any]:
    """`concurrent` async market creates (distinct slices) released together on one brand, vs
    one each on `concurrent` brands, with the workers paused during each burst."""
    stack = BenchStack(workers=workers, settle_seconds=0.2)
    with started(stack):
        who = tenant(stack)
        make = who.client_factory(stack)
        brands = create_bare_brands(stack, who, concurrent + 1)
        stack.wait_until_quiet(timeout=60)
        warm_up(make, _get_brand(brands[0]), times=20)
        countries = GUARD_COUNTRIES[:concurrent]
        # Workers paused: the first chain cannot finish (and free the brand) while the burst is
        # still being answered, so every later request meets the live attempt.
        with paused_workers(stack):
            one = run_load(
                make_client=make,
                calls=[_post_market(brands[0], country, "en") for country in countries],
                clients=concurrent,
            )
        stack.wait_until_quiet(timeout=120)
        with paused_workers(stack):
            many = run_load(
                make_client=make,
                calls=[_post_market(b, "US", "en") for b in brands[1 : concurrent + 1]],
                clients=concurrent,
            )
        stack.wait_until_quiet(timeout=120)
        violations = stack.violations()

    def describe(result: LoadResult) -> dict[str, Any]:
        errors: dict[str, int] = {}
        for sample in result.samples:
            if sample.status != 202 and isinstance(sample.body, dict):
                code = str(sample.body.get("error"))
                errors[code] = errors.get(code, 0) + 1
        ordered = sorted(s.latency * 1000 for s in result.samples)
        return {
            **result.summary(),
            "errors": errors,
            "latencies_ms": [round(x, 2) for x in ordered],
        }

    return {
        "workers": workers.describe(),
        "concurrent": concurrent,
        "one_brand": describe(one),
        "many_brands": describe(many),
        "violations": violations,
    }


# --- 6. Upstream quota and fairness (SPEC §10.6, §10.7) --------------------------------------


def _org_with_credential(
    stack: BenchStack, token: str, *, rate: float | None = None, burst: int | None = None
) -> Tenant:
    """A Serenity org with its own Semrush credential, its quota override when given (none:
    the service's limits apply), and a writer token."""
    completed = stack.manage(
        "create_org",
        "--name",
        f"Quota {uuid.uuid4().hex[:8]}",
        "--parent-workspace-id",
        stack.parent_id,
        "--serenity",
        "--semrush-token",
        token,
        "--json",
        check=True,
    )
    org_id = str(json.loads(completed.stdout)["id"])
    if rate is not None:
        stack.query(
            "UPDATE serenity_organization SET semrush_rate_limit_per_second = %s,"
            " semrush_rate_limit_burst = %s WHERE id = %s",
            (rate, burst, org_id),
        )
    return Tenant(org_id, stack.create_token(org_id))


def _chain_effective(stack: BenchStack, root_id: str) -> dict[str, Any]:
    rows = stack.query(
        "SELECT step, status, result, finished_at FROM jobs_asyncjob"
        " WHERE id = %s OR root_id = %s ORDER BY position",
        (root_id, root_id),
    )
    return rows[-1] if rows else {}


def _since(value: Any, origin: float) -> float | None:
    return None if value is None else round(_wall_of(value) - origin, 3)


def chain_timeline(stack: BenchStack, job_id: str, posted_wall: float) -> list[dict[str, Any]]:
    """A chain's steps, each with its claims and when it fell due, started and finished
    (seconds from `posted_wall`, the POST's wall time)."""
    return [
        {
            "step": r["step"],
            "status": r["status"],
            "run_count": r["run_count"],
            "due_s": _since(r["run_after"], posted_wall),
            "started_s": _since(r["started_at"], posted_wall),
            "finished_s": _since(r["finished_at"], posted_wall),
        }
        for r in stack.query(
            "SELECT step, status, run_count, run_after, started_at, finished_at"
            " FROM jobs_asyncjob WHERE id = %s OR root_id = %s ORDER BY position",
            (job_id, job_id),
        )
    ]


def quota(
    *,
    workers: WorkerSetup,
    count: int = 1000,
    rate: int = 50,
    burst: int = 1,
    clients: int = 16,
) -> dict[str, Any]:
    """`count` async brand creates with a market by org A against the simulator limited to `rate`
    requests/s per token, the org's limiter at the same rate; when half of A's chains are done,
    org B (its own credential) starts one async create. Wall time from A's first request to its
    last chain's end, against 1.15 x (upstream calls / rate) + S; B's chain from its POST to its
    end, against S + 2 s; 429s; permits (upstream requests) per second."""
    stack = BenchStack(workers=workers, settle_seconds=SETTLE_SECONDS)
    with started(stack):
        stack.sim_config(rateLimitPerSecond=rate)
        token_a, token_b = f"bench-a-{uuid.uuid4().hex}", f"bench-b-{uuid.uuid4().hex}"
        stack.sim_add_token(token_a)
        stack.sim_add_token(token_b)
        org_a = _org_with_credential(stack, token_a, rate=rate, burst=burst)
        org_b = _org_with_credential(stack, token_b, rate=rate, burst=burst)
        make_a = org_a.client_factory(stack)
        warm_up(make_a, _healthz, times=5)
        calls = [_post_brand(f"quota {i}", market=("US", "en")) for i in range(count)]
        box: dict[str, LoadResult] = {}
        second: dict[str, Any] = {}

        def completed_a() -> int:
            rows = stack.query(
                "SELECT count(*) AS n FROM jobs_asyncjob WHERE step = 'createMarket'"
                " AND status <> 'IN_PROGRESS' AND organization_id = %s",
                (org_a.org_id,),
            )
            return int(rows[0]["n"])

        def second_org() -> None:
            wait_for(lambda: completed_a() >= count // 2, timeout=900, what="half", interval=0.2)
            client = org_b.client_factory(stack)()
            try:
                posted = time.monotonic()
                second["posted_wall"] = time.time()
                answer = client.post(client.brands_path, _brand_body("second", market=("US", "en")))
                second["accept_status"] = answer.status
                job_id = answer.body["jobId"]
                brand_id = answer.body["id"]
                while time.monotonic() - posted < 120:
                    polled = client.job(brand_id, job_id)
                    if polled.body.get("status") != "IN_PROGRESS":
                        break
                    time.sleep(0.05)
                second["seconds"] = round(time.monotonic() - posted, 3)
                second["status"] = polled.body.get("status")
                second["result_status"] = (polled.body.get("result") or {}).get("status")
                second["a_completed_at_start"] = count // 2
                second["steps"] = chain_timeline(stack, job_id, second["posted_wall"])
            finally:
                client.close()

        began_wall = time.time()
        began = time.monotonic()
        sender = threading.Thread(
            target=lambda: box.setdefault(
                "r", run_load(make_client=make_a, calls=calls, clients=clients)
            )
        )
        watcher = threading.Thread(target=second_org)
        sender.start()
        watcher.start()
        sender.join()
        accepted_s = time.monotonic() - began

        def all_finished() -> bool:
            return completed_a() >= count

        try:
            wait_for(all_finished, timeout=1800, what="every chain to finish", interval=0.2)
        except Exception as exc:
            return {"count": count, "error": str(exc), "workers": workers.describe()}
        wall = time.monotonic() - began
        watcher.join(timeout=180)
        log = stack.sim_requests()
        rows = stack.query(
            "SELECT status, result, organization_id FROM jobs_asyncjob WHERE step = 'createMarket'"
        )
        deferrals = stack.query(
            "SELECT coalesce(sum(run_count), 0) AS claims, count(*) AS steps FROM jobs_asyncjob"
        )[0]
        violations = stack.violations()
    statuses = [e["status"] for e in log]
    calls_total = len(statuses)
    limited = sum(1 for s in statuses if s == 429)
    a_rows = [r for r in rows if str(r["organization_id"]) == org_a.org_id]
    created_201 = sum(1 for r in a_rows if (r["result"] or {}).get("status") == 201)
    per_second: dict[int, int] = {}
    for entry in log:
        when = datetime.fromisoformat(entry["at"].replace("Z", "+00:00")).timestamp() - began_wall
        per_second[int(when)] = per_second.get(int(when), 0) + 1
    horizon = max(per_second) + 1 if per_second else 0
    bound = 1.15 * (calls_total / rate) + SETTLE_SECONDS
    from bench.quota import operation_of

    by_operation: dict[str, int] = {}
    for entry in log:
        if entry["status"] != 429:
            name = operation_of(entry["method"], entry["path"])
            by_operation[name] = by_operation.get(name, 0) + 1
    return {
        "calls_per_brand": round((calls_total - limited) / (count + 1), 2),
        "calls_by_operation": by_operation,
        "count": count,
        "workers": workers.describe(),
        "rate_per_token": rate,
        "org_limit": {"rate": rate, "burst": burst},
        "settle_seconds": SETTLE_SECONDS,
        "clients": clients,
        "accept_s": round(accepted_s, 3),
        "accept": box["r"].summary() if "r" in box else None,
        "wall_s": round(wall, 3),
        "upstream_calls": calls_total,
        "ideal_s": round(calls_total / rate, 2),
        "bound_s": round(bound, 2),
        "within_bound": wall <= bound,
        "rate_limited_429": limited,
        "rate_limited_pct": round(100.0 * limited / calls_total, 3) if calls_total else 0.0,
        "completed": sum(1 for r in a_rows if r["status"] == "COMPLETED"),
        "created_201": created_201,
        "failed_chains": count - created_201,
        "claims": int(deferrals["claims"]),
        "step_rows": int(deferrals["steps"]),
        "second_org": {**second, "bound_s": SETTLE_SECONDS + 2.0},
        "second_org_within_bound": (second.get("seconds") or 1e9) <= SETTLE_SECONDS + 2.0
        and second.get("status") == "COMPLETED",
        "permits_per_second": [per_second.get(i, 0) for i in range(horizon)],
        "second_org_started_s": round(second.get("posted_wall", began_wall) - began_wall, 2),
        "violations": violations,
    }
