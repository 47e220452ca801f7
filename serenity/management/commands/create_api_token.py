"""`create_api_token (--org ORG_ID [--role reader|writer] | --staff) --username NAME [--json]`
→ creates the user (and membership) if needed and prints a new token once (SPEC §8).

A staff token acts on every org as a writer. The token is stored only as a digest.
"""

from __future__ import annotations

import json
import uuid
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from kernel.errors import DomainError
from serenity.models import Organization, Role
from serenity.services import api_token_create, membership_ensure, user_ensure


class Command(BaseCommand):
    help = "Create an API token (and its user/membership if needed) and print it once."

    def add_arguments(self, parser: ArgumentParser) -> None:
        scope = parser.add_mutually_exclusive_group(required=True)
        scope.add_argument("--org", help="Organization id the user becomes a member of.")
        scope.add_argument(
            "--staff", action="store_true", help="A staff token that may act on every org."
        )
        parser.add_argument(
            "--role",
            choices=Role.values,
            default=None,
            help="Membership role with --org (default: writer).",
        )
        parser.add_argument("--username", required=True, help="User the token belongs to.")
        parser.add_argument("--name", default="", help="A label for the token.")
        parser.add_argument("--json", action="store_true", help='Print {"token": "..."}.')

    def handle(self, *args: Any, **options: Any) -> None:
        if options["staff"] and options["role"] is not None:
            raise CommandError("--role applies to --org only; a staff token acts as a writer.")
        organization = None
        if options["org"] is not None:
            organization = self._organization(options["org"])
        try:
            with transaction.atomic():
                user = user_ensure(username=options["username"], staff=options["staff"])
                if organization is not None:
                    membership_ensure(
                        user=user, organization=organization, role=options["role"] or Role.WRITER
                    )
                _, raw = api_token_create(user=user, name=options["name"])
        except DomainError as exc:
            raise CommandError(exc.message) from None
        if options["json"]:
            self.stdout.write(json.dumps({"token": raw}))
        else:
            self.stdout.write(raw)

    @staticmethod
    def _organization(org_id: str) -> Organization:
        try:
            org_uuid = uuid.UUID(org_id)
        except ValueError:
            raise CommandError(
                f"--org must be an organization id (a UUID), got {org_id!r}."
            ) from None
        organization = Organization.objects.filter(pk=org_uuid).first()
        if organization is None:
            raise CommandError(f"No organization with id {org_uuid}.")
        return organization
