"""The SPEC §11.6 quota section of docs/benchmarks.md: the onboarding at Semrush's published
limits (`bench.quota.published_limits`), rendered from docs/benchmarks.json."""

from __future__ import annotations

from typing import Any

from bench.svg import Series, line_chart
from tests.harness import ROOT

VARIANTS = (
    ("quota_own", "its own credential"),
    ("quota_shared", "the first org's credential"),
    ("quota_onboarding", "its own credential, the brands in one bulk onboarding"),
)


def chart_path(key: str) -> Any:
    return ROOT / "docs" / f"benchmarks-{key.replace('_', '-')}.svg"


def _ok(met: bool | None) -> str:
    return "—" if met is None else ("**met**" if met else "**not met**")


def _variant(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get("current", {}).get(key)
    return value if isinstance(value, dict) else None


def summary_rows(data: dict[str, Any]) -> list[list[str]]:
    """The targets of SPEC §11.6 on the quota, one pair of rows per variant."""
    rows: list[list[str]] = []
    for key, who in VARIANTS:
        q = _variant(data, key)
        if q is None:
            continue
        if "error" in q:
            rows.append(
                [f"Onboarding at published limits ({who})", "—", q["error"][:80], "—", "❌"]
            )
            continue
        met = (
            q["within_bound"]
            and q["failed_chains"] == 0
            and q["stale_attempts"] == 0
            and q["rate_limited_pct"] < 1.0
            and q["peak_in_flight"] <= q["concurrency_per_token"]
        )
        second = q["second_org"]
        rows.append(
            [
                f"Onboarding: {q['count']} async creates with a market at "
                f"{q['rate_per_token']} requests/s and {q['concurrency_per_token']} in flight "
                f"per token, {q['latency_ms']} ms per call",
                "≤ 1.1 x (calls ÷ 10) + S + P; 0 failed, 0 stale, < 1 % 429, ≤ 10 in flight",
                f"{q['wall_s']:.1f} s for {q['upstream_calls']} calls (bound {q['bound_s']} s); "
                f"{q['failed_chains']} failed, {q['stale_attempts']} stale, "
                f"{q['rate_limited_429']} x 429 ({q['rate_limited_pct']} %), "
                f"peak {q['peak_in_flight']} in flight",
                "—",
                _ok(met),
            ]
        )
        rows.append(
            [
                f"Onboarding: a second org's create mid-run, on {who}",
                "≤ S + P + 2 s",
                f"{second.get('seconds')} s ({second.get('status')})",
                "—",
                _ok(q["second_org_within_bound"]),
            ]
        )
        if q.get("via_onboarding"):
            rows.append(
                [
                    f"Bulk onboarding of {q['count']} brands: upstream calls (the second org's "
                    "chain taken out)",
                    f"≤ 5.5 x N + 10 = {q['onboarding_calls_bound']}",
                    f"{q['onboarding_calls']}",
                    "—",
                    _ok(q["onboarding_calls"] <= q["onboarding_calls_bound"]),
                ]
            )
        else:
            rows.append(
                [
                    f"Onboarding: upstream calls per brand in steady state ({who})",
                    "≤ 7",
                    f"{q['calls_per_brand']}",
                    "—",
                    _ok(q["calls_per_brand"] <= 7),
                ]
            )
    return rows


def section(data: dict[str, Any], table: Any) -> str:
    """`table(header, rows)` renders a markdown table."""
    found = [(key, who, _variant(data, key)) for key, who in VARIANTS]
    found = [(key, who, q) for key, who, q in found if q and "error" not in q]
    if not found:
        return ""
    first = found[0][2]
    assert first is not None
    out = [
        "## 7. Onboarding at Semrush's published limits (SPEC §11.6, §12.5)\n",
        f"`python -m bench.run quota`: {first['warm']} creates first (the parent's settle time is "
        f"learned: steady state), then {first['count']} async brand creates with a US/en market "
        f"by one org, sent by {first['clients']} client threads, against the simulator at "
        f"`rateLimitPerSecond` {first['rate_per_token']} and `concurrencyLimit` "
        f"{first['concurrency_per_token']} per token, `latencyMs` {first['latency_ms']}; the "
        f"service at its defaults (SEMRUSH_RATE_LIMIT_PER_SECOND {first['rate_per_token']}, "
        f"SEMRUSH_CONCURRENCY_LIMIT {first['concurrency_per_token']}), S = "
        f"{first['settle_seconds']:.0f} s, P = {first.get('publish_seconds', 0):.0f} s (the "
        "simulator's `publishSeconds`: every publish is confirmed by a read before its chain "
        f"ends), stale threshold {first['stale_seconds']:.0f} s "
        f"(sweep every 10 s); workers {first['workers']}. When half of the chains were done, a "
        "second org started one async create, polled until it finished: once with its own "
        "credential, once with the first org's (two runs). Calls are every request the "
        "simulator saw from the first burst request on (429s included); calls in flight are "
        "counted from its log (arrival + duration).\n",
    ]
    rows = []
    for key, who, q in found:
        assert q is not None
        second = q["second_org"]
        rows.append(
            [
                who,
                f"{q['wall_s']:.1f} s",
                f"{q['upstream_calls']}",
                f"{q['bound_s']} s",
                f"{q['created_201']} / {q['failed_chains']} / {q['stale_attempts']}",
                f"{q['rate_limited_429']} ({q['rate_limited_pct']} %)",
                f"{q['peak_in_flight']}",
                f"{q['calls_per_brand']}",
                f"{second.get('seconds')} s ({second.get('status')})",
            ]
        )
        _chart(key, who, q)
    out.append(
        table(
            [
                "second org on",
                "wall",
                "calls",
                "bound 1.1 x calls ÷ 10 + S + P",
                "201 / failed / stale",
                "429",
                "peak in flight",
                "calls per brand",
                "second org's create",
            ],
            rows,
        )
    )
    for key, who, q in found:
        assert q is not None
        out.append(f"\nCalls by operation, {who} run (all brands, 429s excluded):\n")
        out.append(
            table(
                ["operation", "calls", "per brand"],
                [
                    [name, str(n), f"{n / (q['count'] + 1):.2f}"]
                    for name, n in q["calls_by_operation"].items()
                ],
            )
        )
        steps = q["second_org"].get("steps") or []
        if steps:
            out.append(f"\nThe second org's chain ({who}; seconds since its POST):\n")
            out.append(
                table(
                    ["step", "status", "claims", "due", "started", "finished"],
                    [
                        [
                            st["step"],
                            st["status"],
                            str(st["run_count"]),
                            str(st["due_s"]),
                            str(st["started_s"]),
                            str(st["finished_s"]),
                        ]
                        for st in steps
                    ],
                )
            )
        out.append(f"\n![calls per second and in flight, {who}]({chart_path(key).name})\n")
    return "\n".join(out)


def _chart(key: str, who: str, q: dict[str, Any]) -> None:
    per_second = q["calls_per_second"]
    flight = q["in_flight_per_second"]
    span = float(max(len(per_second), len(flight)))
    chart_path(key).write_text(
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
                    f"limits: {q['rate_per_token']}/s, {q['concurrency_per_token']} in flight",
                    [(0.0, float(q["rate_per_token"])), (span, float(q["rate_per_token"]))],
                    dashed=True,
                ),
            ],
            title=f"Onboarding of {q['count']} brands at the published limits (2nd org on {who})",
            x_label="seconds since the first burst request",
            y_label="calls",
            vlines=[(q["second_org_started_s"], "2nd org")],
        )
    )
