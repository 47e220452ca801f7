"""The `webhooks` measurements (SPEC §11.3, §12.5): event → first delivery attempt at idle
(p50, p99; bound: p50 ≤ 1 s) and delivery throughput with 1,000 events queued at once; and the
flood (`flood`): an org with 10 endpoints that hold every attempt 10 s onboards 1,000 brands and
cancels, and another org's single async create must still complete within S + 4 s.

    .venv/bin/python -m bench.webhooks flood               # the README's workers
    .venv/bin/python -m bench.webhooks flood-all-queues    # one worker, every queue

`bench.run webhooks` runs both and stores them in docs/benchmarks.json, which
bench/report_webhooks.py renders in docs/benchmarks.md.

A stack with production tunables delivers to a receiver on the loopback in this process (the
setting `SERENITY_WEBHOOK_ALLOW_PRIVATE` on). Events are published by a subprocess with the stack's
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
import uuid
from datetime import datetime
from typing import Any

from bench.load import latency_summary
from bench.scenarios import (
    SETTLE_SECONDS,
    Tenant,
    _brand_body,
    _org_with_credential,
    chain_timeline,
    started,
)
from bench.stack import BenchStack, WorkerSetup
from tests.harness import ROOT, Stack, wait_for
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


def _create_and_wait(stack: BenchStack, who: Tenant) -> dict[str, Any]:
    """One async brand create with a market, polled to its end: seconds and status."""
    client = who.client_factory(stack)()
    try:
        posted, posted_wall = time.monotonic(), time.time()
        answer = client.post(client.brands_path, _brand_body("flood", market=("US", "en")))
        job_id, brand_id = answer.body["jobId"], answer.body["id"]
        polled = answer
        while time.monotonic() - posted < 300:
            polled = client.job(brand_id, job_id)
            if polled.body.get("status") != "IN_PROGRESS":
                break
            time.sleep(0.05)
        return {
            "seconds": round(time.monotonic() - posted, 3),
            "status": polled.body.get("status"),
            "steps": chain_timeline(stack, job_id, posted_wall),
        }
    finally:
        client.close()


def _queue_lengths(stack: BenchStack) -> dict[str, int]:
    import redis

    client = redis.Redis.from_url(stack.broker_url)
    try:
        return {
            "steps": int(client.llen(stack.queue)),
            "webhooks": int(client.llen(f"{stack.queue}.webhooks")),
        }
    finally:
        client.close()


def _deliveries(stack: BenchStack) -> dict[str, int]:
    rows = stack.query(
        "SELECT CASE WHEN last_error = 'overflow' THEN 'failed (overflow)' ELSE status END AS s,"
        " count(*) AS n FROM webhooks_webhookdelivery GROUP BY 1"
    )
    return {row["s"]: int(row["n"]) for row in rows}


class AllQueuesStack(BenchStack):
    """One worker consuming every queue (steps, periodic, webhooks) with Celery's default pool
    and concurrency (prefork, one process per CPU), and no webhook worker of its own: the shape
    of the embedded default (SPEC §13.7, issue 44)."""

    def _worker_process(self, concurrency: int | None = None) -> Any:
        process = Stack._worker_process(self, concurrency)
        argv = process.argv
        queues = argv.index("-Q") + 1
        argv[queues] = f"{self.queue},{self.queue}.periodic,{self.queue}.webhooks"
        slots = argv.index("-c")
        del argv[slots : slots + 2]
        return process

    def _webhook_worker_process(self) -> Any:
        # No separate webhook worker: a placeholder that is "ready" and does nothing.
        return self._process(
            "no-webhook-worker",
            [PYTHON, "-c", "import time; print(' ready.', flush=True); time.sleep(86400)"],
            ready=lambda p: " ready." in p.log_text(),
        )


ALL_QUEUES = "1 x `celery worker` consuming every queue (prefork, Celery's default concurrency)"


def flood(
    *,
    workers: WorkerSetup,
    endpoints: int = 10,
    brands: int = 1000,
    hold_seconds: float = 10.0,
    all_queues: bool = False,
) -> dict[str, Any]:
    """SPEC §12.5, §13.7: org A registers `endpoints` endpoints on a receiver holding every
    request `hold_seconds`, onboards `brands` brands and cancels; once the deliveries are
    queued, org B (its own credential, one endpoint on a receiver that answers at once) makes
    one async create, timed from its POST to its end (bound S + 4 s; its idle time first, for
    reference), and its `job.completed` event's first attempt is timed from the event (across
    orgs: a few seconds). Then A deletes its endpoints: the delivery jobs left unfinished are
    counted (only attempts running at that moment may remain). `all_queues`: one worker
    consuming every queue at Celery's default concurrency (`AllQueuesStack`) instead of
    `workers` and a webhook worker."""
    tarpit = receiver_start(delay_seconds=hold_seconds)
    quick = receiver_start()
    stack = (AllQueuesStack if all_queues else BenchStack)(
        workers=WorkerSetup(processes=1) if all_queues else workers,
        settle_seconds=SETTLE_SECONDS,
        settings={"SERENITY_WEBHOOK_ALLOW_PRIVATE": True},
    )
    with started(stack):
        tokens = [f"flood-{uuid.uuid4().hex}" for _ in range(2)]
        for token in tokens:
            stack.sim_add_token(token)
        org_a, org_b = (_org_with_credential(stack, token) for token in tokens)
        idle = _create_and_wait(stack, org_b)
        # A long timeout: on the shared machine, cancelling 1,000 items can take a minute.
        client = stack.client(org_a.token, org_a.org_id, timeout=900.0)
        hooks = f"/v2/orgs/{org_a.org_id}/serenity/webhooks"
        hook_ids = []
        for index in range(endpoints):
            answer = client.post(hooks, {"url": f"{tarpit.url}/{index}"})
            if answer.status != 201:
                raise RuntimeError(f"register: {answer.status} {answer.body}")
            hook_ids.append(answer.body["id"])
        body = {
            "brands": [
                {
                    "name": f"flood {i}",
                    "baseUrl": f"https://flood-{i}.example",
                    "markets": [{"market": "US", "languageCode": "en"}],
                }
                for i in range(brands)
            ]
        }
        onboardings = f"/v2/orgs/{org_a.org_id}/serenity/onboardings"
        accepted = client.post(onboardings, body)
        if accepted.status != 202:
            raise RuntimeError(f"onboarding: {accepted.status} {accepted.body}")
        cancelled_at = time.monotonic()
        cancel = client.post(f"{onboardings}/{accepted.body['onboardingId']}/cancel", {})
        cancel_s = round(time.monotonic() - cancelled_at, 3)
        # Once the chains' ends have emitted their events (the count stops growing).
        counts: list[int] = []

        def settled() -> bool:
            counts.append(sum(_deliveries(stack).values()))
            # (the chains' job events are written by a job of their own after the answer)
            writing = stack.query(
                "SELECT count(*) AS n FROM jobs_asyncjob WHERE job_type = 'webhookEvents'"
                " AND status = 'IN_PROGRESS'"
            )[0]["n"]
            return len(counts) > 3 and counts[-1] == counts[-4] and counts[-1] > 0 and not writing

        wait_for(settled, timeout=600, what="the deliveries", interval=1.0)
        queued = _queue_lengths(stack)
        deliveries_then = _deliveries(stack)
        client_b = stack.client(org_b.token, org_b.org_id)
        answer = client_b.post(
            f"/v2/orgs/{org_b.org_id}/serenity/webhooks",
            {"url": quick.url, "events": ["job.completed"]},
        )
        client_b.close()
        if answer.status != 201:
            raise RuntimeError(f"register B: {answer.status} {answer.body}")
        second = _create_and_wait(stack, org_b)
        arrivals = len(tarpit.arrivals)
        try:
            [b_event] = quick.wait_for(1, timeout=120, arrived=True)[:1]
            b_first_attempt_s: float | None = round(b_event.at - _event_time(b_event), 3)
        except AssertionError:
            b_first_attempt_s = None
        for hook_id in hook_ids:
            client.delete(f"{hooks}/{hook_id}")
        client.close()
        left = stack.query(
            "SELECT count(*) AS n FROM jobs_asyncjob WHERE job_type = 'webhookDelivery'"
            " AND status = 'IN_PROGRESS'"
        )[0]["n"]
    tarpit.stop()
    quick.stop()
    bound = SETTLE_SECONDS + 4.0
    return {
        "workers": ALL_QUEUES if all_queues else workers.describe(),
        "endpoints": endpoints,
        "brands": brands,
        "hold_s": hold_seconds,
        "cancel_status": cancel.status,
        "cancel_s": cancel_s,
        "deliveries": deliveries_then,
        "queued_at_second_create": queued,
        "attempts_started_by_then": arrivals,
        "idle_create_s": idle["seconds"],
        "second_create_s": second["seconds"],
        "second_create_steps": second["steps"],
        "second_status": second["status"],
        "bound_s": bound,
        "met": second["status"] == "COMPLETED" and second["seconds"] <= bound,
        "delivery_jobs_left_after_delete": int(left),
        "other_org_first_attempt_s": b_first_attempt_s,
    }


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "publish":
        print(json.dumps(publish_main(json.loads(sys.argv[2]))))
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] == "flood":
        print(json.dumps(flood(workers=WorkerSetup()), default=str, indent=2))
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] == "flood-all-queues":
        print(json.dumps(flood(workers=WorkerSetup(), all_queues=True), default=str, indent=2))
        sys.exit(0)
    sys.exit(f"usage: {__doc__}")
