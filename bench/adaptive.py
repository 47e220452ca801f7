"""SPEC §13.7's adaptive-rate and credential-hold measurements, on a stack of their own.

`adaptive_rate`: the simulator limits the token to 4 requests/s with no `Retry-After` (another
client of the account takes the rest) while the service is configured at 10/s; a 150-brand
onboarding: after its first 30 s, the share of calls answered 429 and the calls per second used.
Then the simulator goes back to 10/s and a second 150-brand onboarding starts: how long until a
10 s window of at least 8.5 calls/s ends, counted from the change.

`credential_hold`: Semrush refuses the credential (401 to every call) for 60 s in the middle of a
100-item onboarding: items failed, the onboarding's time against the same run without the hold
plus 60 s and the re-check interval, duplicates upstream.

    python -m bench.adaptive [adaptive|hold|all]
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections import Counter
from functools import partial
from typing import Any

from bench.quota import _at
from bench.scenarios import SETTLE_SECONDS, _org_with_credential, started
from bench.stack import BenchStack, WorkerSetup
from tests.harness import wait_for

WINDOW_SECONDS = 10.0


def _onboard(stack: BenchStack, tenant: Any, count: int, tag: str) -> str:
    client = tenant.client_factory(stack)()
    try:
        answer = client.post(
            f"/v2/orgs/{tenant.org_id}/serenity/onboardings",
            {
                "brands": [
                    {
                        "name": f"{tag} {i}",
                        "baseUrl": f"https://{tag}-{i}.example",
                        "markets": [{"market": "US", "languageCode": "en"}],
                    }
                    for i in range(count)
                ]
            },
        )
        assert answer.status == 202, answer.body
        return str(answer.body["onboardingId"])
    finally:
        client.close()


def _ended(stack: BenchStack, onboarding_id: str) -> dict[str, Any] | None:
    rows = stack.query(
        "SELECT total, completed, failed, cancelled FROM provisioning_onboarding WHERE id = %s",
        (onboarding_id,),
    )
    if not rows:
        return None
    row = rows[0]
    return row if row["completed"] + row["failed"] + row["cancelled"] >= row["total"] else None


def _phase(log: list[dict[str, Any]], start: float, end: float) -> dict[str, Any]:
    calls = [e for e in log if start <= _at(e) < end]
    limited = sum(1 for e in calls if e["status"] == 429)
    seconds = max(end - start, 1e-9)
    return {
        "seconds": round(seconds, 1),
        "calls": len(calls),
        "429": limited,
        "share_429": round(limited / len(calls), 4) if calls else None,
        "answered_per_s": round((len(calls) - limited) / seconds, 2),
    }


def _first_window(log: list[dict[str, Any]], since: float, rate: float) -> float | None:
    """Seconds from `since` to the end of the first 10 s window with at least `rate` calls/s
    answered (not 429)."""
    times = sorted(_at(e) for e in log if _at(e) >= since and e["status"] != 429)
    for i, first in enumerate(times):
        j = i
        while j < len(times) and times[j] < first + WINDOW_SECONDS:
            j += 1
        if (j - i) / WINDOW_SECONDS >= rate:
            return round(first + WINDOW_SECONDS - since, 1)
    return None


def _stack(workers: WorkerSetup) -> BenchStack:
    return BenchStack(
        workers=workers,
        settle_seconds=SETTLE_SECONDS,
        env={"SEMRUSH_RATE_LIMIT_PER_SECOND": "10", "SEMRUSH_CONCURRENCY_LIMIT": "10"},
        settings={"SERENITY_PROVISIONING_STALE_AFTER_SECONDS": 600},
    )


def adaptive_rate(*, workers: WorkerSetup, count: int = 150) -> dict[str, Any]:
    stack = _stack(workers)
    with started(stack):
        stack.sim_config(
            rateLimitPerSecond=4, retryAfterSeconds=None, latencyMs=100, publishSeconds=2.0
        )
        token = f"bench-adaptive-{uuid.uuid4().hex}"
        stack.sim_add_token(token)
        tenant = _org_with_credential(stack, token)
        began = time.time()
        first = _onboard(stack, tenant, count, "slow")
        wait_for(lambda: _ended(stack, first), timeout=1800, what="the 4/s onboarding", interval=1)
        ended = time.time()
        stack.sim_config(rateLimitPerSecond=10)
        changed = time.time()
        second = _onboard(stack, tenant, count, "fast")
        wait_for(
            lambda: _ended(stack, second), timeout=1800, what="the 10/s onboarding", interval=1
        )
        log = stack.sim_requests()
        return {
            "count": count,
            "at_4": {
                "onboarding_s": round(ended - began, 1),
                "ended": _ended(stack, first),
                "after_30s": _phase(log, began + 30, ended),
                "first_30s": _phase(log, began, began + 30),
            },
            "back_at_10": {
                "window_8_5_ends_s": _first_window(log, changed, 8.5),
                "onboarding_s": round(time.time() - changed, 1),
                "ended": _ended(stack, second),
                "first_120s": _phase(log, changed, changed + 120),
            },
        }


def credential_hold(
    *, workers: WorkerSetup, count: int = 100, hold: float = 60.0, recheck: float = 60.0
) -> dict[str, Any]:
    stack = _stack(workers)
    with started(stack):
        stack.sim_config(rateLimitPerSecond=10, concurrencyLimit=10, latencyMs=100)
        results: dict[str, Any] = {"count": count, "hold_s": hold, "recheck_s": recheck}
        for label, refused in (("without", False), ("with", True)):
            token = f"bench-hold-{label}-{uuid.uuid4().hex}"
            stack.sim_add_token(token)
            tenant = _org_with_credential(stack, token)
            began = time.monotonic()
            onboarding = _onboard(stack, tenant, count, f"hold-{label}")
            if refused:
                # Mid-way: once a tenth of the workspaces exist upstream.
                wait_for(
                    lambda: len(stack.sim_state()["workspaces"]) >= count // 10 + count,
                    timeout=600,
                    what="a tenth of the items under way",
                    interval=0.2,
                )
                refusal = {"pathRegex": ".", "status": 401, "times": 10**9, "body": {"detail": "x"}}
                stack._sim("POST", "/__sim/faults", refusal)
                timer = threading.Timer(hold, stack.sim_clear_faults)
                timer.start()
            wait_for(partial(_ended, stack, onboarding), timeout=1800, what=label, interval=1)
            results[label] = {
                "seconds": round(time.monotonic() - began, 1),
                "ended": _ended(stack, onboarding),
            }
        titles = Counter(w["title"] for w in stack.sim_state()["workspaces"])
        results["duplicate_workspaces"] = sum(1 for n in titles.values() if n > 1)
        return results


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    workers = WorkerSetup()
    out: dict[str, Any] = {}
    if what in ("adaptive", "all"):
        out["adaptive_rate"] = adaptive_rate(workers=workers)
        print(json.dumps(out["adaptive_rate"], indent=2, default=str), flush=True)
    if what in ("hold", "all"):
        out["credential_hold"] = credential_hold(workers=workers)
        print(json.dumps(out["credential_hold"], indent=2, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
