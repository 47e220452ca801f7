"""One trace per piece of work (SPEC §13.4): the 202 of an async create with a market, every
step of its chain (each run later, from its job row) and every Semrush call under them share
one trace; the Semrush calls are children of their steps. Spans read from the SDK's in-memory
exporter; steps run here, as a worker would run them (`published` records the publishes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db.models import Q
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from jobs.models import AsyncJob
from kernel import tracing
from provisioning import tasks
from provisioning.ledger.models import UpstreamCall
from tests.chains.helpers import start_async_brand_with_market

pytestmark = pytest.mark.django_db(transaction=True)

# One per test process: OpenTelemetry sets its tracer provider once (kernel.tracing reuses it).
EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    tracing.setup_tracing(exporter=EXPORTER)
    EXPORTER.clear()
    yield EXPORTER
    tracing.teardown_tracing()
    EXPORTER.clear()


def test_an_async_create_is_one_trace_with_the_semrush_calls_under_their_steps(
    spans, sw_writer, sim, published
):
    # given a workspace that is ready at once
    sim.configure({"settleSeconds": 0})
    spans.clear()  # the fixtures' own queries
    # when an async create with a market is accepted, then its chain runs
    accepted = start_async_brand_with_market(sw_writer)
    tasks.provision_workspace(accepted["jobId"])
    finished: list[ReadableSpan] = list(spans.get_finished_spans())
    # then the request's span is the root of one trace
    [server] = [s for s in finished if s.kind == SpanKind.SERVER]
    assert server.parent is None
    assert server.attributes is not None and server.attributes.get("http.status_code") == 202
    trace_id = server.context.trace_id
    # and the chain's rows keep that trace
    rows = AsyncJob.objects.filter(Q(pk=accepted["jobId"]) | Q(root_id=accepted["jobId"]))
    kept = {row.trace_context for row in rows}
    assert len(kept) == 1 and f"{trace_id:032x}" in kept.pop()
    # and every step is a span of it, under the request's span, naming its row
    steps = [s for s in finished if s.name.startswith("step ")]
    assert sorted(s.name for s in steps) == ["step createMarket", "step provisionWorkspace"]
    assert {s.context.trace_id for s in steps} == {trace_id}
    assert {s.parent.span_id for s in steps if s.parent} == {server.context.span_id}
    assert {s.attributes["serenity.step_job_id"] for s in steps if s.attributes} == {
        str(row.pk) for row in rows
    }
    # and every Semrush call is a client span, the child of the step that made it
    step_ids = {s.context.span_id: s for s in steps}
    calls = [s for s in finished if s.kind == SpanKind.CLIENT and s.name.split()[0] in HTTP]
    assert calls
    assert {c.context.trace_id for c in calls} == {trace_id}
    assert all(c.parent is not None and c.parent.span_id in step_ids for c in calls)
    # one per attempt the steps sent: at least the ledger's writes and confirm reads
    assert len(calls) >= UpstreamCall.objects.count() == 6
    by_step = {step_ids[c.parent.span_id].name for c in calls if c.parent}
    assert by_step == {"step createMarket", "step provisionWorkspace"}
    # and nothing but the queries a worker makes before it runs a step (its claim, outside
    # any step here; under Celery's span on a worker) is outside the trace
    outside = [s for s in finished if s.context.trace_id != trace_id]
    assert all((s.attributes or {}).get("db.system") == "postgresql" for s in outside)
    assert all(s.parent is None for s in outside)


HTTP = {"GET", "POST", "PATCH", "DELETE", "PUT"}


def test_without_tracing_no_context_is_kept(sw_writer, sim, published, monkeypatch):
    # given tracing off: no OTEL_EXPORTER_OTLP_ENDPOINT, so setting it up does nothing
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert tracing.setup_tracing() is False
    assert not tracing.tracing_enabled()
    # when an async create is accepted
    accepted = start_async_brand_with_market(sw_writer)
    # then its rows keep no trace context
    rows = AsyncJob.objects.filter(Q(pk=accepted["jobId"]) | Q(root_id=accepted["jobId"]))
    assert {row.trace_context for row in rows} == {""}
