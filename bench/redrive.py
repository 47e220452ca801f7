"""SPEC §13.7's redrive bound: an onboarding of 300 brands with one market each, of which 30
fail (the simulator refuses 30 workspace creates), then its redrive: the redrive's upstream
calls (from its accept until the stack is quiet) against 7 x 30 + 10.

    .venv/bin/python -m bench.redrive [--count 300] [--failed 30] [--rate 20]

Prints the figures as JSON (the calls by operation included). The rate only shortens the run
(the bound counts calls, not time): the simulator and the service both limit to `--rate`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

from bench.quota import operation_of
from bench.stack import BenchStack, WorkerSetup
from tests.harness import wait_for

SETTLE_SECONDS = 2.0


def _poll(api: Any, path: str, timeout: float = 900.0) -> dict[str, Any]:
    document: dict[str, Any] = {}

    def ended() -> bool:
        document.update(api.get(f"{path}?limit=1").body)
        return document["status"] != "IN_PROGRESS"

    wait_for(ended, timeout=timeout, what="the onboarding's end", interval=1.0)
    return document


def redrive(*, count: int, failed: int, rate: int) -> dict[str, Any]:
    stack = BenchStack(
        workers=WorkerSetup(processes=1, pool="threads", concurrency=16),
        settle_seconds=SETTLE_SECONDS,
        env={"SEMRUSH_RATE_LIMIT_PER_SECOND": str(rate)},
    )
    with stack:
        stack.sim_config(rateLimitPerSecond=rate, concurrencyLimit=10)
        org_id, token = stack.create_org_and_token()
        api = stack.client(token, org_id, timeout=60)
        path = f"/v2/orgs/{org_id}/serenity/onboardings"
        brands = [
            {
                "name": f"Redrive {n}",
                "baseUrl": f"https://redrive-{n}.example",
                "markets": [{"market": "US", "languageCode": "en"}],
            }
            for n in range(count)
        ]
        stack.sim_fault(
            method="POST", path_regex="/child$", status=400, body={"message": "no"}, times=failed
        )
        began = time.monotonic()
        accepted = api.post(path, {"brands": brands})
        assert accepted.status == 202, accepted.body
        first = _poll(api, f"{path}/{accepted.body['onboardingId']}")
        first_seconds = time.monotonic() - began
        stack.wait_until_quiet(timeout=300)
        before = len(stack.sim_requests())
        began = time.monotonic()
        retried = api.post(f"{path}/{accepted.body['onboardingId']}/retry", {})
        assert retried.status == 202, retried.body
        second = _poll(api, f"{path}/{retried.body['onboardingId']}")
        redrive_seconds = time.monotonic() - began
        stack.wait_until_quiet(timeout=300)
        calls = stack.sim_requests()[before:]
        workspaces = [ws["title"] for ws in stack.sim_state()["workspaces"]]
        return {
            "count": count,
            "failed": failed,
            "rate": rate,
            "first_counts": first["counts"],
            "first_seconds": round(first_seconds, 1),
            "redrive_counts": second["counts"],
            "redrive_seconds": round(redrive_seconds, 1),
            "redrive_calls": len(calls),
            "redrive_calls_bound": 7 * failed + 10,
            "redrive_calls_by_operation": dict(
                Counter(operation_of(c["method"], c["path"]) for c in calls).most_common()
            ),
            "duplicate_workspaces": len(workspaces) - len(set(workspaces)),
            "brands": len(stack.brands()),
        }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.redrive", description=__doc__)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--failed", type=int, default=30)
    parser.add_argument("--rate", type=int, default=20)
    args = parser.parse_args()
    print(json.dumps(redrive(count=args.count, failed=args.failed, rate=args.rate), indent=1))


if __name__ == "__main__":
    main()
