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
        for metric in (HTTP_REQUESTS, UPSTREAM_CALLS, STEP_DURATION):
            registry.register(metric)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry), CONTENT_TYPE_LATEST
