"""Prometheus metrics.

Counters and histograms use prometheus_client's multiprocess mode when
PROMETHEUS_MULTIPROC_DIR is set (gunicorn workers and Celery children write to shared files);
gauges of jobs and attempts are read from the database at scrape time, so they are correct
whichever process serves `/metrics`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

HTTP_REQUESTS = Counter(
    "serenity_http_requests_total", "HTTP requests served", ["method", "status"]
)
UPSTREAM_CALLS = Counter("serenity_upstream_calls_total", "Semrush calls", ["operation", "status"])
STEP_DURATION = Histogram(
    "serenity_job_step_duration_seconds", "Duration of one job step", ["step", "status"]
)


def record_upstream_call(operation: str, status: int | None) -> None:
    UPSTREAM_CALLS.labels(operation, str(status) if status is not None else "none").inc()


class DatabaseCollector:
    """Jobs by type/status and attempts by outcome, counted in the database."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db.models import Count

        from jobs.models import AsyncJob
        from provisioning.models import ProvisioningAttempt

        jobs = GaugeMetricFamily(
            "serenity_jobs", "Job rows by step and status", labels=["step", "status"]
        )
        for row in AsyncJob.objects.values("step", "status").annotate(n=Count("id")):
            jobs.add_metric([row["step"], row["status"]], row["n"])
        yield jobs
        attempts = GaugeMetricFamily(
            "serenity_provisioning_attempts",
            "Provisioning attempts by status and reason",
            labels=["status", "reason"],
        )
        for status, reason, n in ProvisioningAttempt.objects.values_list(
            "status", "reason"
        ).annotate(n=Count("id")):
            attempts.add_metric([status, reason or ""], n)
        yield attempts


def render_metrics() -> tuple[bytes, str]:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        for collector in (HTTP_REQUESTS, UPSTREAM_CALLS, STEP_DURATION):
            registry.register(collector)
    registry.register(DatabaseCollector())
    return generate_latest(registry), CONTENT_TYPE_LATEST
