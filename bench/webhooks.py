"""The `webhooks` measurement (SPEC §11.3, §11.6): event → first delivery attempt at idle
(p50, p99; bound: p50 ≤ 1 s) and delivery throughput with 1,000 events queued at once.

A stack with production tunables delivers to a receiver on the loopback in this process
(`SERENITY_WEBHOOK_ALLOW_PRIVATE=true`). Events are published by a subprocess with the stack's
environment, through the product's own `webhook_event_publish` in committed transactions (what
a chain's ending does): the latency of one event is its arrival at the receiver minus the
event's `timestamp` (taken inside the publishing transaction, before its commit).

    python -m bench.webhooks publish '{"orgId": ..., "count": 50, "interval": 0.3}'
    python -m bench.webhooks publish '{"orgId": ..., "count": 1000, "oneTransaction": true}'
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

from bench.load import latency_summary
from bench.stack import BenchStack, WorkerSetup
from tests.harness import ROOT
from tests.webhooks.receiver import Received, Receiver, receiver_start

PYTHON = sys.executable


def _publish(stack: BenchStack, args: dict[str, Any]) -> dict[str, Any]:
    completed = subprocess.run(  # noqa: S603 - our own argv
        [PYTHON, "-m", "bench.webhooks", "publish", json.dumps(args)],
        env={**stack.env, "LOG_LEVEL": "WARNING"},
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"bench.webhooks publish failed:\n{completed.stdout}\n{completed.stderr}"
        )
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def _event_time(received: Received) -> float:
    stamp = json.loads(received.body)["timestamp"]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _first_attempts(receiver: Receiver, ids: set[str]) -> list[Received]:
    first: dict[str, Received] = {}
    for received in receiver.arrivals:
        key = received.headers.get("webhook-id", "")
        if key in ids and key not in first:
            first[key] = received
    return list(first.values())


def webhooks(
    *, workers: WorkerSetup, idle_events: int = 60, queued_events: int = 1000
) -> dict[str, Any]:
    receiver = receiver_start()
    stack = BenchStack(
        workers=workers, settle_seconds=0.2, settings={"SERENITY_WEBHOOK_ALLOW_PRIVATE": True}
    )
    stack.start()
    try:
        org_id, token = stack.create_org_and_token()
        client = stack.client(token, org_id)
        answer = client.post(f"/v2/orgs/{org_id}/serenity/webhooks", {"url": receiver.url})
        if answer.status != 201:
            raise RuntimeError(f"register: {answer.status} {answer.body}")
        client.close()
        # 1. At idle: one event at a time, each well after the previous one was delivered.
        idle = _publish(stack, {"orgId": org_id, "count": idle_events, "interval": 0.3})
        receiver.wait_for(idle_events, timeout=60, arrived=True)
        idle_ids = set(idle["eventIds"])
        idle_latencies = [r.at - _event_time(r) for r in _first_attempts(receiver, idle_ids)]
        # 2. Throughput: 1,000 events committed in one transaction, all queued at once.
        queued = _publish(stack, {"orgId": org_id, "count": queued_events, "oneTransaction": True})
        receiver.wait_for(idle_events + queued_events, timeout=600, arrived=True)
        queued_firsts = _first_attempts(receiver, set(queued["eventIds"]))
        last = max(r.at for r in queued_firsts)
        span = last - queued["committedAt"]
        stack.wait_until_quiet(timeout=120)
        statuses = stack.query(
            "SELECT status, count(*) AS n FROM webhooks_webhookdelivery GROUP BY status"
        )
        duplicates = (
            len(receiver.arrivals) - len(_first_attempts(receiver, idle_ids)) - len(queued_firsts)
        )
    finally:
        stack.stop()
        receiver.stop()
    idle_summary = latency_summary(idle_latencies)
    return {
        "workers": workers.describe(),
        "idle": {"events": idle_events, **idle_summary},
        "queued": {
            "events": queued_events,
            "drain_s": round(span, 2),
            "deliveries_per_s": round(queued_events / span, 1),
            **latency_summary([r.at - _event_time(r) for r in queued_firsts]),
        },
        "deliveries": {row["status"]: row["n"] for row in statuses},
        "repeated_attempts": duplicates,
        "bound_idle_p50_ms": 1000,
        "met": idle_summary["p50_ms"] <= 1000,
    }


def report_section(data: dict[str, Any]) -> str:
    """The webhooks section of docs/benchmarks.md (bench.report)."""
    w = (data.get("current") or {}).get("webhooks")
    out = ["## 8. Webhooks (SPEC §11.3, §11.6)\n"]
    if not w:
        out.append("Not measured yet: `.venv/bin/python -m bench.run webhooks --no-profile`.\n")
        return "\n".join(out)
    idle, queued = w["idle"], w["queued"]
    met = "met" if w["met"] else "**not met**"
    out.append(
        f"{w['workers']}, production tunables, a receiver on the loopback answering 204 at once. "
        "An event's latency is its first attempt's arrival at the receiver minus the event's "
        "`timestamp` (taken in the publishing transaction, before its commit and the publish "
        "after it).\n"
    )
    rows = [
        [
            f"at idle ({idle['events']} events, 0.3 s apart)",
            _ms(idle["p50_ms"]),
            _ms(idle["p90_ms"]),
            _ms(idle["p99_ms"]),
            _ms(idle["max_ms"]),
        ],
        [
            f"{queued['events']} events queued in one transaction",
            _ms(queued["p50_ms"]),
            _ms(queued["p90_ms"]),
            _ms(queued["p99_ms"]),
            _ms(queued["max_ms"]),
        ],
    ]
    out.append("| event → first attempt | p50 ms | p90 ms | p99 ms | max ms |")
    out.append("|---|---|---|---|---|")
    out.extend("| " + " | ".join(row) + " |" for row in rows)
    out.append(
        f"\nTarget at idle: p50 ≤ 1000 ms — {met} ({_ms(idle['p50_ms'])} ms). Throughput: "
        f"{queued['events']} deliveries in {queued['drain_s']} s from the commit, "
        f"{queued['deliveries_per_s']} deliveries/s (each attempt a new connection, signed; "
        "the publisher's 1,000 messages and the workers share the machine's two cores). "
        f"Deliveries at the end: {w['deliveries']}; attempts repeated: "
        f"{w['repeated_attempts']}.\n"
    )
    return "\n".join(out)


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def publish_main(args: dict[str, Any]) -> dict[str, Any]:
    """In the subprocess: publish `count` events (`onboarding.completed`, a small `data`), one
    transaction each `interval` seconds apart, or all in one transaction."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    import uuid

    from django.db import transaction

    from webhooks.services import webhook_event_publish

    def one(index: int) -> str:
        event_id = uuid.uuid4()
        data = {"onboardingId": f"bench-{index}", "status": "COMPLETED", "index": index}
        webhook_event_publish(
            organization_id=args["orgId"],
            type="onboarding.completed",
            data=data,
            event_id=event_id,
        )
        return str(event_id)

    event_ids: list[str] = []
    committed: list[float] = []
    if args.get("oneTransaction"):
        with transaction.atomic():
            # Registered first, so it runs right after COMMIT, before the 1,000 publishes.
            transaction.on_commit(lambda: committed.append(time.time()))
            event_ids = [one(i) for i in range(args["count"])]
    else:
        for index in range(args["count"]):
            with transaction.atomic():
                event_ids.append(one(index))
            time.sleep(args.get("interval", 0.3))
        committed.append(time.time())
    return {"eventIds": event_ids, "committedAt": committed[0]}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "publish":
        print(json.dumps(publish_main(json.loads(sys.argv[2]))))
        sys.exit(0)
    sys.exit(f"usage: {__doc__}")
