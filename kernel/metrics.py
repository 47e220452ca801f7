"""Prometheus metrics.

Counters and histograms use prometheus_client's multiprocess mode (gunicorn workers and Celery
children write to files in PROMETHEUS_MULTIPROC_DIR, which the settings always set: by default
`var/prometheus`);
gauges the caller passes (jobs and attempts, read from the database at scrape time:
`api.metrics`) are correct whichever process serves `/metrics`.
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
UPSTREAM_LATENCY = Histogram(
    "serenity_upstream_call_duration_seconds",
    "Latency of one Semrush call (each attempt), by operation and status",
    ["operation", "status"],
    buckets=(0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0),
)
STEP_DURATION = Histogram(
    "serenity_job_step_duration_seconds", "Duration of one job step", ["step", "status"]
)
STEPS = Counter(
    "serenity_job_steps_total", "Job steps run, by step and outcome", ["step", "outcome"]
)
_LOCAL = (HTTP_REQUESTS, UPSTREAM_CALLS, UPSTREAM_LATENCY, STEP_DURATION, STEPS)

# The upstream quota (SPEC §10.6), by org id (with SERENITY_METRICS_PER_ORG, else "all":
# `org_label`): never by credential.
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
UPSTREAM_SLOT_REFUSALS = Counter(
    "serenity_upstream_slot_refusals_total",
    "Calls not sent because the credential's calls in flight were at its concurrency limit",
    ["org_id"],
)
_QUOTA = (
    UPSTREAM_PERMITS,
    UPSTREAM_SLOT_REFUSALS,
    UPSTREAM_PERMIT_WAIT,
    UPSTREAM_PERMIT_DEFERRALS,
    UPSTREAM_PERMIT_REFUSALS,
    UPSTREAM_RATE_LIMITED,
)


# The methods a request is counted under; any other (a client may send any token as its
# method) is counted as "other", so that made-up methods cannot grow one series each.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def record_request(method: str | None, status: int) -> None:
    HTTP_REQUESTS.labels(method if method in HTTP_METHODS else "other", str(status)).inc()


def org_label(org_id: str) -> str:
    """The `org_id` label of the quota metrics: the org's id only with
    SERENITY_METRICS_PER_ORG (one series per org: a cardinality the operator chooses, and ids
    a scraper may see), else "all"."""
    from django.conf import settings

    return org_id if getattr(settings, "SERENITY_METRICS_PER_ORG", False) else "all"


def record_upstream_call(operation: str, status: int | None, duration_seconds: float) -> None:
    label = str(status) if status is not None else "none"
    UPSTREAM_CALLS.labels(operation, label).inc()
    UPSTREAM_LATENCY.labels(operation, label).observe(duration_seconds)


def record_step(step: str, outcome: str, duration_seconds: float) -> None:
    STEP_DURATION.labels(step, outcome).observe(duration_seconds)
    STEPS.labels(step, outcome).inc()


def render_metrics(*, collectors: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The exposition of every process's counters and histograms, plus `collectors` (gauges
    the caller reads at scrape time)."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        for metric in (*_LOCAL, *_QUOTA):
            registry.register(metric)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry), CONTENT_TYPE_LATEST
