"""`/metrics`: Prometheus text, no token needed, counters and database gauges."""

from tests.chains.helpers import create_brand


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
    assert sw_writer.token not in text
