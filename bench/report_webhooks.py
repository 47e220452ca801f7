"""The webhook measurements of docs/benchmarks.md (`bench.run webhooks`: bench.webhooks'
`webhooks` and `flood`), read from docs/benchmarks.json."""

from __future__ import annotations

from bench.report_parts import Entry, Figure, Measurement, ms

COMMAND = ".venv/bin/python -m bench.run webhooks"


def _counts(counts: object) -> str:
    if not isinstance(counts, dict) or not counts:
        return "none"
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def _idle(entry: Entry) -> Figure | None:
    idle = entry.get("idle")
    if not isinstance(idle, dict):
        return None
    queued = entry.get("queued") or {}
    details = []
    if queued:
        details.append(
            f"Throughput (no bound): {queued['events']} events queued in one transaction were "
            f"delivered {queued['drain_s']} s after its commit ({queued['deliveries_per_s']} "
            f"deliveries/s; first attempts p50 {ms(queued['p50_ms'])} ms, p99 "
            f"{ms(queued['p99_ms'])} ms). Deliveries at the end: "
            f"{_counts(entry.get('deliveries'))}; attempts repeated: "
            f"{entry.get('repeated_attempts')}."
        )
    return Figure(
        f"p50 {ms(idle['p50_ms'])} ms, p99 {ms(idle['p99_ms'])} ms ({idle['events']} events)",
        idle["p50_ms"] <= 1000,
        tuple(details),
    )


def _flood(entry: Entry) -> Figure | None:
    if "second_create_s" not in entry:
        return None
    queued = entry.get("queued_at_second_create") or {}
    return Figure(
        f"{entry['second_create_s']} s ({entry['second_status']}); "
        f"{entry['idle_create_s']} s at idle before the flood",
        entry["second_status"] == "COMPLETED" and entry["second_create_s"] <= entry["bound_s"],
        (
            f"Org A's cancel answered {entry['cancel_status']} in {entry['cancel_s']} s; when "
            f"org B posted, the deliveries were {_counts(entry['deliveries'])}, with "
            f"{queued.get('webhooks')} messages on the deliveries' queue and "
            f"{queued.get('steps')} on the steps' queue. After A deleted its endpoints, "
            f"{entry['delivery_jobs_left_after_delete']} delivery jobs were unfinished (the "
            "attempts running then).",
        ),
    )


def _flood_workers(entry: Entry) -> str | None:
    workers = entry.get("workers")
    if not workers:
        return None
    return f"{workers}, and deploy/Procfile's `webhooks` worker (`-P threads -c 16`)"


MEASUREMENTS = (
    Measurement(
        section="Webhooks at idle",
        title="Webhooks: event → first delivery attempt, at idle",
        what=(
            "A subprocess publishes 60 events through the product's `webhook_event_publish`, "
            "one committed transaction every 0.3 s, for an org with one endpoint on a loopback "
            "receiver that answers 204 at once. An event's latency is its first attempt's "
            "arrival minus the event's `timestamp` (taken inside the publishing transaction). "
            "The same run then queues 1,000 events in one transaction (throughput, no bound)."
        ),
        bound="p50 ≤ 1 s",
        key="webhooks",
        command=COMMAND,
        figure=_idle,
    ),
    Measurement(
        section="Webhook flood",
        title="Webhook flood: another org's async create beside 10 slow endpoints",
        what=(
            "Org A registers 10 endpoints on a receiver that holds every request 10 s, "
            "onboards 1,000 brands and cancels; once the deliveries of those events are "
            "written, org B (its own credential) makes one async brand create with a market, "
            "timed from its POST to its chain's end. S = 5 s."
        ),
        bound="≤ S + 4 s = 9 s",
        key="webhook_flood",
        command=COMMAND,
        figure=_flood,
        workers=_flood_workers,
    ),
)
