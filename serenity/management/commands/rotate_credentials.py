"""`rotate_credentials [--json]` → re-encrypts every stored org credential with the first of
FIELD_ENCRYPTION_KEYS (SPEC §10.5).

Rotation: put the new passphrase first (`FIELD_ENCRYPTION_KEYS=new,old`), restart, run this,
then drop the old one. Prints how many were re-encrypted (`{"rotated": N,
"undecryptableOrgIds": [...]}` with `--json`); exits 1 when some credential could not be
decrypted with any configured key (those are left unchanged). Never prints a secret.
"""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from serenity.services import organization_credentials_rotate


class Command(BaseCommand):
    help = "Re-encrypt every stored org credential with the first of FIELD_ENCRYPTION_KEYS."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        result = organization_credentials_rotate()
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {"rotated": result.rotated, "undecryptableOrgIds": result.undecryptable_org_ids}
                )
            )
        else:
            self.stdout.write(f"Re-encrypted {result.rotated} credential(s) with the first key.")
            for org_id in result.undecryptable_org_ids:
                self.stderr.write(f"Organization {org_id}: no configured key decrypts it.")
        if result.undecryptable_org_ids:
            raise SystemExit(1)
