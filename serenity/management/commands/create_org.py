"""`create_org --name NAME [--parent-workspace-id ID] [--serenity] [--workspace-mode MODE]
[--semrush-token TOKEN] [--drift-repair off|auto] [--json]` → prints the new org's id (SPEC §8).

The Semrush token is stored encrypted and never printed or logged.
"""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from kernel.errors import DomainError
from serenity.models import DriftRepair, WorkspaceMode
from serenity.services import organization_create


class Command(BaseCommand):
    help = "Create an organization and print its id."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--name", required=True, help="Organization name.")
        parser.add_argument(
            "--parent-workspace-id",
            default=None,
            help="Semrush parent workspace under which brand sub-workspaces are created.",
        )
        parser.add_argument(
            "--serenity", action="store_true", help="Enable Serenity for this organization."
        )
        parser.add_argument(
            "--workspace-mode",
            choices=WorkspaceMode.values,
            default=WorkspaceMode.SUBWORKSPACE,
            help="How the org's brands lay out their projects (default: subworkspace).",
        )
        parser.add_argument(
            "--semrush-token",
            default=None,
            help="The org's own Semrush credential (stored encrypted; never printed).",
        )
        parser.add_argument(
            "--drift-repair",
            choices=DriftRepair.values,
            default=DriftRepair.OFF,
            help="What the drift sweep does with what it finds: report it (off, the default) "
            "or repair it (auto).",
        )
        parser.add_argument("--json", action="store_true", help='Print {"id": "..."}.')

    def handle(self, *args: Any, **options: Any) -> None:
        # An org with Serenity on but no parent workspace could never provision a brand (SPEC
        # §11.4): refuse it here, before anything is written, rather than make it silently.
        if options["serenity"] and not (options["parent_workspace_id"] or "").strip():
            raise CommandError(
                "--serenity needs --parent-workspace-id (the Semrush workspace under which the "
                "org's brands are provisioned)."
            )
        try:
            organization = organization_create(
                name=options["name"],
                parent_workspace_id=options["parent_workspace_id"],
                serenity_enabled=options["serenity"],
                workspace_mode=options["workspace_mode"],
                semrush_token=options["semrush_token"],
                drift_repair=options["drift_repair"],
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        if options["json"]:
            self.stdout.write(json.dumps({"id": str(organization.id)}))
        else:
            self.stdout.write(str(organization.id))
