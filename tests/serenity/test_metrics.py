"""`/metrics`: Prometheus text, no token needed, counters and database gauges."""

import uuid
from datetime import timedelta

from django.utils import timezone

from kernel.metrics import record_step
from tests.chains.helpers import create_brand
from tests.factories import AsyncJobFactory


def test_metrics_report_requests_upstream_calls_jobs_and_attempts(sw_writer, sim, anonymous):
    # given some traffic: a brand provisioned through the simulator
    create_brand(sw_writer, "Alpha")
    # when
    response = anonymous.get("/metrics")
    # then
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert 'serenity_http_requests_total{method="POST",status="201"}' in text
    assert 'serenity_upstream_calls_total{operation="create_subworkspace",status="200"}' in text
    assert 'serenity_provisioning_attempts{reason="",status="ready"} 1.0' in text
    assert "serenity_jobs" in text
    # upstream latency by operation and status (SPEC §10.4)
    assert (
        'serenity_upstream_call_duration_seconds_count{operation="create_subworkspace",'
        'status="200"}' in text
    )
    assert "serenity_jobs_runnable 0.0" in text
    assert "serenity_jobs_oldest_runnable_age_seconds 0.0" in text
    assert sw_writer.token not in text


def test_metrics_report_runnable_jobs_and_the_age_of_the_oldest(db, anonymous):
    # given two due, unclaimed jobs, the older due 30 s ago, and one claimed by a live worker
    now = timezone.now()
    AsyncJobFactory(run_after=now - timedelta(seconds=30))
    AsyncJobFactory(run_after=now - timedelta(seconds=5))
    AsyncJobFactory(
        run_after=now - timedelta(seconds=60),
        claim_token=uuid.uuid4(),
        lease_expires_at=now + timedelta(seconds=60),
    )
    # when
    text = anonymous.get("/metrics").content.decode()
    # then
    assert "serenity_jobs_runnable 2.0" in text
    age = float(text.split("\nserenity_jobs_oldest_runnable_age_seconds ")[1].split()[0])
    assert 30 <= age < 60


def test_steps_are_counted_by_outcome(db, anonymous):
    # given
    record_step("provisionWorkspace", "ok", 0.2)
    record_step("provisionWorkspace", "error", 0.1)
    # when
    text = anonymous.get("/metrics").content.decode()
    # then
    assert 'serenity_job_steps_total{outcome="ok",step="provisionWorkspace"}' in text
    assert 'serenity_job_steps_total{outcome="error",step="provisionWorkspace"}' in text
