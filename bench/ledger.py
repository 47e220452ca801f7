"""The cost of the ledger and of tracing with no exporter (SPEC §13.7): ≤ 1 ms per upstream
call, ≤ 5 % of the accept path's p99. In-process, against a real PostgreSQL database (migrated
here) and the Semrush simulator (a process of its own) over HTTP on loopback:

    DATABASE_URL=postgres://…/serenity_<you> python -m bench.ledger --calls 400 --accepts 300

- Per upstream call: the same recorded operation (`get_workspace_status`, a confirm read) sent
  by a client with the ledger's recorder and by one without, interleaved A/B, so the machine's
  drift hits both alike; the difference of the medians is what the ledger adds to a call (the
  `X-Request-Id`, the record, its INSERT). The recorder's own time per call is timed too.
- Accept path: async brand creates with a market through Django's test client (publishing
  mocked: no broker), timed per request; what this change adds to an accept with tracing off
  (`kernel.tracing.traceparent()` per chain, an empty column) is timed on its own and divided
  by the accept's p99.

Prints one JSON object. Tracing must be off (no OTEL_EXPORTER_OTLP_ENDPOINT).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
os.environ.setdefault("SECRET_KEY", "bench-secret-key")
os.environ.setdefault("FIELD_ENCRYPTION_KEY", "bench-field-encryption-key-of-32-characters-or-more")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("SERENITY_VAR_DIR", str(Path(tempfile.gettempdir()) / "serenity-bench"))

TOKEN = "bench-token"
ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def simulator_process(parent: str) -> Iterator[str]:
    """The simulator in a process of its own (in this one, its thread would hold the GIL while
    the client times its calls); yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "manage.py", "semrush_simulator", "--port", str(port)]
    command += ["--token", TOKEN, "--parent", parent, "--settle-seconds", "0"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)  # noqa: S603
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening on" in line, line
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values) * 1000, 3),
        "p99": round(percentile(values, 0.99) * 1000, 3),
        "mean": round(statistics.fmean(values) * 1000, 3),
    }


def per_call(base_url: str, parent: str, organization_id: str, calls: int) -> dict[str, Any]:
    from provisioning.ledger.models import UpstreamCall
    from provisioning.ledger.recorder import LedgerRecorder
    from provisioning.semrush import SemrushClient

    workspace = SemrushClient(base_url=base_url, token=TOKEN).create_subworkspace(
        parent_id=parent, title=f"bench-{uuid.uuid4().hex[:8]}"
    )["id"]
    recorder = LedgerRecorder(organization_id=organization_id, brand_id=str(uuid.uuid4()))
    timed_records: list[float] = []

    recorded_attempt: Any = None

    class Timed:
        def record(self, attempt: Any) -> None:
            nonlocal recorded_attempt
            recorded_attempt = attempt
            started = time.perf_counter()
            recorder.record(attempt)
            timed_records.append(time.perf_counter() - started)

    def client(with_ledger: bool) -> SemrushClient:
        return SemrushClient(
            base_url=base_url, token=TOKEN, recorder=Timed() if with_ledger else None
        )

    from django.db import connection

    plain, ledgered = client(False), client(True)
    times: dict[bool, list[float]] = {False: [], True: []}
    round_trips: list[float] = []
    for index in range(calls * 3):
        arm = index % 3
        chosen = ledgered if arm == 1 else plain
        started = time.perf_counter()
        chosen.get_workspace_status(workspace_id=workspace)
        elapsed = time.perf_counter() - started
        if arm == 2:
            # The control: the machine's price of any one round trip to PostgreSQL at this
            # point of a call (after an HTTP answer), which the ledger's INSERT also pays.
            started = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            round_trips.append(time.perf_counter() - started)
            continue
        times[arm == 1].append(elapsed)
    added = statistics.median(times[True]) - statistics.median(times[False])
    # The recorder alone, back to back (PostgreSQL's backend kept busy: no wake-up to wait for).
    attempt = recorded_attempt
    back_to_back: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        recorder.record(attempt)
        back_to_back.append(time.perf_counter() - started)
    return {
        "calls_each": calls,
        "without_ledger_ms": summary_ms(times[False]),
        "with_ledger_ms": summary_ms(times[True]),
        "added_per_call_ms_median_difference": round(added * 1000, 3),
        "recorder_ms": summary_ms(timed_records),
        "control_select_1_ms": summary_ms(round_trips),
        "recorder_back_to_back_ms": summary_ms(back_to_back),
        "rows_written": UpstreamCall.objects.filter(organization_id=organization_id).count(),
        "tracing_on_in_this_process": False,
    }


def accepts(organization: Any, count: int) -> dict[str, Any]:
    from kernel import tracing
    from serenity.models import Role
    from tests.conftest import make_caller

    assert not tracing.tracing_enabled()
    caller = make_caller(organization, Role.WRITER)
    path = f"/v2/orgs/{organization.id}/brands"
    times: list[float] = []
    with mock.patch("jobs.services.publish_job", return_value=True):
        for index in range(count + 20):
            body = {
                "name": f"Bench {uuid.uuid4().hex[:12]}",
                "baseUrl": "https://bench.example",
                "async": True,
                "semrushMarket": {"market": "US", "languageCode": "en"},
            }
            started = time.perf_counter()
            response = caller.post(path, body)
            elapsed = time.perf_counter() - started
            assert response.status_code == 202, response.content
            if index >= 20:  # warm-up: caches, prepared statements
                times.append(elapsed)
    # What the change adds to an accept with tracing off: one `traceparent()` per chain (its
    # rows share it) and an empty column in the rows' INSERT (not separable: not timed).
    rounds = 100_000
    started = time.perf_counter()
    for _ in range(rounds):
        tracing.traceparent()
    added = (time.perf_counter() - started) / rounds
    p99 = percentile(times, 0.99)
    return {
        "accepts": count,
        "accept_ms": summary_ms(times),
        "added_per_accept_us": round(added * 1e6, 3),
        "added_share_of_p99": f"{added / p99:.6%}",
    }


def step_span_cost() -> dict[str, Any]:
    from kernel import tracing

    rounds = 100_000
    started = time.perf_counter()
    for _ in range(rounds):
        with tracing.step_span("step x", traceparent="", attributes={"a": "b"}):
            pass
    return {"step_span_off_us": round((time.perf_counter() - started) / rounds * 1e6, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--accepts", type=int, default=300)
    args = parser.parse_args(argv)
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        parser.error("measure with tracing off: unset OTEL_EXPORTER_OTLP_ENDPOINT")

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from tests.factories import OrganizationFactory

    call_command("migrate", verbosity=0)
    parent = f"parent-{uuid.uuid4()}"
    with simulator_process(parent) as base_url:
        settings.SEMRUSH_BASE_URL = base_url
        settings.SEMRUSH_API_TOKEN = TOKEN
        organization: Any = OrganizationFactory(semrush_parent_workspace_id=parent)
        report = {
            "per_upstream_call": per_call(base_url, parent, str(organization.id), args.calls),
            "accept_path": accepts(organization, args.accepts),
            "tracing_off": step_span_cost(),
            "cpu_count": os.cpu_count(),
            "load_average_after": os.getloadavg(),
        }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
