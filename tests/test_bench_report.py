"""docs/benchmarks.md from a small fixture of docs/benchmarks.json (bench.report): a figure is
shown as current only when the data holds one measured with the current code."""

from __future__ import annotations

from typing import Any

from bench import report


def _fixture() -> dict[str, Any]:
    """One current measurement (polling), one from older code (e2e), the others missing."""
    return {
        "machine": {"cpus": 2, "memory_gib": 4.0, "date": "2026-12-06 10:00 UTC"},
        "current": {
            "polling": {
                "workers": "2 x `celery worker -P threads -c 16`",
                "requests": 400,
                "steps_2": {"queries": 5, "p50_ms": 9.0, "p99_ms": 18.0},
                "steps_6": {"queries": 5, "p50_ms": 9.5, "p99_ms": 19.0},
                "ratio_p50": 1.06,
                "ratio_p99": 1.06,
                "measured_at": "2026-12-06",
                "commit": "abc1234",
            },
            "e2e": {
                "workers": "2 x `celery worker -P threads -c 16`",
                "runs": 20,
                "median_overhead_s": 0.12,
                "all_completed": True,
                "measured_at": "2026-12-03",
                "stored_in": "64f8ed7",
                "not_current": "publishing is confirmed since ae4822e",
            },
        },
    }


def _summary_row(text: str, title: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {title} |"))


def test_a_measurement_missing_from_the_data_reads_not_measured() -> None:
    # when
    text = report.render(_fixture(), undated="measured on or before 2026-12-06")
    # then the webhook flood, absent from the data, has no figure and no verdict
    row = _summary_row(text, "Webhook flood: another org's async create beside 10 slow endpoints")
    assert "not measured" in row
    assert "**met**" not in row
    assert "not met" not in row


def test_a_figure_from_older_code_is_not_shown_as_current() -> None:
    # when
    text = report.render(_fixture(), undated="measured on or before 2026-12-06")
    # then the end-to-end figure, measured before a change, is not in the summary
    row = _summary_row(text, "End-to-end: async create to COMPLETED")
    assert "not measured with the current code" in row
    assert "0.12" not in row
    assert "last: 2026-12-03, stored in `64f8ed7`" in row
    # and its section says why, its last figure marked as such
    assert "Not current: publishing is confirmed since ae4822e." in text
    assert "Last figure, for reference only: S + P + 0.12 s" in text
    # while the polling figure is current, with its date and commit
    polling = _summary_row(text, "Polling: cost independent of chain length")
    assert "5 vs 5 statements" in polling
    assert "**met**" in polling
    assert "2026-12-06, commit `abc1234`" in polling
    assert f"1 of {len(report.MEASUREMENTS)} figures are current." in text
