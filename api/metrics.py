"""Gauges read from the database at scrape time: correct whichever process serves `/metrics`."""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobs.models import AsyncJob, JobStatus
from provisioning import credentials
from provisioning.models import ProvisioningAttempt
from provisioning.reconcile.selectors import drifted_brands_per_kind


class DatabaseCollector(Collector):
    """Jobs by type/status, runnable jobs and the age of the oldest, and attempts by outcome,
    counted in the database."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily(
            "serenity_jobs", "Job rows by step and status", labels=["step", "status"]
        )
        for row in AsyncJob.objects.values("step", "status").annotate(n=Count("id")):
            jobs.add_metric([row["step"], row["status"]], row["n"])
        yield jobs
        # Runnable: due, unfinished, and not held by a live claim (what the workers have yet to
        # take: the queue's depth, whatever the broker holds).
        now = timezone.now()
        runnable = AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS, run_after__lte=now).filter(
            Q(claim_token__isnull=True) | Q(lease_expires_at__lt=now)
        )
        depth = runnable.aggregate(n=Count("id"), oldest=Min("run_after"))
        yield GaugeMetricFamily(
            "serenity_jobs_runnable", "Jobs due and not claimed by a live worker", value=depth["n"]
        )
        oldest = depth["oldest"]
        yield GaugeMetricFamily(
            "serenity_jobs_oldest_runnable_age_seconds",
            "How long the oldest runnable job has been due (0 when none is)",
            value=(now - oldest).total_seconds() if oldest is not None else 0.0,
        )
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
        yield _drifted_brands()


def _drifted_brands() -> GaugeMetricFamily:
    """Brands with drift per kind (SPEC §13.1); per org too with SERENITY_METRICS_PER_ORG."""
    per_org = bool(getattr(settings, "SERENITY_METRICS_PER_ORG", False))
    drifted = GaugeMetricFamily(
        "serenity_drifted_brands",
        "Brands whose record Semrush no longer matches, by drift kind",
        labels=["org", "kind"] if per_org else ["kind"],
    )
    totals: dict[tuple[str, ...], int] = {}
    for (org_id, kind), n in drifted_brands_per_kind().items():
        key: tuple[str, ...] = (org_id, kind) if per_org else (kind,)
        totals[key] = totals.get(key, 0) + n
    for key, n in sorted(totals.items()):
        drifted.add_metric(list(key), n)
    return drifted


class CredentialRateCollector(Collector):
    """The rate each Semrush credential in use is paced at now (SPEC §13.3: adapted from
    upstream's 429s, at most the configured rate), read from the limiter's store; labelled by a
    short hash of the credential (`credentials.label`) and its source (`service` or `org`)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        rates = GaugeMetricFamily(
            "serenity_upstream_rate_per_second",
            "Permits per second a Semrush credential is paced at now (the adaptive rate)",
            labels=["credential", "source"],
        )
        for credential in credentials.credentials_in_use():
            rates.add_metric(
                [credentials.label(credential), credential.source],
                credentials.rate_per_second(credential),
            )
        yield rates
