"""`set_drift_repair ORG_ID off|auto`: what the drift sweep does with the drift it finds for
the org (SPEC §13.1): report it (`off`, the default) or repair it (`auto`)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from kernel.errors import DomainError
from serenity.models import DriftRepair, Organization
from serenity.services import organization_drift_repair_set


class Command(BaseCommand):
    help = "Set an organization's drift repair (off: report; auto: the sweep repairs)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("org_id", help="The organization's id.")
        parser.add_argument("drift_repair", choices=DriftRepair.values)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            organization = Organization.objects.get(pk=options["org_id"])
        except (Organization.DoesNotExist, ValidationError):
            raise CommandError(f"No organization {options['org_id']}.") from None
        try:
            organization_drift_repair_set(
                organization=organization, drift_repair=options["drift_repair"]
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{organization.id} driftRepair={organization.drift_repair}")
