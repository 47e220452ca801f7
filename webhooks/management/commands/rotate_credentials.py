"""`rotate_credentials [--json]` → re-encrypts every secret stored at rest with the first of
FIELD_ENCRYPTION_KEYS: the orgs' Semrush credentials and the webhooks' signing secrets (a
replaced one too, while it still signs).

Rotation: put the new passphrase first (`FIELD_ENCRYPTION_KEYS=new,old`), restart, run this,
then drop the old one. Prints how many were re-encrypted (with `--json`: `{"rotated": N,
"undecryptableOrgIds": [...], "webhookSecretsRotated": M, "undecryptableWebhookIds": [...]}`);
exits 1 when some value could not be decrypted with any configured key (those are left
unchanged: keep the old key until they are dealt with). Never prints a secret. It lives in the
webhooks app, the lowest layer that sees both kinds of secret.
"""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from serenity.services import organization_credentials_rotate
from webhooks.services import webhook_secrets_reencrypt


class Command(BaseCommand):
    help = "Re-encrypt every secret stored at rest with the first of FIELD_ENCRYPTION_KEYS."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        orgs = organization_credentials_rotate()
        hooks = webhook_secrets_reencrypt()
        if options["json"]:
            result = {
                "rotated": orgs.rotated,
                "undecryptableOrgIds": orgs.undecryptable,
                "webhookSecretsRotated": hooks.rotated,
                "undecryptableWebhookIds": hooks.undecryptable,
            }
            self.stdout.write(json.dumps(result))
        else:
            self.stdout.write(
                f"Re-encrypted {orgs.rotated} credential(s) and {hooks.rotated} webhook "
                "secret(s) with the first key."
            )
            for org_id in orgs.undecryptable:
                self.stderr.write(f"Organization {org_id}: no configured key decrypts it.")
            for webhook_id in hooks.undecryptable:
                self.stderr.write(f"Webhook {webhook_id}: no configured key decrypts its secret.")
        if orgs.undecryptable or hooks.undecryptable:
            raise SystemExit(1)
