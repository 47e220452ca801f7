"""`semrush_credential --org ID [--clear]` reads the org's new Semrush credential from standard
input (never from the command line, where `ps` shows it), stores it encrypted, and re-checks it
at once (SPEC §13.2): work held while Semrush refused the old one resumes if the new one works.
`--clear` makes the org use the service-wide `SEMRUSH_API_TOKEN` again."""

from __future__ import annotations

import sys
import uuid
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from provisioning.credential_hold import recheck_on_commit
from serenity.models import Organization


class Command(BaseCommand):
    help = "Set (from standard input) or clear an organization's own Semrush credential."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--org", required=True, help="the organization's id")
        parser.add_argument(
            "--clear", action="store_true", help="use the service-wide credential again"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            organization_id = uuid.UUID(options["org"])
        except ValueError:
            raise CommandError("--org must be an organization id (a UUID).") from None
        token = "" if options["clear"] else sys.stdin.readline().strip()
        if not options["clear"] and not token:
            raise CommandError("No credential on standard input (or pass --clear).")
        with transaction.atomic():
            organization = Organization.objects.select_for_update().filter(pk=organization_id)
            found = organization.first()
            if found is None:
                raise CommandError("No such organization.")
            found.set_semrush_credential(token)
            found.save(update_fields=["semrush_credential_encrypted", "updated_at"])
            recheck_on_commit(organization_id=found.pk)
        self.stdout.write("The credential was changed; it is checked again now.")
