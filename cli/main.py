"""`serenity`: onboard brands from a spreadsheet and follow the work (SPEC §13.2, §13.6).

    serenity onboard brands.csv [--max-failed N] [--failed-out PATH]
    serenity onboard --retry ONBOARDING_ID [--failed-out PATH]
    serenity jobs watch JOB_ID

Configured by SERENITY_API_URL, SERENITY_TOKEN and the organization (--org or
SERENITY_ORG_ID). Exit codes: 0 everything completed; 1 the work ended with failed or
cancelled items (their rows are written to a CSV) or a failed job; 2 usage or configuration;
3 the API refused the request; 4 the API could not be reached; 130 interrupted (the work goes
on on the server).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from cli.api import ApiError, Config, ConfigError, SerenityApi

EXIT_OK, EXIT_FAILED_ITEMS, EXIT_USAGE, EXIT_REFUSED, EXIT_UNREACHABLE = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130
ENDED = ("COMPLETED", "FAILED", "CANCELLED")
RETRIABLE = ("FAILED", "CANCELLED")

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="serenity",
        description="Onboard brands from a spreadsheet and follow the work, over the API.",
        epilog="Configuration: SERENITY_API_URL, SERENITY_TOKEN, and --org or SERENITY_ORG_ID. "
        "Exit codes: 0 all completed; 1 items failed or were cancelled (their rows are written "
        "to a CSV), or the job failed; 2 usage or configuration; 3 the API refused; "
        "4 the API could not be reached; 130 interrupted (the work goes on).",
    )
    parser.add_argument("--org", help="the organization's id (default: SERENITY_ORG_ID)")
    parser.add_argument(
        "--interval", type=float, default=2.0, help="seconds between polls (default 2)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    onboard = commands.add_parser(
        "onboard",
        help="onboard the brands of a CSV file, or redrive an onboarding's failed items",
        description="Posts the CSV (columns name, baseUrl, aliases `;`-separated, markets "
        "`US:en;DE:de`) as an onboarding, shows its progress until it ends and writes the "
        "failed and cancelled rows to a CSV. With --retry, redrives an onboarding instead.",
    )
    onboard.add_argument("csv", nargs="?", type=Path, help="the brands, one per row")
    onboard.add_argument("--retry", metavar="ONBOARDING_ID", help="redrive this onboarding")
    onboard.add_argument(
        "--max-failed", type=int, metavar="N", help="cancel the rest once N items failed"
    )
    onboard.add_argument(
        "--failed-out",
        type=Path,
        metavar="PATH",
        help="where to write the failed rows (default: <csv>.failed.csv, or "
        "onboarding-<id>.failed.csv in the current directory)",
    )
    jobs = commands.add_parser("jobs", help="follow a job")
    job_commands = jobs.add_subparsers(dest="job_command", required=True)
    watch = job_commands.add_parser("watch", help="follow a job until it ends")
    watch.add_argument("job", metavar="JOB_ID")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "onboard" and (args.csv is None) == (args.retry is None):
        parser.error("onboard takes a CSV file or --retry ONBOARDING_ID (one of them)")
    if args.command == "onboard" and args.max_failed is not None and args.max_failed < 1:
        parser.error("--max-failed must be 1 or more")
    try:
        api = SerenityApi(Config.from_environment(org=args.org))
        if args.command == "onboard":
            return _onboard(api, args)
        return _watch_job(api, args.job, interval=args.interval)
    except ConfigError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        return EXIT_USAGE
    except ApiError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        return EXIT_UNREACHABLE if exc.status == 0 else EXIT_REFUSED
    except OSError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("interrupted: the work goes on on the server")
        return EXIT_INTERRUPTED


def _onboard(api: SerenityApi, args: argparse.Namespace) -> int:
    if args.retry is not None:
        accepted = api.retry(args.retry)
        out.print(
            f"Redriving {accepted['total']} items of {args.retry}: {accepted['onboardingId']}"
        )
        failed_out = args.failed_out or Path(f"onboarding-{accepted['onboardingId']}.failed.csv")
    else:
        accepted = api.onboard_csv(args.csv, max_failed=args.max_failed)
        out.print(f"Onboarding {accepted['total']} brands: {accepted['onboardingId']}")
        failed_out = args.failed_out or args.csv.with_name(f"{args.csv.stem}.failed.csv")
    onboarding_id = str(accepted["onboardingId"])
    document = _follow_onboarding(api, onboarding_id, interval=args.interval)
    counts = document["counts"]
    summary = (
        f"Onboarding {onboarding_id} {document['status']}: {counts['completed']} completed, "
        f"{counts['failed']} failed, {counts['cancelled']} cancelled"
    )
    if document.get("cancelledBy") == "failureThreshold":
        summary += f" (cancelled after {document['maxFailedItems']} failed)"
    out.print(summary)
    if counts["failed"] + counts["cancelled"] == 0:
        return EXIT_OK
    rows = _retriable_rows(api.items_csv(onboarding_id))
    failed_out.write_text(rows, encoding="utf-8")
    out.print(f"Failed rows written to {failed_out}")
    out.print(f"Redrive them with: serenity onboard --retry {onboarding_id}")
    return EXIT_FAILED_ITEMS


def _follow_onboarding(api: SerenityApi, onboarding_id: str, *, interval: float) -> dict[str, Any]:
    """Poll the onboarding until it ends, with a progress bar (ended of total; completed,
    failed, in progress; an ETA). Its last document."""

    def update(progress: Progress, task: Any) -> dict[str, Any]:
        document = api.onboarding(onboarding_id)
        counts = document["counts"]
        ended = counts["completed"] + counts["failed"] + counts["cancelled"]
        progress.update(
            task,
            total=document["total"],
            completed=ended,
            done=counts["completed"],
            failed=counts["failed"] + counts["cancelled"],
            running=counts["inProgress"],
        )
        return document

    return _poll(
        update,
        lambda document: document["status"] != "IN_PROGRESS",
        columns=(
            TextColumn("[green]{task.fields[done]} completed"),
            TextColumn("[red]{task.fields[failed]} failed"),
            TextColumn("[yellow]{task.fields[running]} in progress"),
        ),
        interval=interval,
        description="onboarding",
        fields={"done": 0, "failed": 0, "running": 0},
    )


def _watch_job(api: SerenityApi, job_id: str, *, interval: float) -> int:
    def update(progress: Progress, task: Any) -> dict[str, Any]:
        job = api.job(job_id)
        steps = job.get("steps") or []
        finished = sum(1 for step in steps if step["status"] in ENDED)
        current = next((s["step"] for s in steps if s["status"] not in ENDED), "")
        progress.update(task, total=max(len(steps), 1), completed=finished, step=current)
        return job

    job = _poll(
        update,
        lambda job: job["status"] != "IN_PROGRESS",
        columns=(TextColumn("{task.fields[step]}"),),
        interval=interval,
        description=f"job {job_id}",
        fields={"step": ""},
    )
    line = f"Job {job_id} ({job['jobType']}) {job['status']}"
    if job.get("error"):
        line += f": {job['error']['code']}: {job['error']['message']}"
    elif job.get("result"):
        line += f": HTTP {job['result']['status']} ({job['result']['outcome']})"
    out.print(line)
    succeeded = (
        job["status"] == "COMPLETED" and (job.get("result") or {}).get("outcome") != "failed"
    )
    return EXIT_OK if succeeded else EXIT_FAILED_ITEMS


def _poll(
    update: Callable[[Progress, Any], dict[str, Any]],
    ended: Callable[[dict[str, Any]], bool],
    *,
    columns: Sequence[TextColumn],
    interval: float,
    description: str,
    fields: dict[str, Any],
) -> dict[str, Any]:
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        *columns,
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
    )
    with progress:
        task = progress.add_task(description, total=None, **fields)
        while True:
            document = update(progress, task)
            if ended(document):
                return document
            time.sleep(interval)


def _retriable_rows(items_csv: str) -> str:
    """The failed and cancelled rows of the API's items CSV, with its header."""
    reader = csv.DictReader(io.StringIO(items_csv))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=reader.fieldnames or [], lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(row for row in reader if row.get("status") in RETRIABLE)
    return buffer.getvalue()


if __name__ == "__main__":
    sys.exit(main())
