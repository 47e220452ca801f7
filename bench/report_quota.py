"""The measurements at Semrush's published limits in docs/benchmarks.md (`bench.run onboarding`
and `bench.run quota`, bench.quota; `bench.run quota50`, bench.scenarios.quota), read from
docs/benchmarks.json, and the onboarding's chart."""

from __future__ import annotations

from pathlib import Path

from bench.report_parts import Entry, Figure, Measurement
from bench.svg import Series, line_chart

ONBOARDING_CHART = Path(__file__).resolve().parents[1] / "docs" / "benchmarks-onboarding.svg"

LIMITS = (
    "The simulator at Semrush's published limits: 10 requests/s and 10 calls in flight per "
    "token, 100 ms per call; S = 5 s, P = 2 s (the simulator's `publishSeconds`: every publish "
    "is confirmed by a read before its chain ends), the stale threshold at 60 s (swept every "
    "10 s); the service at its defaults (10 requests/s, 10 in flight). Three creates first, so "
    "that the parent's settle time is learned (steady state). Calls are every request the "
    "simulator saw from the first one of the burst on, 429s included; calls in flight are "
    "counted from its log."
)
ONBOARDING_WHAT = (
    "One org onboards 300 brands with a US/en market each in one bulk onboarding request "
    "; a second org makes one async create half-way (its chain's calls are taken "
    "out of the onboarding's). " + LIMITS
)
ONBOARDING_COMMAND = ".venv/bin/python -m bench.run onboarding"


def _publish_seconds(entry: Entry) -> float:
    # Entries measured before publishing was confirmed have no P (it was 0 then).
    return float(entry.get("publish_seconds") or 0.0)


def _onboarding_calls(entry: Entry) -> Figure | None:
    if "onboarding_calls" not in entry or not entry.get("via_onboarding"):
        return None
    bound = 5.5 * entry["count"] + 10
    return Figure(
        f"{entry['onboarding_calls']} calls for {entry['count']} brands "
        f"(bound {bound:g}; {entry['onboarding_calls'] / entry['count']:.2f} per brand)",
        entry["onboarding_calls"] <= bound,
    )


def _onboarding_wall(entry: Entry) -> Figure | None:
    if "wall_s" not in entry or not entry.get("via_onboarding"):
        return None
    calls = entry["upstream_calls"]
    bound = 1.05 * calls / entry["rate_per_token"] + entry["settle_seconds"]
    bound += _publish_seconds(entry)
    met = (
        entry["wall_s"] <= bound
        and entry["failed_chains"] == 0
        and entry["stale_attempts"] == 0
        and entry["rate_limited_pct"] < 1.0
        and entry["peak_in_flight"] <= entry["concurrency_per_token"]
    )
    by_operation = ", ".join(f"{k} {v}" for k, v in entry.get("calls_by_operation", {}).items())
    return Figure(
        f"{entry['wall_s']:.1f} s for {calls} calls (bound {bound:.1f} s); "
        f"{entry['failed_chains']} failed, {entry['stale_attempts']} stale, "
        f"{entry['rate_limited_429']} x 429 ({entry['rate_limited_pct']} %), "
        f"at most {entry['peak_in_flight']} in flight",
        met,
        (
            f"Calls by operation (429s excluded): {by_operation}.",
            f"![calls per second and in flight]({ONBOARDING_CHART.name})",
        ),
    )


def _calls_per_brand(entry: Entry) -> Figure | None:
    if "calls_per_brand" not in entry or entry.get("via_onboarding"):
        return None
    by_operation = ", ".join(f"{k} {v}" for k, v in entry.get("calls_by_operation", {}).items())
    return Figure(
        f"{entry['calls_per_brand']} calls per brand",
        entry["calls_per_brand"] <= 7,
        (
            f"{entry['count']} creates and the second org's one: {by_operation} (429s "
            f"excluded). The burst took {entry['wall_s']:.1f} s for {entry['upstream_calls']} "
            f"calls, {entry['rate_limited_429']} x 429.",
        ),
    )


def _quota50(entry: Entry) -> Figure | None:
    if "calls_per_brand" not in entry:
        return None
    return Figure(
        f"{entry['calls_per_brand']} calls per brand; {entry['wall_s']:.1f} s for "
        f"{entry['upstream_calls']} calls, {entry['failed_chains']} failed, "
        f"{entry['rate_limited_429']} x 429",
        None,
    )


MEASUREMENTS = (
    Measurement(
        section="Onboarding of 300 brands at Semrush's published limits",
        title="Onboarding of 300 brands at the published limits: upstream calls",
        what=ONBOARDING_WHAT,
        bound="≤ 5.5 x 300 + 10 = 1660",
        key="quota_onboarding",
        command=ONBOARDING_COMMAND,
        figure=_onboarding_calls,
    ),
    Measurement(
        section="Onboarding of 300 brands at Semrush's published limits",
        title="Onboarding of 300 brands at the published limits: wall time and failures",
        what=ONBOARDING_WHAT,
        bound=(
            "wall ≤ 1.05 x calls ÷ 10 + S + P; 0 failed, 0 stale, < 1 % of calls 429, "
            "≤ 10 in flight"
        ),
        key="quota_onboarding",
        command=ONBOARDING_COMMAND,
        figure=_onboarding_wall,
    ),
    Measurement(
        section="Single async creates at Semrush's published limits",
        title="Single async creates: upstream calls per brand with a market",
        what=(
            "One org sends 300 single async brand creates with a US/en market (8 clients); a "
            "second org makes one async create half-way. " + LIMITS + " `bench.run quota` "
            "makes this run twice (the second org on its own credential, then on the first "
            "org's); the figure is the first run's (`quota_own`)."
        ),
        bound="≤ 7 in steady state",
        key="quota_own",
        command=".venv/bin/python -m bench.run quota",
        figure=_calls_per_brand,
    ),
)

WATCHED = (
    Measurement(
        section="1,000 async creates at 50 requests/s (no bound)",
        title="1,000 async creates at 50 requests/s: calls per brand (no bound)",
        what=(
            "One org sends 1,000 async brand creates with a market (16 clients) against the "
            "simulator at 50 requests/s per token, its limiter at 50/s; a second org makes one "
            "async create half-way. It has no bound of its own."
        ),
        bound="none",
        key="quota",
        command=".venv/bin/python -m bench.run quota50",
        figure=_quota50,
    ),
)


def write_chart(entry: Entry) -> None:
    """The onboarding's calls per second and calls in flight (docs/benchmarks-onboarding.svg)."""
    per_second = entry["calls_per_second"]
    flight = entry["in_flight_per_second"]
    span = float(max(len(per_second), len(flight)))
    rate = float(entry["rate_per_token"])
    ONBOARDING_CHART.write_text(
        line_chart(
            [
                Series(
                    "upstream calls per second",
                    [(float(i), float(n)) for i, n in enumerate(per_second)],
                    step=True,
                ),
                Series(
                    "most calls in flight in that second",
                    [(float(i), float(n)) for i, n in enumerate(flight)],
                    step=True,
                ),
                Series(
                    f"limits: {entry['rate_per_token']}/s, "
                    f"{entry['concurrency_per_token']} in flight",
                    [(0.0, rate), (span, rate)],
                    dashed=True,
                ),
            ],
            title=f"Onboarding of {entry['count']} brands at the published limits",
            x_label="seconds since the first burst request",
            y_label="calls",
            vlines=[(entry["second_org_started_s"], "2nd org")],
        )
    )
