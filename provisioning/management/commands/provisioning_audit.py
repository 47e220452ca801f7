"""``python manage.py provisioning_audit [--json]`` (SPEC §8): list upstream objects that need an
operator. Exit 1 when orphans or stuck attempts were found, 2 when only some orgs could not be
checked, 0 when clean. The rules live in `provisioning.audit`."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from provisioning.audit import AuditReport, audit_run
from provisioning.quota import patient_permits


class Command(BaseCommand):
    help = (
        "List Semrush workspaces and projects under our parents that are neither a brand's "
        "canonical object nor empty, and provisioning attempts stuck past the stale threshold."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        # Every workspace's projects are listed: go at the credentials' pace (SPEC §10.6).
        with patient_permits():
            report = audit_run()
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:
            self.stdout.write(render_text(report))
        if report.exit_code:
            raise SystemExit(report.exit_code)


def render_text(report: AuditReport) -> str:
    stale_after = settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS
    lines = [
        "provisioning audit: "
        f"{len(report.orphan_workspaces)} orphan workspace(s), "
        f"{len(report.orphan_projects)} orphan project(s), "
        f"{len(report.stuck_attempts)} stuck attempt(s), "
        f"{len(report.errors)} org(s) not checked"
    ]
    if report.orphan_workspaces:
        lines.append("")
        lines.append("Orphan workspaces (not a brand's workspace, not empty):")
        lines.extend(
            f"  {entry.id}  org {entry.org_id}  title {entry.title!r}"
            for entry in report.orphan_workspaces
        )
    if report.orphan_projects:
        lines.append("")
        lines.append("Orphan projects (no market points at them):")
        lines.extend(
            f"  {entry.id}  workspace {entry.workspace_id}  org {entry.org_id}"
            for entry in report.orphan_projects
        )
    if report.stuck_attempts:
        lines.append("")
        lines.append(f"Stuck attempts (pending for more than {stale_after:g} s):")
        lines.extend(
            f"  {entry.id}  brand {entry.brand_id}  age {entry.age_seconds} s"
            for entry in report.stuck_attempts
        )
    if report.errors:
        lines.append("")
        lines.append("Organizations that could not be checked:")
        lines.extend(f"  {entry.org_id}  {entry.error}" for entry in report.errors)
    if not (report.has_findings or report.errors):
        lines.append("Nothing needs an operator.")
    return "\n".join(lines)
