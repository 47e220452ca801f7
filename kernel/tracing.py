"""OpenTelemetry tracing (SPEC §13.4): one trace per piece of work.

Off unless the operator sets OpenTelemetry's own `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter
then reads its other standard variables: `OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_HEADERS` ...).
When on, :func:`setup_tracing` (called once per process: by `config.wsgi`/`config.asgi`, and
by `config.celery` in each worker process) installs the SDK with a batching OTLP/HTTP exporter
and OpenTelemetry's own instrumentation of Django (a span per request), Celery (publish and
run), requests (a client span per Semrush call) and psycopg (a span per query).

A chain's later steps are sent by the dispatcher or run by a hand-over, not by the request, so
the trace travels on the job row: :func:`traceparent` is what a new chain's rows keep (the W3C
`traceparent` of the request's span) and :func:`step_span` starts each step's span from it, so
every step, and every Semrush call under it, joins the request's trace. Off, both cost nothing
(an empty string; no span).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

logger = logging.getLogger("serenity.tracing")

ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACER_NAME = "serenity"

_propagator = TraceContextTextMapPropagator()
_state: dict[str, object] = {"enabled": False, "provider": None}


def tracing_wanted() -> bool:
    """Whether the operator turned tracing on (`OTEL_EXPORTER_OTLP_ENDPOINT` set)."""
    return bool(os.environ.get(ENDPOINT_VARIABLE, "").strip())


def tracing_enabled() -> bool:
    return bool(_state["enabled"])


def setup_tracing(*, exporter: SpanExporter | None = None) -> bool:
    """Install the SDK and the instrumentation in this process, once; True when tracing is on.

    Without `exporter`, only when :func:`tracing_wanted`, with a batching OTLP/HTTP exporter;
    with one (the tests' in-memory exporter), always, each span exported as it ends."""
    if _state["enabled"]:
        return True
    if exporter is None and not tracing_wanted():
        return False
    if _state["provider"] is None:
        _state["provider"] = _provider(exporter)
    _instrument()
    _state["enabled"] = True
    logger.info("tracing on", extra={"otlp_endpoint": os.environ.get(ENDPOINT_VARIABLE)})
    return True


def _provider(exporter: SpanExporter | None) -> object:
    """The SDK's tracer provider, set as OpenTelemetry's global (once per process: its rule)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    # `serenity` unless the operator named the service (OpenTelemetry's own variables).
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = TracerProvider(
        resource=Resource.create({} if named else {"service.name": "serenity"})
    )
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _instrument() -> None:
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    # Query text only in the spans, never a comment appended to the SQL sent (it would defeat
    # the prepared statements the hot paths rely on: config/settings.py).
    DjangoInstrumentor().instrument(is_sql_commentor_enabled=False)
    CeleryInstrumentor().instrument()
    RequestsInstrumentor().instrument()
    PsycopgInstrumentor().instrument(enable_commenter=False)


def teardown_tracing() -> None:
    """Undo :func:`setup_tracing`'s instrumentation (the tests' fixture); the tracer provider,
    set once per process by OpenTelemetry's rules, stays (a later setup reuses it)."""
    if not _state["enabled"]:
        return
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    for instrumentor in (
        DjangoInstrumentor(),
        CeleryInstrumentor(),
        RequestsInstrumentor(),
        PsycopgInstrumentor(),
    ):
        instrumentor.uninstrument()
    _state["enabled"] = False


def traceparent() -> str:
    """The W3C `traceparent` of the current span, to keep with work that runs later (a job
    row); "" when tracing is off or no span is recording."""
    if not _state["enabled"]:
        return ""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent", "")


@contextlib.contextmanager
def step_span(
    name: str, *, traceparent: str, attributes: Mapping[str, str | None]
) -> Iterator[None]:
    """A span around one step, in the trace `traceparent` (the job row's) names: under the
    current span when that is already in the same trace (the Celery task the request's
    publish started), else directly under the kept context (a step the dispatcher or a
    hand-over sent). No span when tracing is off."""
    if not _state["enabled"]:
        yield
        return
    parent = None
    if traceparent:
        kept = _propagator.extract({"traceparent": traceparent})
        kept_trace = trace.get_current_span(kept).get_span_context().trace_id
        current_trace = trace.get_current_span().get_span_context().trace_id
        if kept_trace != current_trace:
            parent = kept
    tracer = trace.get_tracer(TRACER_NAME)
    token = otel_context.attach(parent) if parent is not None else None
    try:
        with tracer.start_as_current_span(
            name, attributes={k: v for k, v in attributes.items() if v is not None}
        ):
            yield
    finally:
        if token is not None:
            otel_context.detach(token)
