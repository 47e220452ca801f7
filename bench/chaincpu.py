"""CPU per chain, in one process: the accept and the two worker hops of an async brand create
with a market, run directly (Django's test client, `jobs.runner.run_step`) against a real stack's
PostgreSQL, Redis and simulator, with no Celery worker, no API server and no other load.

    .venv/bin/python -m bench.chaincpu --chains 300 --rounds 3
    .venv/bin/python -m bench.chaincpu --chains 50 --rounds 1 --calls   # deterministic

The fan-out's CPU table says how much each component costs under load on two shared cores, where
the machine's speed and the contention move every figure; this says what our own code costs per
chain, phase by phase: process CPU time (`time.process_time`), the CPU PostgreSQL, the simulator
and Redis spent meanwhile, and the SQL statements run. Each round adds `--chains` brands to the
same parent, so the family listing a create reads grows as in a fan-out. Prints one JSON line per
round.

CPU time still moves with this shared machine's speed (±30 % between runs of the same code), so
two versions of the code are compared with `--calls`: the Python and C function calls per chain,
which do not depend on the machine. `--cprofile FILE` profiles the phases (cProfile, wall clock),
`--profile FILE` samples the whole process with py-spy, `--show-sql` lists each phase's statements.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from bench.profile import PY_SPY
from bench.stack import (
    PRODUCTION_SETTINGS,
    _cpu_seconds,
    _postgres_pids,
    cpu_delta,
    cpu_probe_ms,
)
from tests.harness import PYTHON, ROOT, Stack, StackConfig

SETTLE_SECONDS = 2.0
WARM_UP_CHAINS = 3


def child(args: dict[str, Any]) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.db import connection
    from django.test import Client

    import provisioning.tasks  # noqa: F401 - registers the steps' handlers
    from jobs.models import AsyncJob, JobStatus
    from jobs.runner import run_step

    client = Client(SERVER_NAME="localhost")  # a host the stack's ALLOWED_HOSTS serves
    authorization = f"Bearer {args['token']}"
    path = f"/v2/orgs/{args['orgId']}/brands"
    statements = [0]
    by_origin: dict[str, int] = {}
    profiler = cProfile.Profile()

    def others() -> dict[str, float]:
        """CPU seconds so far of PostgreSQL (every `postgres` process), the simulator, Redis."""
        return {
            "postgresql": sum(_cpu_seconds(p) for p in _postgres_pids()),
            "simulator": _cpu_seconds(args["simulatorPid"]),
            "redis": _cpu_seconds(args["redisPid"]),
        }

    gc_spent = [0.0, 0.0]  # seconds in the cyclic collector; when the running one started

    def gc_clock(event: str, info: dict[str, Any]) -> None:
        if event == "start":
            gc_spent[1] = time.process_time()
        else:
            gc_spent[0] += time.process_time() - gc_spent[1]

    gc.callbacks.append(gc_clock)

    def count(execute: Any, sql: str, params: Any, many: bool, ctx: Any) -> Any:
        statements[0] += 1
        return execute(sql, params, many, ctx)

    def phase(name: str, items: list[Any], run: Any, out: dict[str, Any]) -> None:
        phase_name = name
        if out["round"] == 0:  # the warm-up: imports, caches and lazy loads, not measured
            for item in items:
                run(item)
            return
        if args["show_sql"]:
            from bench.inprocess import recorded_queries

            with recorded_queries() as first:
                run(items[0])
            out.setdefault("sql", {})[name] = [f"{q['from']}  {q['sql'][:90]}" for q in first]
            items = items[1:]
        statements[0] = 0
        calls = [0]

        def count_call(frame: Any, event: str, arg: Any) -> None:
            if event in ("call", "c_call"):
                calls[0] += 1
                if args["calls_inclusive"]:
                    seen = set()
                    caller = frame
                    while caller is not None:
                        name = caller.f_code.co_filename
                        if "/site-packages/" not in name and name.startswith(str(ROOT)):
                            key = f"{name[len(str(ROOT)) + 1 :]}:{caller.f_code.co_name}"
                            if key not in seen:
                                seen.add(key)
                                key = f"{phase_name[:6]} {key}"
                                by_origin[key] = by_origin.get(key, 0) + 1
                        caller = caller.f_back
                elif args["calls_by"]:
                    caller = frame
                    while caller is not None:
                        name = caller.f_code.co_filename
                        if "/site-packages/" not in name and name.startswith(str(ROOT)):
                            code = caller.f_code
                            key = f"{name[len(str(ROOT)) + 1 :]}:{code.co_name}:{caller.f_lineno}"
                            by_origin[key] = by_origin.get(key, 0) + 1
                            break
                        caller = caller.f_back

        others_before = others()
        gc_spent[0] = 0.0
        started = time.process_time()
        if args["calls"]:
            sys.setprofile(count_call)
        elif args["cprofile"]:
            profiler.enable()
        try:
            for item in items:
                run(item)
        finally:
            sys.setprofile(None)
            profiler.disable()
        spent = time.process_time() - started
        others_spent = cpu_delta(others_before, others())
        out[name] = {
            "cpu_ms_per_chain": round(spent * 1000 / len(items), 2),
            "gc_ms_per_chain": round(gc_spent[0] * 1000 / len(items), 2),
            "statements_per_chain": round(statements[0] / len(items), 2),
            **({"calls_per_chain": round(calls[0] / len(items))} if args["calls"] else {}),
            **{
                f"{other}_ms_per_chain": round(seconds * 1000 / len(items), 2)
                for other, seconds in others_spent.items()
            },
        }

    def hop(job_id: Any) -> None:
        run_step(job_id=str(job_id))

    for round_index in range(-1, args["rounds"]):
        out: dict[str, Any] = {"round": round_index + 1, "probe_ms": cpu_probe_ms()}
        roots: list[uuid.UUID] = []
        chains = args["chains"] if round_index >= 0 else WARM_UP_CHAINS

        def accept(
            index: int, round_index: int = round_index, roots: list[uuid.UUID] = roots
        ) -> None:
            body = {
                "name": f"Chain cpu {round_index} {index} {os.getpid()}",
                "baseUrl": f"https://cpu-{round_index}-{index}.bench.example",
                "semrushMarket": {"market": "US", "languageCode": "en"},
                "async": True,
            }
            response = client.post(
                path,
                json.dumps(body),
                content_type="application/json",
                HTTP_AUTHORIZATION=authorization,
            )
            assert response.status_code == 202, response.content
            roots.append(uuid.UUID(response.json()["jobId"]))

        with connection.execute_wrapper(count):
            phase("accept", list(range(chains)), accept, out)
            phase("hop 1: create-or-adopt + read", roots, hop, out)
            time.sleep(SETTLE_SECONDS + 0.5)
            repeats = list(
                AsyncJob.objects.filter(
                    root_id__in=roots, status=JobStatus.IN_PROGRESS, position=1
                ).values_list("id", flat=True)
            )
            assert len(repeats) == len(roots), (len(repeats), len(roots))
            AsyncJob.objects.filter(pk__in=repeats).update(run_after=django.utils.timezone.now())
            phase("hop 2: read + promote + create-market", repeats, hop, out)
        done = AsyncJob.objects.filter(pk__in=roots, status=JobStatus.COMPLETED).count()
        assert done == len(roots), f"{done}/{len(roots)} chains completed"
        if round_index < 0:
            # As a gunicorn or Celery worker does once it has loaded the application.
            from config.runtime import ready_to_serve

            ready_to_serve()
            continue
        phases = [out[k] for k in out if isinstance(out[k], dict) and k != "sql"]
        if args["calls"]:
            out["total_calls_per_chain"] = sum(p["calls_per_chain"] for p in phases)
        for key in ("cpu", "gc", "postgresql", "simulator", "redis"):
            out[f"total_{key}_ms_per_chain"] = round(
                sum(p[f"{key}_ms_per_chain"] for p in phases), 2
            )
        out["total_statements_per_chain"] = round(sum(p["statements_per_chain"] for p in phases), 2)
        out["completed"] = f"{done}/{len(roots)}"
        print(json.dumps(out), flush=True)
    if args["cprofile"]:
        profiler.dump_stats(args["cprofile"])
    if args["calls_by"] or args["calls_inclusive"]:
        chains = args["chains"] * args["rounds"]
        top = sorted(by_origin.items(), key=lambda kv: -kv[1])[: 60 if args["calls_by"] else 400]
        print(json.dumps({"calls_by_origin": [(k, round(v / chains)) for k, v in top]}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaincpu", description=__doc__)
    parser.add_argument("--chains", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--show-sql", action="store_true", help="list the statements of each phase's first chain"
    )
    parser.add_argument(
        "--calls",
        action="store_true",
        help="count Python and C function calls per chain (deterministic, unlike CPU time on a"
        " shared machine; the CPU figures are then inflated by the counting)",
    )
    parser.add_argument(
        "--calls-by", action="store_true", help="with --calls: by the line of ours that made them"
    )
    parser.add_argument(
        "--setup-sql", action="append", default=[], help="run on the database before (to try)"
    )
    parser.add_argument(
        "--calls-inclusive",
        action="store_true",
        help="with --calls: inclusive calls per chain by phase and by function of ours (every"
        " function of ours on the stack counts the call once)",
    )
    parser.add_argument("--cprofile", help="profile the phases with cProfile into this file")
    parser.add_argument("--profile", help="record the run with py-spy into this folded file")
    parsed = parser.parse_args(argv)
    stack = Stack(
        StackConfig(
            workers=0,
            api=False,
            beat=False,
            settle_seconds=SETTLE_SECONDS,
            settings=dict(PRODUCTION_SETTINGS),
        ),
        name="chaincpu",
    )
    with stack:
        org_id, token = stack.create_org_and_token()
        for statement in parsed.setup_sql:
            stack.query(statement)
        assert stack.sim is not None and stack.redis is not None
        payload = {
            "orgId": org_id,
            "token": token,
            "simulatorPid": stack.sim.pid,
            "redisPid": stack.redis.pid,
            **vars(parsed),
        }
        argv = [PYTHON, "-m", "bench.chaincpu", "--child", json.dumps(payload)]
        if parsed.profile:
            argv = [
                PY_SPY,
                "record",
                "--format",
                "raw",
                "-r",
                "250",
                "-o",
                parsed.profile,
                "--",
                *argv,
            ]
        completed = subprocess.run(  # noqa: S603 - our own argv
            argv,
            env=stack.env,
            cwd=str(ROOT),
            stderr=subprocess.DEVNULL,
            check=False,
        )
    return completed.returncode


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
    else:
        sys.exit(main())
