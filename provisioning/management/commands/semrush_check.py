"""``python manage.py semrush_check --org ID [--json]`` (SPEC §12.1): a read-only preflight of
an organization's Semrush before going live. Exit 0 when every answer matches the contract
description, 1 when something differs, 2 when the check could not run. The rules live in
`provisioning.preflight`."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from provisioning.preflight import PreflightReport, semrush_check
from provisioning.quota import patient_permits


class Command(BaseCommand):
    help = (
        "Read the org's parent workspace (status, family), the language catalogue and one "
        "workspace's projects with the org's credential, and report every way the answers "
        "differ from Semrush's contract as the service describes it. Writes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="the organization's id")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        # A few reads in a row: go at the credential's pace (SPEC §10.6).
        with patient_permits():
            report = semrush_check(org_id=options["org"])
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:
            self.stdout.write(render_text(report))
        if report.exit_code:
            raise SystemExit(report.exit_code)


def render_text(report: PreflightReport) -> str:
    lines = [
        f"semrush check of org {report.org_id}: parent {report.parent_id or '-'}, "
        f"projects of workspace {report.workspace_id or '-'}"
    ]
    if report.error is not None:
        lines.append(f"Could not check: {report.error}.")
        return "\n".join(lines)
    if not report.differences:
        lines.append("Every answer matches the contract description.")
        return "\n".join(lines)
    lines.append(f"{len(report.differences)} difference(s) from the contract description:")
    lines.extend(f"  {d.operation}: {d.detail}" for d in report.differences)
    return "\n".join(lines)
