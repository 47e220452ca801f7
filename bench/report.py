"""Renders docs/benchmarks.md and its charts from docs/benchmarks.json (written by bench.run).

Figures come from the label `current` (the code and worker setup as they are); a label
`before` (the same measurements of the code before issue 14, "Idiomatic core") is shown beside
them where it exists; `issue6-baseline` keeps the figures from before issue 6.
`bench/findings.md` (hand-written: what was changed, what the profiles show in code this suite
does not own) is appended verbatim.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench import report_fairness, report_quota
from bench.svg import Series, line_chart
from bench.webhooks import report_section as webhooks_section
from tests.harness import ROOT

REPORT = ROOT / "docs" / "benchmarks.md"
FINDINGS = ROOT / "bench" / "findings.md"
FANOUT_SVG = ROOT / "docs" / "benchmarks-fanout.svg"
GUARD_SVG = ROOT / "docs" / "benchmarks-guard.svg"
QUOTA_SVG = ROOT / "docs" / "benchmarks-quota.svg"


def _get(data: dict[str, Any], label: str, key: str) -> dict[str, Any] | None:
    value = data.get(label, {}).get(key)
    return value if isinstance(value, dict) else None


def _ok(met: bool | None) -> str:
    return "—" if met is None else ("**met**" if met else "**not met**")


def _ms(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "—"


def _accept_query_count(accept: dict[str, Any] | None) -> int | None:
    if not accept:
        return None
    entry = accept.get("queries", {}).get("market_create_async_1")
    return int(entry["queries"]) if entry else None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b:
        return None
    return round(a / b, 2)


def _summary_rows(data: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []

    def both(key: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        return _get(data, "current", key), _get(data, "before", key)

    accept, accept_before = both("accept")
    q_now, q_before = _accept_query_count(accept), _accept_query_count(accept_before)
    rows.append(
        [
            "Accept: SQL statements per accepted async market create",
            "≤ 12",
            str(q_now) if q_now is not None else "—",
            str(q_before) if q_before is not None else "—",
            _ok(q_now <= 12 if q_now is not None else None),
        ]
    )

    def accept_ratio(a: dict[str, Any] | None, mixed: bool) -> float | None:
        if not a:
            return None
        if mixed:
            return _ratio(a["mixed"]["accept"]["p99_ms"], a["mixed"]["brand_get"]["p99_ms"])
        return _ratio(a["accept"]["p99_ms"], a["brand_get"]["p99_ms"])

    for mixed, title in (
        (False, "Accept: p99(accept) / p99(GET brand), separate phases, 16 clients"),
        (True, "Accept: p99(accept) / p99(GET brand), shuffled in one phase, 16 clients"),
    ):
        now, before = accept_ratio(accept, mixed), accept_ratio(accept_before, mixed)
        rows.append(
            [
                title,
                "≤ 3",
                f"{now}" if now is not None else "—",
                f"{before}" if before is not None else "—",
                _ok(now <= 3 if now is not None else None),
            ]
        )
    e2e, e2e_before = both("e2e")
    rows.append(
        [
            "End-to-end: median (time to COMPLETED - S), S = 5 s, 20 runs",
            "≤ 0.5 s",
            f"{e2e['median_overhead_s']:.2f} s" if e2e else "—",
            f"{e2e_before['median_overhead_s']:.2f} s" if e2e_before else "—",
            _ok(e2e["median_overhead_s"] <= 0.5 and e2e["all_completed"] if e2e else None),
        ]
    )
    for size, bound in ((200, 2), (1000, 5)):
        fan_now, fan_before = both(f"fanout_{size}")

        def fig(v: dict[str, Any] | None) -> str:
            if not v:
                return "—"
            if "error" in v:
                return f"did not finish ({v['error'][:60]}…)"
            figure = f"{v['wall_over_s']} x S ({v['wall_s']:.1f} s), {v['failures']} failed"
            runs = v.get("runs") or []
            if len(runs) > 1:
                walls = [r["wall_over_s"] for r in runs]
                figure += (
                    f" (median of {len(runs)} runs: {min(walls)} to {max(walls)} x S, "
                    f"{sum(r['failures'] for r in runs)} failed in all)"
                )
            return figure

        met = None
        if fan_now and "error" not in fan_now:
            # Every run must meet it (one run: that run).
            met = all(
                r["wall_over_s"] <= bound and r["failures"] == 0
                for r in (fan_now.get("runs") or [fan_now])
            )
        elif fan_now:
            met = False
        # SPEC §11.6 retired these bounds (CPU on a shared machine; the quota is the limit
        # that matters): the figures are reported, the verdict is not a target any more.
        rows.append(
            [
                f"Fan-out: {size} async brand creates with a market, S = 5 s, 2 worker processes",
                f"(was ≤ {bound} x S; retired by SPEC §11.6)",
                fig(fan_now),
                fig(fan_before),
                "retired" if met is not None else "—",
            ]
        )
    poll, poll_before = both("polling")

    def poll_fig(p: dict[str, Any] | None) -> str:
        if not p:
            return "—"
        return (
            f"{p['steps_2']['queries']} vs {p['steps_6']['queries']} queries; "
            f"p50 ratio {p['ratio_p50']}, p99 ratio {p['ratio_p99']}"
        )

    rows.append(
        [
            "Polling: job route, chain of 6 vs 2 steps",
            "same queries, ratio ≤ 1.2",
            poll_fig(poll),
            poll_fig(poll_before),
            _ok(
                poll["steps_2"]["queries"] == poll["steps_6"]["queries"]
                and poll["ratio_p50"] <= 1.2
                if poll
                else None
            ),
        ]
    )
    rows.extend(report_quota.summary_rows(data))
    rows.extend(report_fairness.summary_rows(data))
    quota = _get(data, "current", "quota")
    if quota is not None:
        rows.extend(_quota_rows(quota))
    guard = _get(data, "current", "guard")
    if guard:
        one, many = guard["one_brand"], guard["many_brands"]
        rows.append(
            [
                f"Guard: {guard['concurrent']} concurrent async creates on one brand vs on "
                f"{guard['concurrent']} brands",
                "(no target)",
                f"one brand: {', '.join(f'{k}: {v}' for k, v in one['statuses'].items())}, "
                f"p99 {one['p99_ms']:.0f} ms; {guard['concurrent']} brands: "
                f"{', '.join(f'{k}: {v}' for k, v in many['statuses'].items())}, "
                f"p99 {many['p99_ms']:.0f} ms",
                "see section 5",
                "—",
            ]
        )
    return rows


def _quota_rows(q: dict[str, Any]) -> list[list[str]]:
    """The two targets of SPEC §10.7 on the upstream quota."""
    if "error" in q:
        return [["Quota: async creates at R = 50/s per token", "—", q["error"][:80], "—", "❌"]]
    second = q["second_org"]
    return [
        [
            f"Quota: {q['count']} async brand creates with a market, simulator at "
            f"R = {q['rate_per_token']} requests/s per token "
            f"(org limiter {q['org_limit']['rate']}/s)",
            "≤ 1.15 x (upstream calls ÷ R) + S, 0 failed chains, < 1 % of calls 429",
            f"{q['wall_s']:.1f} s for {q['upstream_calls']} calls "
            f"(bound {q['bound_s']:.1f} s), "
            f"{q['failed_chains']} failed, {q['rate_limited_429']} x 429 "
            f"({q['rate_limited_pct']} %)",
            "—",
            _ok(q["within_bound"] and q["failed_chains"] == 0 and q["rate_limited_pct"] < 1.0),
        ],
        [
            "Quota: a second org's single async create started mid-burst",
            "≤ S + 2 s",
            f"{second.get('seconds')} s ({second.get('status')}, started at "
            f"{q['second_org_started_s']} s)",
            "—",
            _ok(q["second_org_within_bound"]),
        ],
    ]


def _quota_section(data: dict[str, Any]) -> str:
    q = _get(data, "current", "quota")
    if not q or "error" in q:
        return ""
    out = ["## 6. Upstream quota at 50 requests/s (`bench.run quota50`)\n"]
    out.append(
        f"{q['count']} async brand creates with a market (US/en) by one org, sent by "
        f"{q['clients']} client threads, against the simulator limited to "
        f"{q['rate_per_token']} requests/s per bearer token (`rateLimitPerSecond`, a sliding "
        f"one-second window, `Retry-After: 1`); the org's own limiter at "
        f"{q['org_limit']['rate']}/s, burst {q['org_limit']['burst']} (`Organization` override); "
        f"S = {q['settle_seconds']:.0f} s; workers {q['workers']}. When half of its chains were "
        "done, a second org with its own credential started one async create, polled until it "
        "finished. Upstream calls are every request the simulator saw (429s included).\n"
    )
    second = q["second_org"]
    out.append(
        _table(
            ["measure", "value"],
            [
                ["accepting the creates took", f"{q['accept_s']:.1f} s"],
                ["wall (first request → last chain finished)", f"**{q['wall_s']:.1f} s**"],
                ["upstream calls (÷ R = ideal)", f"{q['upstream_calls']} ({q['ideal_s']} s)"],
                ["bound 1.15 x calls ÷ R + S", f"{q['bound_s']} s"],
                ["429 answers", f"{q['rate_limited_429']} ({q['rate_limited_pct']} %)"],
                [
                    "chains completed / 201 / failed",
                    f"{q['completed']} / {q['created_201']} / {q['failed_chains']}",
                ],
                [
                    "step rows / claims (a claim beyond a row's first is a re-scheduling)",
                    f"{q['step_rows']} / {q['claims']}",
                ],
                [
                    "second org: POST → COMPLETED",
                    f"**{second.get('seconds')} s** "
                    f"(bound {second.get('bound_s')} s), started {q['second_org_started_s']} s in",
                ],
            ],
        )
    )
    steps = second.get("steps") or []
    if steps:
        out.append("\nThe second org's chain (seconds since its POST):\n\n")
        out.append(
            _table(
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
    per_second = q["permits_per_second"]
    rate = float(q["rate_per_token"])
    QUOTA_SVG.write_text(
        line_chart(
            [
                Series(
                    "upstream requests (= permits granted) per second",
                    [(float(i), float(n)) for i, n in enumerate(per_second)],
                    step=True,
                ),
                Series(
                    f"R = {q['rate_per_token']}/s",
                    [(0.0, rate), (float(len(per_second)), rate)],
                    dashed=True,
                ),
            ],
            title=f"Quota: permits per second, {q['count']} chains at R = {q['rate_per_token']}/s",
            x_label="seconds since the first request",
            y_label="requests per second",
            vlines=[(q["second_org_started_s"], "2nd org")],
        )
    )
    out.append(f"\n![permits per second]({QUOTA_SVG.name})\n")
    return "\n".join(out)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _latency_row(name: str, s: dict[str, Any]) -> list[str]:
    return [
        name,
        str(s["requests"]),
        f"{s['throughput_rps']}",
        _ms(s["p50_ms"]),
        _ms(s["p90_ms"]),
        _ms(s["p99_ms"]),
        _ms(s["max_ms"]),
        ", ".join(f"{k}: {v}" for k, v in s["statuses"].items()),
    ]


LATENCY_HEADER = ["phase", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "statuses"]


def _accept_section(data: dict[str, Any]) -> str:
    out = ["## 1. Accept path\n"]
    for label in ("current", "before"):
        a = _get(data, label, "accept")
        if not a:
            continue
        out.append(
            f"**{label}** — {a['brands']} brands with a workspace, one async market create each, "
            f"{a['clients']} concurrent clients (keep-alive), API {a['api']}, workers "
            f"{a['workers']}.\n"
        )
        rows = [
            _latency_row("`GET /healthz` (alone)", a["healthz"]),
            _latency_row("`GET /v2/orgs/{o}/brands/{b}` (alone)", a["brand_get"]),
            _latency_row(
                "`POST B/serenity/markets` async (alone"
                + (", workers paused)" if a.get("accept_workers_paused") else ", workers running)"),
                a["accept"],
            ),
            _latency_row("shuffled: `POST …/markets` async", a["mixed"]["accept"]),
            _latency_row("shuffled: `GET …/brands/{b}`", a["mixed"]["brand_get"]),
        ]
        out.append(_table(LATENCY_HEADER, rows))
    a = _get(data, "current", "accept")
    if a:
        q = a["queries"]
        counts = [
            [name, str(q[key]["queries"]), str(q[key].get("published", "—"))]
            for name, key in (
                ("`GET /healthz`", "healthz"),
                ("`GET B` (read a brand)", "brand_get"),
                ("`POST B/serenity/markets` async", "market_create_async_1"),
                ("`POST /v2/orgs/{o}/brands` async with a market", "brand_create_async_market_1"),
                ("`GET B/serenity/jobs/{id}` (2 steps)", "poll_2_steps_1"),
                ("`GET B/serenity/jobs/{id}` (6 steps)", "poll_6_steps_1"),
            )
            if key in q
        ]
        out.append(
            "\nSQL statements per request (Django's `connection.execute_wrapper` around the test "
            "client, in a process with the stack's settings, same database and broker; "
            "`BEGIN`/`COMMIT` are not statements Django executes and are not counted; "
            "'published' = the job's message was sent after commit):\n\n"
        )
        out.append(_table(["request", "statements", "published"], counts))
        for key, title in (
            ("market_create_async_1", "async market create"),
            ("brand_create_async_market_1", "async brand create with a market"),
        ):
            if key not in q:
                continue
            out.append(f"\n<details><summary>Statements of one {title}</summary>\n\n")
            out.append(
                _table(
                    ["#", "ms", "issued by", "SQL (first 110 characters)"],
                    [
                        [
                            str(i),
                            f"{s['ms']:.2f}",
                            f"`{s['from']}`",
                            "`" + s["sql"][:110].replace("|", "\\|") + "`",
                        ]
                        for i, s in enumerate(q[key]["statements"], 1)
                    ],
                )
            )
            out.append("\n</details>\n")
    return "\n".join(out)


def _e2e_phases(sample: dict[str, Any]) -> dict[str, float] | None:
    steps = sample["steps"]
    reads = [s for s in steps if s["step"] == "provisionWorkspace"]
    chained = [s for s in steps if s["step"] != "provisionWorkspace"]
    if not reads or not chained or chained[0]["finished"] is None:
        return None
    last_read = reads[-1]
    return {
        "first step starts": reads[0]["started"] or 0.0,
        "first step (create-or-adopt + 1st read)": reads[0]["finished"] - reads[0]["started"],
        "last read: late vs due": (last_read["started"] or 0) - (last_read["due"] or 0),
        "last read + promote": last_read["finished"] - last_read["started"],
        "create-market starts after promote": chained[0]["started"] - last_read["finished"],
        "create-market runs": chained[0]["finished"] - chained[0]["started"],
        "poller sees it after": sample["seen_s"] - chained[0]["finished"],
    }


def _e2e_section(data: dict[str, Any]) -> str:
    out = ["## 2. End-to-end overhead\n"]
    for label in ("current", "before"):
        e = _get(data, label, "e2e")
        if not e:
            continue
        out.append(
            f"**{label}** — {e['runs']} async brand creates with a market, one at a time, "
            f"simulator settle S = {e['settle_seconds']} s, backoff `{e['backoff']}` (default), "
            f"workers {e['workers']}; a poller reads the job every 100 ms.\n\n"
            f"Time to COMPLETED - S: median **{e['median_overhead_s']:.3f} s** (min "
            f"{e['min_overhead_s']:.3f}, max {e['max_overhead_s']:.3f}); every run "
            f"{'COMPLETED' if e['all_completed'] else 'did NOT complete'}, chained results "
            f"{', '.join(e['result_statuses'])}.\n"
        )
        phases = [p for p in (_e2e_phases(s) for s in e["samples"]) if p]
        if phases:
            rows = [
                [name, f"{statistics.median(p[name] for p in phases) * 1000:.0f}"]
                for name in phases[0]
            ]
            accept = statistics.median(s["accept_ms"] for s in e["samples"])
            rows.insert(0, ["accept (client-side latency)", f"{accept:.0f}"])
            out.append(
                "\nWhere the time goes (median over the runs, ms; times from the job rows, "
                "relative to the root's insert):\n\n"
            )
            out.append(_table(["phase", "median ms"], rows))
    return "\n".join(out)


def _fanout_section(data: dict[str, Any]) -> str:
    out = ["## 3. Fan-out\n"]
    header = [
        "run",
        "workers",
        "accepting took",
        "wall",
        "wall ÷ S",
        "completed / 201",
        "failures",
        "step rows",
        "worker-slot time",
        "per chain: accept → COMPLETED p50 / p99",
        "last accept → last COMPLETED",
    ]
    rows = []
    series: list[Series] = []
    for label in ("current", "before"):
        for size, suffix in ((200, ""), (1000, ""), (200, "_drain"), (1000, "_drain")):
            f = data.get(label, {}).get(f"fanout_{size}{suffix}")
            if not f:
                continue
            name = f"{label}, {size}" + (" (drain)" if suffix else "")
            if "error" in f:
                rows.append([name, f["workers"], "—", f["error"][:80], "—", "—", "—"])
                continue
            rows.append(
                [
                    name,
                    f["workers"],
                    f"{f['accept_s']:.1f} s",
                    f"{f['wall_s']:.1f} s",
                    f"**{f['wall_over_s']}**",
                    f"{f['completed']} / {f['created_201']}",
                    str(f["failures"]),
                    f"{f['step_rows']} ({f['settle_reads']} settle reads)",
                    f"{f['busy_slot_s']:.0f} s",
                    f"{f['chain_s']['p50_s']} s / {f['chain_s']['p99_s']} s"
                    if "chain_s" in f
                    else "—",
                    f"{f['after_last_accept_s']} s" if "after_last_accept_s" in f else "—",
                ]
            )
            curve = f["completion_curve"]
            points = [(0.0, 0.0)] + [(t, 100 * (i + 1) / size) for i, t in enumerate(curve)]
            if not suffix:
                series.append(
                    Series(f"{label}: {size} chains", points, step=True, dashed=label == "before")
                )
    out.append(
        "Async brand creates with a market (`semrushMarket` US/en), all sent at once by 32 "
        "client threads; simulator settle S = 5 s; default backoff. Wall = from the first "
        "request to the last chain COMPLETED. 'Worker-slot time' is the sum over every step row "
        "of (finished - started): the time steps actually held a worker slot. '(drain)': the "
        "workers were paused (SIGSTOP) while the requests were answered and the clock starts "
        "when they resume, which leaves the accept path's cost out and shows what the two "
        "worker processes alone take.\n"
    )
    out.append(_table(header, rows))
    if series:
        FANOUT_SVG.write_text(
            line_chart(
                series,
                title="Fan-out: chains completed over time (S = 5 s)",
                x_label="seconds since the first request",
                y_label="% of chains COMPLETED",
                vlines=[(5.0, "S"), (10.0, "2xS"), (20.0, "4xS")],
            )
        )
        out.append(f"\n![fan-out completion]({FANOUT_SVG.name})\n")
    out.append(_fanout_cpu_table(data))
    for label in ("current", "before"):
        f = data.get(label, {}).get("fanout_1000") or data.get(label, {}).get("fanout_200")
        if f and "step_ms" in f:
            out.append(f"\nStep durations ({label}, {f['count']} chains, ms):\n\n")
            out.append(
                _table(
                    ["step", "p50", "p90", "p99", "max"],
                    [
                        [k, _ms(v["p50_ms"]), _ms(v["p90_ms"]), _ms(v["p99_ms"]), _ms(v["max_ms"])]
                        for k, v in f["step_ms"].items()
                    ],
                )
            )
    return "\n".join(out)


def _fanout_cpu_table(data: dict[str, Any]) -> str:
    """CPU seconds each component used during each fan-out (from the first request to the last
    chain COMPLETED), for the runs that recorded them."""
    runs = [
        (f"{label}, {key.removeprefix('fanout_').replace('_drain', ' (drain)')}", value)
        for label in ("current", "before")
        for key, value in sorted(data.get(label, {}).items(), key=lambda kv: kv[0])
        if key.startswith("fanout_") and isinstance(value, dict) and value.get("cpu_s")
    ]
    if not runs:
        return ""
    parts = list(runs[0][1]["cpu_s"])
    rows = []
    for name, value in runs:
        cpu = value["cpu_s"]
        total = sum(cpu.values())
        rows.append(
            [
                name,
                *[f"{cpu.get(p, 0.0):.1f}" for p in parts],
                f"{total:.1f}",
                f"{1000 * total / value['count']:.0f}",
                f"{value['wall_s']:.1f}",
            ]
        )
    return (
        "\nCPU seconds by component during each fan-out (user + system time of each process "
        "tree; PostgreSQL = every `postgres` process; the load generator = the benchmark "
        "process). With two cores, the wall time cannot be less than half the total:\n\n"
        + _table(["run", *parts, "total", "ms per chain", "wall s"], rows)
    )


def _polling_section(data: dict[str, Any]) -> str:
    out = ["## 4. Polling\n"]
    for label in ("current", "before"):
        p = _get(data, label, "polling")
        if not p:
            continue
        out.append(
            f"**{label}** — finished chains built by the job services (root, settle reads, "
            f"create-market), {p['requests']} reads of each over HTTP by one client, "
            "alternating.\n"
        )
        out.append(
            _table(
                ["chain", "SQL statements", "p50 ms", "p90 ms", "p99 ms"],
                [
                    [
                        f"{n} steps",
                        str(p[f"steps_{n}"]["queries"]),
                        _ms(p[f"steps_{n}"]["p50_ms"]),
                        _ms(p[f"steps_{n}"]["p90_ms"]),
                        _ms(p[f"steps_{n}"]["p99_ms"]),
                    ]
                    for n in (2, 6)
                ],
            )
        )
        out.append(f"\nRatio 6/2 steps: p50 {p['ratio_p50']}, p99 {p['ratio_p99']}.\n")
    return "\n".join(out)


def _guard_section(data: dict[str, Any]) -> str:
    out = ["## 5. Guard contention\n"]
    series: list[Series] = []
    for label in ("current", "before"):
        g = _get(data, label, "guard")
        if not g:
            continue
        out.append(
            f"**{label}** — {g['concurrent']} async market creates (distinct slices) released "
            f"together at one brand, vs one each at {g['concurrent']} brands; "
            f"{g['concurrent']} client threads"
            + ("; workers paused during each burst" if label == "current" else "")
            + ".\n"
        )
        rows = []
        for key, name in (("one_brand", "one brand"), ("many_brands", "50 brands")):
            s = g[key]
            rows.append(
                [
                    *_latency_row(name, s)[:-1],
                    ", ".join(f"{k}: {v}" for k, v in s["statuses"].items()),
                    ", ".join(f"{k}: {v}" for k, v in s["errors"].items()) or "—",
                ]
            )
            lat = s["latencies_ms"]
            series.append(
                Series(
                    f"{label}: {name}",
                    [(x, 100 * (i + 1) / len(lat)) for i, x in enumerate(lat)],
                    step=True,
                    dashed=label == "before",
                )
            )
        out.append(_table([*LATENCY_HEADER, "error codes"], rows))
    if series:
        GUARD_SVG.write_text(
            line_chart(
                series,
                title="Guard contention: latency distribution (50 concurrent requests)",
                x_label="latency (ms)",
                y_label="% of requests answered",
            )
        )
        out.append(f"\n![guard latency CDF]({GUARD_SVG.name})\n")
    return "\n".join(out)


def _profile_section(data: dict[str, Any]) -> str:
    out = ["## 9. Profiles\n"]
    sources = [
        ("accept", "API workers (gunicorn) during the accept phase"),
        ("fanout_1000", "Celery workers during the 1000-chain fan-out"),
        ("fanout_200", "Celery workers during the 200-chain fan-out"),
    ]
    out.append(
        "py-spy (`record --format raw --nonblocking`, 200 Hz) on every process of the role, "
        "on-CPU samples only (threads blocked in a system call are not sampled, but py-spy "
        "counts psycopg's wait loop as running). Raw folded stacks: `var/bench/profiles/`.\n"
    )
    for label in ("current", "before"):
        for key, title in sources:
            entry = data.get(label, {}).get(key)
            prof = entry.get("profile") if isinstance(entry, dict) else None
            if not prof or "samples" not in prof:
                continue
            out.append(f"\n### {title} ({label}, {prof['samples']} samples)\n")
            out.append(
                _table(
                    ["by library (leaf frame)", "% samples"],
                    [[k, f"{v}"] for k, v in prof["areas"][:8]],
                )
            )
            out.append("\n")
            out.append(
                _table(
                    ["this project's function (inclusive)", "% samples"],
                    [[f"`{k}`", f"{v}"] for k, v in prof["inclusive_ours"][:12]],
                )
            )
            out.append("\n")
            out.append(
                _table(
                    ["leaf function (self)", "% samples"],
                    [[f"`{k}`", f"{v}"] for k, v in prof["self_leaves"][:10]],
                )
            )
    return "\n".join(out)


def _machine_section(data: dict[str, Any]) -> str:
    m = data.get("machine", {})
    loads = []
    probes = []
    for label in ("current", "before"):
        for key, value in sorted(data.get(label, {}).items()):
            if isinstance(value, dict) and "loadavg_after" in value:
                loads.append(f"{label}/{key}: {value['loadavg_after'][0]}")
            if isinstance(value, dict) and "cpu_probe_ms" in value:
                before, after = value["cpu_probe_ms"]
                probes.append(f"{label}/{key}: {before} / {after}")
    return (
        "## Machine\n\n"
        + _table(
            ["", ""],
            [
                ["CPUs (`nproc`)", str(m.get("cpus"))],
                ["memory", f"{m.get('memory_gib')} GiB"],
                ["Python", str(m.get("python"))],
                ["PostgreSQL", str(m.get("postgresql"))],
                ["Redis", str(m.get("redis"))],
                ["platform", str(m.get("platform"))],
                ["measured", str(m.get("date"))],
            ],
        )
        + "\nAbsolute latencies are noisy on this machine (the 'before' runs had other test "
        "suites beside them; the 'current' ones had nothing else of ours), so the ratios "
        "measured within one run are the figures to read. 1-minute load average after each "
        "measurement: "
        + (", ".join(loads) or "—")
        + ".\n\nThe CPU's speed itself varies by up to 2x within minutes (a virtual machine on "
        "a shared host): a fixed pure-Python loop (`bench.stack.cpu_probe_ms`, median of 5) took, "
        "in ms, before / after each measurement that recorded it: "
        + (", ".join(probes) or "—")
        + ". Compare figures of runs whose probes are alike.\n"
    )


HOW_TO = """\
## How to run

```sh
.venv/bin/pip install py-spy                  # once (profiles; optional)
.venv/bin/python -m bench.run all             # every measurement (~10 min), then this file
.venv/bin/python -m bench.run fanout --drain --repeat 1 --no-profile  # the '(drain)' rows
.venv/bin/python -m bench.run fanout --sizes 200        # one measurement; the others are kept
.venv/bin/python -m bench.run fanout --repeat 1 --no-profile  # one run per size, no py-spy
.venv/bin/python -m bench.run all --pool prefork --concurrency 2 --label before  # baseline
.venv/bin/python -m bench.run quota --no-profile  # the published limits (section 7), 2 runs
.venv/bin/python -m bench.run quota50 --no-profile  # 1000 creates at 50/s (section 6)
.venv/bin/python -m bench.run webhooks --no-profile  # webhook latency, flood (section 8)
.venv/bin/python -m bench.run fairness --no-profile  # second org at 3 worker setups (section 10)
.venv/bin/python -m bench.run report          # re-render from docs/benchmarks.json
.venv/bin/python -m bench.chaincpu --chains 50 --rounds 1 --calls  # our calls per chain
.venv/bin/python -m bench.celerycost          # Celery's own CPU per delivered task
```

Each measurement starts its own stack with `tests.harness.Stack` (through `bench.stack`): the
Semrush simulator, a fresh PostgreSQL database, its own `redis-server`, the API under
`gunicorn config.wsgi -w 2 --threads 4`, two Celery worker processes (`-P threads -c 16` unless
told otherwise) and beat, with the production tunables of SPEC §9 (backoff `5,10,20,40,80`,
lease 120 s, dispatcher 2 s, upstream timeout 15 s). Benchmarks never run in the test suite.
Each fan-out size runs three times (`--repeat`; py-spy on the first run only): the table shows
the median run, and a fan-out target counts as met only if every run met it.
"""


def write(data: dict[str, Any]) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    parts = [
        "# Benchmarks (SPEC §10.7)\n",
        "Generated by `python -m bench.run` from `docs/benchmarks.json`; do not edit by hand "
        "(the hand-written part is `bench/findings.md`, appended at the end).\n",
        "## Targets\n",
        _table(["measure", "target", "now", "before", "now vs target"], _summary_rows(data)),
        "'now' = the code as committed with the recommended workers (`-P threads -c 16`); "
        "'before' = the code before issue 14 (\"Idiomatic core\": the hand-made query layer, "
        "the Semrush client's request preparation below `Session.request`, kombu's client "
        "cache), measured with the same workers on 2026-12-03 at 08:12 UTC; the figures from "
        "before issue 6 are kept in `docs/benchmarks.json` under `issue6-baseline`.\n",
        HOW_TO,
        _machine_section(data),
        _accept_section(data),
        _e2e_section(data),
        _fanout_section(data),
        _polling_section(data),
        _guard_section(data),
        _quota_section(data),
        report_quota.section(data, _table),
        webhooks_section(data),
        report_fairness.section(data, _table),
        _profile_section(data),
    ]
    if FINDINGS.exists():
        parts.append(FINDINGS.read_text())
    REPORT.write_text("\n".join(parts))
