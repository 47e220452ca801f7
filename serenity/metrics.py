"""Gauges read from the database at scrape time: correct whichever process serves `/metrics`."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobs.models import AsyncJob
from provisioning.models import ProvisioningAttempt


class DatabaseCollector(Collector):
    """Jobs by type/status and attempts by outcome, counted in the database."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
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
