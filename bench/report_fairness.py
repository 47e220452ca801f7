"""The SPEC §12.5 fairness section of docs/benchmarks.md (`bench.fairness`), rendered from
docs/benchmarks.json."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

HOW = (
    "`python -m bench.run fairness --no-profile`: org A sends 60 async creates with a market "
    "(8 clients), org B one async create 2 s after A's first; both orgs use one credential; "
    "the simulator allows 20 requests/s per token, the service paces at 19 (its 5 % margin); "
    "S = 1 s, `publishSeconds` 0, settle back-off `1,2,4,8,16,32` (the learned settle time "
    "cannot go below the first back-off step); three warm-up creates first (steady state). "
    "B's time is from its POST to its chain's end, against S + 4 s. One stack per worker "
    "configuration."
)


def _runs(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    value = data.get("current", {}).get("fairness")
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(v, list)}


def summary_rows(data: dict[str, Any]) -> list[list[str]]:
    rows = []
    for runs in _runs(data).values():
        for run in runs:
            rows.append(
                [
                    f"Second org on a shared credential, {run['workers']}",
                    f"≤ {run['bound_s']} s",
                    f"{run['second_org_s']} s",
                    "—",
                    "✅" if run["within_bound"] else "❌",
                ]
            )
    return rows


def section(data: dict[str, Any], table: Callable[[list[str], list[list[str]]], str]) -> str:
    runs = _runs(data)
    out = ["## 10. Fairness at any worker configuration (SPEC §12.5)\n", HOW + "\n"]
    if not runs:
        return "\n".join([*out, "Not measured yet.\n"])
    rows = []
    for measured in runs.values():
        for run in measured:
            steps = (run.get("second_org") or {}).get("steps") or []
            rows.append(
                [
                    run["workers"],
                    f"{run['second_org_s']} s",
                    f"{run['bound_s']} s",
                    "**met**" if run["within_bound"] else "**not met**",
                    str(run.get("burst_wall_s")),
                    str(run.get("upstream_calls")),
                    str(run.get("limited_429")),
                    ", ".join(
                        f"{s['step']} {s['started_s']}→{s['finished_s']} s ({s['run_count']} runs)"
                        for s in steps
                    ),
                ]
            )
    header = [
        "workers",
        "second org",
        "bound",
        "",
        "burst wall (s)",
        "calls",
        "429",
        "second org's steps (started → finished, from its POST)",
    ]
    out.append(table(header, rows))
    return "\n".join(out)
