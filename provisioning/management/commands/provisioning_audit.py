"""``python manage.py provisioning_audit [--json] [--org ID] [--brand ID] [--since WHEN]`` (SPEC §8,
§12.4): list upstream objects that need an operator. Exit 1 when orphans or stuck attempts were
found, 2 when only some orgs could not be checked, 0 when clean. The rules live in
`provisioning.audit`.

It takes at most `SERENITY_AUDIT_RATE_SHARE` of each credential's rate (provisioning keeps the
rest) and reports its progress on stderr (a line, or with `--json` one JSON object per line),
the report itself on stdout."""

from __future__ import annotations

import argparse
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from provisioning.audit import (
    AuditProgress,
    AuditReport,
    AuditScope,
    AuditScopeError,
    ProgressEvent,
    audit_run,
)
from provisioning.quota import patient_permits


def _since(value: str) -> datetime:
    """An ISO 8601 date-time (UTC when it names no offset)."""
    parsed = parse_datetime(value)
    if parsed is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not an ISO 8601 date-time")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


class Command(BaseCommand):
    help = (
        "List Semrush workspaces and projects under our parents that are neither a brand's "
        "canonical object nor empty, and provisioning attempts stuck past the stale threshold."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--org", type=uuid.UUID, help="audit this organization only")
        parser.add_argument("--brand", type=uuid.UUID, help="audit this brand only")
        parser.add_argument(
            "--since",
            type=_since,
            help="only brands and workspaces changed since this ISO 8601 date-time",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        scope = AuditScope(org_id=options["org"], brand_id=options["brand"], since=options["since"])
        as_json = bool(options["json"])
        progress = AuditProgress(lambda event: self._progress(event, as_json=as_json))
        # Every workspace's projects are listed: at the credential's pace, and at most this
        # share of it while provisioning waits on the same credential (SPEC §12.4).
        with patient_permits(share=float(settings.SERENITY_AUDIT_RATE_SHARE)):
            try:
                report = audit_run(scope, progress=progress)
            except AuditScopeError as exc:
                raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:
            self.stdout.write(render_text(report))
        if report.exit_code:
            raise SystemExit(report.exit_code)

    def _progress(self, event: ProgressEvent, *, as_json: bool) -> None:
        if as_json:
            line = json.dumps(event, separators=(",", ":"))
        else:
            line = (
                f"provisioning audit {event['event']}: {event['workspacesListed']}/"
                f"{event['workspacesToList']} workspace(s) listed under {event['parents']} "
                f"parent(s), {event['calls']} call(s), {event['elapsedSeconds']:g} s"
            )
        # Progress, not an error: never styled as one.
        self.stderr.write(line, style_func=lambda text: text)


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
