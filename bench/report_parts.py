"""What docs/benchmarks.md is made of (bench.report): a measurement, the figure read from its
entry in docs/benchmarks.json, and the small formatting helpers the report modules share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Entry = dict[str, Any]


@dataclass(frozen=True)
class Figure:
    """What an entry says: `text` (the figure, one line), `met` (None: no bound to meet) and
    `details` (markdown lines shown under it when the figure is current)."""

    text: str
    met: bool | None
    details: tuple[str, ...] = ()


def _entry_workers(entry: Entry) -> str | None:
    workers = entry.get("workers")
    return str(workers) if workers else None


@dataclass(frozen=True)
class Measurement:
    """One row of the summary: `key` names its entry in docs/benchmarks.json (`current/<key>`),
    `figure` reads that entry (None when the entry lacks this figure), `command` reproduces it.
    Consecutive measurements of one `section` share its entry, `what` and `command`."""

    section: str
    title: str
    what: str
    bound: str
    key: str
    command: str
    figure: Callable[[Entry], Figure | None]
    workers: Callable[[Entry], str | None] = field(default=_entry_workers)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def ms(value: Any) -> str:
    if not isinstance(value, int | float):
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def seconds(value: Any) -> str:
    return f"{value:g} s" if isinstance(value, int | float) else "—"
