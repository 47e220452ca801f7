"""Prometheus metrics.

Counters and histograms use prometheus_client's multiprocess mode when
PROMETHEUS_MULTIPROC_DIR is set (gunicorn workers and Celery children write to shared files);
gauges the caller passes (jobs and attempts, read from the database at scrape time:
`serenity.metrics`) are correct whichever process serves `/metrics`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.registry import Collector

HTTP_REQUESTS = Counter(
    "serenity_http_requests_total", "HTTP requests served", ["method", "status"]
)
UPSTREAM_CALLS = Counter("serenity_upstream_calls_total", "Semrush calls", ["operation", "status"])
STEP_DURATION = Histogram(
    "serenity_job_step_duration_seconds", "Duration of one job step", ["step", "status"]
)

# The upstream quota (SPEC §10.6), by org id: never by credential.
UPSTREAM_PERMITS = Counter(
    "serenity_upstream_permits_total", "Permits granted by the credential's bucket", ["org_id"]
)
UPSTREAM_PERMIT_WAIT = Histogram(
    "serenity_upstream_permit_wait_seconds",
    "Time a granted permit waited for its turn",
    ["org_id"],
    buckets=(0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0),
)
UPSTREAM_PERMIT_DEFERRALS = Counter(
    "serenity_upstream_permit_deferrals_total",
    "Steps re-scheduled because no permit was due within their patience",
    ["org_id"],
)
UPSTREAM_PERMIT_REFUSALS = Counter(
    "serenity_upstream_permit_refusals_total",
    "Sync calls refused for quota (503 upstreamBusy)",
    ["org_id"],
)
UPSTREAM_RATE_LIMITED = Counter(
    "serenity_upstream_rate_limited_total", "Upstream answers 429 (rate limited)", ["org_id"]
)
_PROCESS_METRICS = (
    HTTP_REQUESTS,
    UPSTREAM_CALLS,
    STEP_DURATION,
    UPSTREAM_PERMITS,
    UPSTREAM_PERMIT_WAIT,
    UPSTREAM_PERMIT_DEFERRALS,
    UPSTREAM_PERMIT_REFUSALS,
    UPSTREAM_RATE_LIMITED,
)


def record_upstream_call(operation: str, status: int | None) -> None:
    UPSTREAM_CALLS.labels(operation, str(status) if status is not None else "none").inc()


def render_metrics(*, collectors: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The exposition of every process's counters and histograms, plus `collectors` (gauges
    the caller reads at scrape time)."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        for metric in _PROCESS_METRICS:
            registry.register(metric)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry), CONTENT_TYPE_LATEST
