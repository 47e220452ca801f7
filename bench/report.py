"""Renders docs/benchmarks.md from docs/benchmarks.json (written by bench.run): the current
figures against the SPEC's performance bounds (§12.5 and the bounds it keeps from §10.7 and
§11.6), and how to reproduce each. Not a journal: earlier figures are in git.

Only the label `current` is rendered (other labels stay in the data). A figure is current
unless its entry carries `not_current`: a note naming the change to the code it exercises that
landed after it was measured. bench.run replaces an entry whole when it measures it again, which
drops the note. An entry's date and commit are its `measured_at` and `commit` (or `stored_in`:
the commit that stored it, read from git history); an entry without them is said to be measured
on or before the day docs/benchmarks.json was last committed.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
from pathlib import Path
from typing import Any

from bench import report_fairness, report_quota, report_webhooks
from bench.report_parts import Entry, Figure, Measurement, ms, table

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "benchmarks.md"
DATA = ROOT / "docs" / "benchmarks.json"

NOT_MEASURED = "**not measured with the current code**"


# --- The accept path, end-to-end, polling (bench.scenarios) -----------------------------------


def _statements(entry: Entry) -> Figure | None:
    queries = entry.get("queries") or {}
    market = queries.get("market_create_async_1")
    brand = queries.get("brand_create_async_market_1")
    if not market:
        return None
    counts = [int(market["queries"])] + ([int(brand["queries"])] if brand else [])
    text = f"{market['queries']} (async market create)"
    if brand:
        text += f", {brand['queries']} (async brand create with a market)"
    others = ", ".join(
        f"{name} {queries[key]['queries']}"
        for name, key in (
            ("`GET /healthz`", "healthz"),
            ("`GET B`", "brand_get"),
            ("`GET B/serenity/jobs/{id}` (2 steps)", "poll_2_steps_1"),
            ("(21 steps)", "poll_21_steps_1"),
        )
        if key in queries
    )
    return Figure(text, max(counts) <= 12, (f"Other requests' statements: {others}.",))


def _accept_ratio(entry: Entry) -> Figure | None:
    if "accept" not in entry or "mixed" not in entry:
        return None
    alone = entry["accept"]["p99_ms"] / entry["brand_get"]["p99_ms"]
    mixed = entry["mixed"]["accept"]["p99_ms"] / entry["mixed"]["brand_get"]["p99_ms"]
    rows = [
        ["`GET /healthz`, alone", entry["healthz"]],
        ["`GET B` (a brand), alone", entry["brand_get"]],
        ["`POST B/serenity/markets` async, alone (workers paused)", entry["accept"]],
        ["shuffled: `POST …/markets` async", entry["mixed"]["accept"]],
        ["shuffled: `GET B`", entry["mixed"]["brand_get"]],
    ]
    latencies = table(
        ["requests", "p50 ms", "p99 ms", "req/s"],
        [[name, ms(s["p50_ms"]), ms(s["p99_ms"]), str(s["throughput_rps"])] for name, s in rows],
    )
    return Figure(
        f"{alone:.2f} with each route alone, {mixed:.2f} shuffled in one phase",
        alone <= 3 and mixed <= 3,
        (latencies,),
    )


def _e2e(entry: Entry) -> Figure | None:
    if "median_overhead_s" not in entry:
        return None
    publish = float(entry.get("publish_seconds") or 0.0)
    median = entry["median_overhead_s"]
    details = []
    phases = [p for p in (_e2e_phases(s) for s in entry.get("samples", [])) if p]
    if phases:
        details.append(
            "Where a run's time goes (median ms, from the job rows): "
            + ", ".join(
                f"{name} {statistics.median(p[name] for p in phases) * 1000:.0f}"
                for name in phases[0]
            )
            + "."
        )
    return Figure(
        f"S + P + {median - publish:.2f} s (median of {entry['runs']}; P = {publish:g} s); "
        + ("every run COMPLETED" if entry["all_completed"] else "not every run COMPLETED"),
        median - publish <= 0.5 and bool(entry["all_completed"]),
        tuple(details),
    )


def _e2e_phases(sample: dict[str, Any]) -> dict[str, float] | None:
    steps = sample["steps"]
    reads = [s for s in steps if s["step"] == "provisionWorkspace"]
    chained = [s for s in steps if s["step"] != "provisionWorkspace"]
    if not reads or not chained or chained[-1]["finished"] is None:
        return None
    return {
        "first step starts": reads[0]["started"] or 0.0,
        "last read: late vs due": (reads[-1]["started"] or 0) - (reads[-1]["due"] or 0),
        "chained steps": chained[-1]["finished"] - (chained[0]["started"] or 0),
        "poller sees it": sample["seen_s"] - chained[-1]["finished"],
    }


def _polling(entry: Entry) -> Figure | None:
    if "steps_2" not in entry:
        return None
    two, long = entry["steps_2"], entry.get("steps_21") or entry["steps_6"]
    n = 21 if "steps_21" in entry else 6
    return Figure(
        f"{two['queries']} vs {long['queries']} statements; latency {n} ÷ 2 steps: "
        f"p50 {entry['ratio_p50']}, p99 {entry['ratio_p99']}",
        two["queries"] == long["queries"] and entry["ratio_p50"] <= 1.2,
        (
            f"p50 / p99: {ms(two['p50_ms'])} / {ms(two['p99_ms'])} ms (2 steps), "
            f"{ms(long['p50_ms'])} / {ms(long['p99_ms'])} ms ({n} steps), "
            f"{entry['requests']} reads of each.",
        ),
    )


def _fanout(entry: Entry) -> Figure | None:
    if "cpu_s" not in entry:
        return None
    cpu = entry["cpu_s"]
    per_chain = 1000 * sum(cpu.values()) / entry["count"]
    walls = [r["wall_over_s"] for r in entry.get("runs") or [entry]]
    return Figure(
        f"{per_chain:.0f} ms of CPU per chain (whole stack); wall {min(walls)} to {max(walls)} x S "
        f"over {len(walls)} run(s), {entry['failures']} failed",
        None,
        ("CPU seconds by component: " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()) + ".",),
    )


def _guard(entry: Entry) -> Figure | None:
    if "one_brand" not in entry:
        return None

    def part(name: str, s: dict[str, Any]) -> str:
        statuses = ", ".join(f"{v} x {k}" for k, v in s["statuses"].items())
        return f"{name}: {statuses}, p99 {ms(s['p99_ms'])} ms"

    n = entry["concurrent"]
    return Figure(
        part("one brand", entry["one_brand"]) + "; " + part(f"{n} brands", entry["many_brands"]),
        None,
    )


def _accept_workers(entry: Entry) -> str | None:
    if not entry.get("workers"):
        return None
    return f"{entry['workers']}; API `{entry.get('api', 'gunicorn -w 2 --threads 4')}`"


ACCEPT_WHAT = (
    "400 brands with a workspace; one async market create on each, sent by 16 concurrent "
    "keep-alive clients, against reads of a brand (`GET B`) from the same server: each route "
    "alone (the accepts with the workers paused: the API's own cost), then both shuffled in one "
    "phase with the workers running the chains the accepts start. SQL statements are counted "
    "in-process (Django's `execute_wrapper` around the test client, the stack's settings, "
    "database and broker; `BEGIN`/`COMMIT` not counted). Apart from this measurement, the test "
    "suite holds the async accepts to 12 statements, `BEGIN`/`COMMIT` counted "
    "(tests/chains/test_query_budget.py)."
)

MEASUREMENTS = (
    Measurement(
        section="Accept path",
        title="SQL statements per accepted async create",
        what=ACCEPT_WHAT,
        bound="≤ 12",
        key="accept",
        command=".venv/bin/python -m bench.run accept",
        figure=_statements,
        workers=_accept_workers,
    ),
    Measurement(
        section="Accept path",
        title="p99(accept) ÷ p99(GET brand)",
        what=ACCEPT_WHAT,
        bound="≤ 3",
        key="accept",
        command=".venv/bin/python -m bench.run accept",
        figure=_accept_ratio,
        workers=_accept_workers,
    ),
    Measurement(
        section="End-to-end",
        title="End-to-end: async create to COMPLETED",
        what=(
            "20 async brand creates with a market, one at a time, S = 5 s (the simulator's "
            "settle time), the production back-off `5,10,20,40,80`; a poller reads the job "
            "every 100 ms. The figure is the median time from the POST until the poller sees "
            "COMPLETED. P is the simulator's `publishSeconds` (0: the bench leaves it at its "
            "default)."
        ),
        bound="median ≤ S + P + 0.5 s",
        key="e2e",
        command=".venv/bin/python -m bench.run e2e",
        figure=_e2e,
    ),
    Measurement(
        section="Polling",
        title="Polling: cost independent of chain length",
        what=(
            "`GET B/serenity/jobs/{id}` on finished chains of 2 and 21 steps: SQL statements "
            "(in-process) and latency over HTTP (one client, 400 reads of each, alternating)."
        ),
        bound="same statements for 21 steps as for 2, p50 ratio ≤ 1.2",
        key="polling",
        command=".venv/bin/python -m bench.run polling",
        figure=_polling,
    ),
    *report_webhooks.MEASUREMENTS,
    *report_fairness.MEASUREMENTS,
    *report_quota.MEASUREMENTS,
    Measurement(
        section="Fan-out (no bound)",
        title="Fan-out: CPU per chain, 1,000 async creates at once (no bound)",
        what=(
            "1,000 async brand creates with a market sent at once by 32 clients, S = 5 s, "
            "three runs (the median run is kept): CPU seconds of every process of the stack "
            "per chain, and the wall from the first request to the last chain COMPLETED. It has "
            "no bound any more (it had ≤ 2 x S for 200, ≤ 5 x S for 1,000): CPU per chain is "
            "a figure to watch."
        ),
        bound="none",
        key="fanout_1000",
        command=".venv/bin/python -m bench.run fanout --sizes 1000",
        figure=_fanout,
    ),
    Measurement(
        section="Guard contention (no bound)",
        title="Guard: 50 concurrent creates on one brand vs on 50 brands (no bound)",
        what=(
            "50 async market creates (distinct slices) released together at one brand, then "
            "one each at 50 brands, 50 client threads, the workers paused during each burst."
        ),
        bound="none",
        key="guard",
        command=".venv/bin/python -m bench.run guard",
        figure=_guard,
    ),
    *report_quota.WATCHED,
)


# --- Rendering -----------------------------------------------------------------------------


def _entry(data: dict[str, Any], m: Measurement) -> Entry | None:
    value = (data.get("current") or {}).get(m.key)
    return value if isinstance(value, dict) else None


def _figure(m: Measurement, entry: Entry | None) -> Figure | None:
    if entry is None:
        return None
    if "error" in entry:
        return Figure(f"did not finish: {str(entry['error'])[:100]}", False)
    return m.figure(entry)


def _when(entry: Entry, undated: str) -> str:
    parts = [str(entry["measured_at"])] if entry.get("measured_at") else []
    if entry.get("commit"):
        parts.append(f"commit `{entry['commit']}`")
    elif entry.get("stored_in"):
        parts.append(f"stored in `{entry['stored_in']}`")
    return ", ".join(parts) or undated


def _met(met: bool | None) -> str:
    return "— (no bound)" if met is None else ("**met**" if met else "**not met**")


def _summary(data: dict[str, Any], undated: str) -> tuple[str, int]:
    rows = []
    current = 0
    for m in MEASUREMENTS:
        entry = _entry(data, m)
        figure = _figure(m, entry)
        if entry is None or figure is None:
            rows.append([m.title, m.bound, f"{NOT_MEASURED} (no figure recorded)", "—", "—"])
        elif entry.get("not_current"):
            rows.append([m.title, m.bound, NOT_MEASURED, "—", f"last: {_when(entry, undated)}"])
        else:
            current += 1
            rows.append([m.title, m.bound, figure.text, _met(figure.met), _when(entry, undated)])
    return table(["measurement", "bound", "figure", "met?", "measured at"], rows), current


def _took(entry: Entry) -> str:
    elapsed = entry.get("elapsed_s")
    if not isinstance(elapsed, int | float):
        return ""
    span = f"{elapsed:.0f} s" if elapsed < 90 else f"{elapsed / 60:.0f} min"
    return f" (the last run took {span})"


def _section(number: int, group: list[Measurement], data: dict[str, Any], undated: str) -> str:
    """One section per entry: what it measures, each of its figures against its bound, when,
    with which workers, and the command that measures it again."""
    first = group[0]
    entry = _entry(data, first)
    out = [f"### {number}. {first.section}\n", first.what + "\n"]
    stale = entry is not None and bool(entry.get("not_current"))
    for m in group:
        figure = _figure(m, entry)
        head = f"- **{m.title}**. Bound: {m.bound}. Figure: "
        if entry is None or figure is None:
            out.append(head + f"{NOT_MEASURED} (docs/benchmarks.json has no figure for it).")
        elif stale:
            then = "" if figure.met is None else f" ({'met' if figure.met else 'not met'} then)"
            out.append(
                head + f"{NOT_MEASURED}. Last figure, for reference only: {figure.text}{then}."
            )
        else:
            out.append(head + f"{figure.text} — {_met(figure.met)}.")
    if entry is not None and stale:
        out.append(f"- Last measured {_when(entry, undated)}. Not current: {entry['not_current']}.")
    elif entry is not None:
        measured = f"- Measured {_when(entry, undated)}"
        if entry.get("loadavg_after"):
            measured += f"; load average {entry['loadavg_after'][0]} after"
        if entry.get("cpu_probe_ms"):
            before, after = entry["cpu_probe_ms"]
            measured += f"; CPU probe {before} / {after} ms before / after"
        out.append(measured + ".")
        if entry.get("violations"):
            out.append(f"- The stack's invariants were violated: {entry['violations']}.")
    workers = list(dict.fromkeys(w for m in group if entry and (w := m.workers(entry))))
    if workers:
        out.append(
            "- Workers: "
            + "; ".join(workers)
            + (" (as recorded with the last figure)." if stale else ".")
        )
    out.append(f"- Reproduce: `{first.command}`" + (_took(entry) if entry else "") + ".")
    if entry is not None and not stale:
        for m in group:
            figure = _figure(m, entry)
            if figure is not None and figure.details:
                out.extend(["", *figure.details])
    return "\n".join(out) + "\n"


def _sections(data: dict[str, Any], undated: str) -> list[str]:
    groups: list[list[Measurement]] = []
    for m in MEASUREMENTS:
        if groups and groups[-1][0].section == m.section:
            groups[-1].append(m)
        else:
            groups.append([m])
    return [_section(i, group, data, undated) for i, group in enumerate(groups, 1)]


def _machine(data: dict[str, Any]) -> str:
    m = data.get("machine") or {}
    rows = [
        ["CPUs", str(m.get("cpus"))],
        ["memory", f"{m.get('memory_gib')} GiB"],
        ["platform", str(m.get("platform"))],
        ["Python", str(m.get("python"))],
        ["PostgreSQL", str(m.get("postgresql"))],
        ["Redis", str(m.get("redis"))],
    ]
    return (
        "## Machine\n\n"
        f"The development machine, as the last run recorded it ({m.get('date')}):\n\n"
        + table(["", ""], rows)
        + "\nA virtual machine whose two cores serve the whole stack (the API, the workers, "
        "PostgreSQL, Redis, the simulator and the load generator), and whose speed moves by up "
        "to 2 x within minutes. Each measurement records a CPU probe before and after it (a "
        "fixed pure-Python loop, `bench.stack.cpu_probe_ms`: about 30 ms in the machine's fast "
        "phases, 55 ms and more in its slow ones) and the load average after it; a current "
        "figure shows both. Compare figures whose probes are alike, and measure on a quiet "
        "machine (load average below 1, nothing else running).\n"
    )


WHERE_THE_TIME_GOES = """\
## Where the time goes

What the optimisation rounds established that still holds for this code, and why it is as it
is (the rounds themselves: `git show ccd26c7:bench/findings.md`).

- **Production waits on Semrush's quota, not on CPU.** At 10 requests/s a brand with a market is
  about 0.7 s of quota; its CPU is tens of milliseconds. Here the API, the workers, PostgreSQL,
  the simulator and the load generator share two cores, so a fan-out's wall follows the
  machine's speed (it has no bound any more). To compare two versions of the code, count
  instead: `.venv/bin/python -m bench.chaincpu --chains 50 --rounds 1 --calls` (Python calls and
  SQL statements per chain, the same on any machine; `--calls-by` and `--calls-inclusive` name
  the lines of ours that make them). `python -m bench.celerycost`: Celery's CPU per task.
- **No worker slot waits.** A settle read that finds the workspace not ready ends its step; the
  next read is a new job row, due after the back-off. A step with no permit or slot within
  0.25 s is re-scheduled at its org's place in the queue and frees its slot. Workers run
  `-P threads -c 16`: steps mostly wait on I/O (`-c 8` was no faster here, and against Semrush
  fewer slots means fewer chains in flight).
- **The limiter's shape was measured** (provisioning/limiter.py, provisioning/quota.py): pacing at
  exactly R against a sliding-window limit draws a 429 whenever jitter delays one request, so it
  paces under R (5 % until 2026-12-07, 2 % since: arrivals jitter by 2 ms here), with no burst (a
  burst of 20 after an idle spell drew ten 429s at once). Refused steps get places one interval
  apart: spaced by the permits an average step took, they left the credential idle whenever the
  returning steps took fewer (an onboarding's settle reads share a listing), and the idle bucket's
  burst then met 429s. A step that comes back before its turn is refused again in milliseconds. A
  call takes its slot before its permit: the other way round, the slot's contended Redis
  transaction delayed requests past their permit's time and the next ones closed up on them (11
  arrivals in a second, a 429). A permit granted before a 429's pause asks again instead of going
  into it; after a 429 the pace slows a few percent for a while.
- **Learned publish time.** Sampled from the project's `published_at`: read at the confirm's
  run time, it learned the quota's queue (13 s for a 2 s publish), and the onboarding's last
  confirms waited that long.
- **Settle and family reads.** A learned settle time is the age the ready read was *scheduled*
  for: read at its run time, it learned the quota's queue, and every later chain waited that
  long. An onboarding's family claim names the claimant's step (by a clock, a claimant
  re-scheduled for quota lost it and its group listed the family again). A market step in a
  workspace its own attempt created lists no projects, unless it is a lost worker's re-run.
- **Settings that exist for a measured cost** (config/settings.py): workers keep their database
  connections (`CELERY_DB_REUSE_MAX`: Celery's Django fix-up otherwise reconnects for every
  task); psycopg prepares a statement after 5 runs (`DB_PREPARED_STATEMENTS`: planning was
  40 to 80 % of the hot statements' time; off behind PgBouncer in transaction mode before 1.21);
  Celery's task events and per-task log lines are off (the job rows record the same); servers
  freeze their startup heap (`SERVER_GC_FREEZE`, `SERVER_GC_THRESHOLD`); the promoting worker
  runs the chained step itself (`JOBS_HAND_OVER_INLINE`: one Celery task fewer per chain); the
  broker channel keeps one Redis client per connection pool (config/broker.py); the Semrush
  session reads proxies and CA bundle once per value (`trust_env` off: requests would walk the
  whole environment on every request).
- **What is left** in our processes is mostly the ORM building statements and requests/urllib3
  (over a thousand Python calls per upstream call); both stay (idiom first), so the cuts left are
  fewer statements. Not kept: `only()` on the chain's attempt read (other columns become silent
  extra queries) and `exists()` for the final write's lock (Django drops `FOR UPDATE OF`,
  locking the brand too); workers at a lower `nice`, more gunicorn threads or workers and
  `fillfactor` on the hot tables gained nothing beyond the noise.
- **Prefetch 4, not 1.** A worker holds its settle reads as countdown messages, and Celery runs
  one that falls due inside the prefetch window without fetching it: with one message per slot,
  the reads falling due during a burst kept every place, and the worker fetched no new step
  until their wave passed (the last 31 of 300 creates waited 5.5 s for their first step). With
  Celery's default of 4 the new steps are fetched and queue behind the reads in the pool.
"""

HOW_TO = """\
## How to run

Measure on a quiet machine: every figure is timed on two shared cores.

```sh
.venv/bin/python -m bench.run accept e2e polling  # some measurements; `all` runs every one
.venv/bin/python -m bench.run report              # re-render this file from the data only
```

Each measurement starts its own stack (bench/stack.py over tests/harness.py): the Semrush
simulator, a fresh PostgreSQL database, its own `redis-server`, the API
(`gunicorn -w 2 --threads 4`), the Celery workers of `--processes`, `--pool` and `--concurrency`
(2 x `-P threads -c 16` by default, the README's; `fairness` runs its own three), deploy/Procfile's
`webhooks` worker and beat, with production tunables (`PRODUCTION_SETTINGS`: back-off
`5,10,20,40,80`, 120 s lease, 2 s dispatcher, 15 s upstream timeout). It replaces its entries
under `current` in docs/benchmarks.json and re-renders this file (`--label NAME` stores them
elsewhere, unrendered). With py-spy installed, `accept` and `fanout` also profile the API and the
workers (var/bench/profiles/; `--no-profile` skips it).

When a change to the code a figure exercises lands, add `"not_current": "<the change>"` to its
entry in docs/benchmarks.json and re-render: the figure then reads as not measured with the
current code until it is measured again.
"""


def render(data: dict[str, Any], *, undated: str) -> str:
    """docs/benchmarks.md for `data`; `undated` is said of an entry with no date of its own."""
    summary, current = _summary(data, undated)
    sections = _sections(data, undated)
    return "\n".join(
        [
            "# Benchmarks\n",
            "The current figures against the service's performance bounds, and how to "
            "reproduce each. Generated by "
            "`.venv/bin/python -m bench.run report` from docs/benchmarks.json (bench/report.py); "
            "do not edit by hand. Earlier figures are in git: "
            "`git log -p -- docs/benchmarks.json`.\n",
            "## Summary\n",
            summary,
            f"{current} of {len(MEASUREMENTS)} figures are current. A figure measured before a "
            "change to the code it exercises, or never measured, reads "
            f"{NOT_MEASURED}; its section below names that change and gives the last figure, "
            "for reference only.\n",
            _machine(data),
            "## Measurements\n",
            *sections,
            WHERE_THE_TIME_GOES,
            HOW_TO,
        ]
    )


def _undated() -> str:
    """What is said of an entry without a date: the day docs/benchmarks.json was last committed
    (when it has no uncommitted changes)."""

    executable = shutil.which("git")

    def git(*args: str) -> str:
        if executable is None:
            return ""
        try:
            return subprocess.run(  # noqa: S603 - fixed argv
                [executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = git("status", "--porcelain", "--", str(DATA))
    date = git("log", "-1", "--format=%cs", "--", str(DATA))
    if changed or not date:
        return "date not recorded"
    return f"measured on or before {date}"


def write(data: dict[str, Any]) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    onboarding = (data.get("current") or {}).get("quota_onboarding")
    if (
        isinstance(onboarding, dict)
        and not onboarding.get("not_current")
        and "calls_per_second" in onboarding
    ):
        report_quota.write_chart(onboarding)
    REPORT.write_text(render(data, undated=_undated()) + _kept())


# What follows this line in docs/benchmarks.md is written by hand (measurements of commands other
# than bench.run's) and kept as it is by every render.
KEPT_MARKER = (
    "<!-- Below: revision 7's measurements, written by hand; `bench.run report` keeps them. -->"
)


def _kept() -> str:
    """The hand-written part of the report as it stands (from `KEPT_MARKER` on), or nothing."""
    if not REPORT.exists():
        return ""
    text = REPORT.read_text()
    at = text.find(KEPT_MARKER)
    return "\n" + text[at:] if at >= 0 else ""
