"""The fairness measurements of docs/benchmarks.md (`bench.run fairness`, bench.fairness), one
per worker configuration SPEC §12.5 names, read from docs/benchmarks.json."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.report_parts import Entry, Figure, Measurement

WHAT = (
    "Org A sends 60 async brand creates with a market (8 clients); org B sends one async create "
    "2 s after A's first. Both orgs use one credential; the simulator allows 20 requests/s per "
    "token and the service paces at 19 (configured at 19.39, less its 2 % margin); S = 1 s, "
    "`publishSeconds` 0; three warm-up creates first (steady state). B's time runs from its "
    "POST to its chain's end. One stack per worker configuration."
)
COMMAND = ".venv/bin/python -m bench.run fairness"
# bench.fairness' keys for the configurations of SPEC §12.5.
CONFIGURATIONS = (
    ("prefork_1x2", "Celery's default pool (prefork), `-c 2`"),
    ("prefork_1x4", "Celery's default pool (prefork), `-c 4`"),
    ("threads_2x16", "the README's workers (2 x threads, `-c 16`)"),
)


def _runs(entry: Entry, config: str) -> list[dict[str, Any]] | None:
    runs = entry.get(config)
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        return None
    return runs


def _figure(config: str) -> Callable[[Entry], Figure | None]:
    def read(entry: Entry) -> Figure | None:
        runs = _runs(entry, config)
        if runs is None:
            return None
        text = ", ".join(
            f"{r['second_org_s']} s ({(r.get('second_org') or {}).get('status')})" for r in runs
        )
        details = []
        for run in runs:
            steps = (run.get("second_org") or {}).get("steps") or []
            details.append(
                f"A's burst: {run.get('burst_wall_s')} s, {run.get('upstream_calls')} calls, "
                f"{run.get('limited_429')} x 429. B's steps (started → finished, seconds from "
                "its POST): "
                + ", ".join(
                    f"{s['step']} {s['started_s']} → {s['finished_s']} ({s['run_count']} claims)"
                    for s in steps
                )
                + "."
            )
        return Figure(text, all(r["within_bound"] for r in runs), tuple(details))

    return read


def _workers(config: str) -> Callable[[Entry], str | None]:
    def read(entry: Entry) -> str | None:
        runs = _runs(entry, config)
        return str(runs[0]["workers"]) if runs else None

    return read


MEASUREMENTS = tuple(
    Measurement(
        section="Fairness at each worker configuration",
        title=f"Fairness: a second org's create mid-burst, {name}",
        what=WHAT,
        bound="≤ S + 4 s = 5 s (S = 1 s)",
        key="fairness",
        command=COMMAND,
        figure=_figure(config),
        workers=_workers(config),
    )
    for config, name in CONFIGURATIONS
)
