"""Key rotation for secrets at rest (SPEC §10.5): FIELD_ENCRYPTION_KEYS, the first encrypts
and all decrypt; keys derived with HKDF; values encrypted by the older SHA-256 derivation still
decrypt; `rotate_credentials` re-encrypts every stored credential and webhook signing secret with
the first key."""

from __future__ import annotations

import io
import json

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.core.management import call_command
from django.utils import timezone

from kernel.crypto import derive_fernet_key, legacy_fernet_key
from serenity.models import Organization
from serenity.services import organization_create
from webhooks.models import Webhook
from webhooks.services import webhook_create, webhook_secret_rotate

CREDENTIAL = "semrush-credential-rotate-5e1"
NOTHING_ELSE = {
    "rotated": 0,
    "undecryptableOrgIds": [],
    "webhookSecretsRotated": 0,
    "undecryptableWebhookIds": [],
}


def _rotate() -> tuple[int, dict[str, object]]:
    out = io.StringIO()
    try:
        call_command("rotate_credentials", "--json", stdout=out, stderr=io.StringIO())
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, json.loads(out.getvalue())


def _ciphertext(org: Organization) -> str:
    return Organization.objects.values_list("semrush_credential_encrypted", flat=True).get(
        pk=org.pk
    )


def test_the_first_key_encrypts_with_the_hkdf_derivation(db, settings):
    # given
    settings.FIELD_ENCRYPTION_KEYS = ("new-key", "old-key")
    # when
    org = organization_create(name="Acme", semrush_token=CREDENTIAL)
    # then the stored value is a Fernet token under HKDF("new-key"), and nothing else
    stored = _ciphertext(org).encode()
    assert Fernet(derive_fernet_key("new-key")).decrypt(stored).decode() == CREDENTIAL
    for other in (derive_fernet_key("old-key"), legacy_fernet_key("new-key")):
        with pytest.raises(InvalidToken):
            Fernet(other).decrypt(stored)
    assert derive_fernet_key("new-key") != legacy_fernet_key("new-key")


def test_a_value_encrypted_with_the_legacy_derivation_still_decrypts(db, settings):
    # given a credential stored before rotation existed (one SHA-256 of the passphrase)
    settings.FIELD_ENCRYPTION_KEYS = ("the-key",)
    legacy = Fernet(legacy_fernet_key("the-key")).encrypt(CREDENTIAL.encode()).decode()
    org = organization_create(name="Acme")
    Organization.objects.filter(pk=org.pk).update(semrush_credential_encrypted=legacy)
    # then
    assert Organization.objects.get(pk=org.pk).semrush_credential() == CREDENTIAL


def test_every_key_decrypts(db, settings):
    # given a credential stored under the old key
    settings.FIELD_ENCRYPTION_KEYS = ("old-key",)
    org = organization_create(name="Acme", semrush_token=CREDENTIAL)
    # when a new key is put first
    settings.FIELD_ENCRYPTION_KEYS = ("new-key", "old-key")
    # then the old value still reads
    assert Organization.objects.get(pk=org.pk).semrush_credential() == CREDENTIAL


def test_rotate_credentials_reencrypts_every_credential_with_the_first_key(db, settings):
    # given credentials under the old key (current and legacy derivations) and an org without
    settings.FIELD_ENCRYPTION_KEYS = ("old-key",)
    current = organization_create(name="Current", semrush_token=CREDENTIAL)
    legacy = organization_create(name="Legacy")
    Organization.objects.filter(pk=legacy.pk).update(
        semrush_credential_encrypted=Fernet(legacy_fernet_key("old-key"))
        .encrypt(b"legacy-credential")
        .decode()
    )
    plain = organization_create(name="Plain")
    settings.FIELD_ENCRYPTION_KEYS = ("new-key", "old-key")
    # when
    code, result = _rotate()
    # then
    assert (code, result) == (0, {**NOTHING_ELSE, "rotated": 2})
    # and the new key alone reads them, the old one no longer does
    settings.FIELD_ENCRYPTION_KEYS = ("new-key",)
    assert Organization.objects.get(pk=current.pk).semrush_credential() == CREDENTIAL
    assert Organization.objects.get(pk=legacy.pk).semrush_credential() == "legacy-credential"
    assert _ciphertext(plain) == ""
    settings.FIELD_ENCRYPTION_KEYS = ("old-key",)
    with pytest.raises(ValueError):
        Organization.objects.get(pk=current.pk).semrush_credential()


def test_rotate_credentials_reports_what_no_key_decrypts_and_leaves_it(db, settings):
    # given a credential under a key that is no longer configured
    settings.FIELD_ENCRYPTION_KEYS = ("lost-key",)
    lost = organization_create(name="Lost", semrush_token=CREDENTIAL)
    before = _ciphertext(lost)
    settings.FIELD_ENCRYPTION_KEYS = ("new-key",)
    kept = organization_create(name="Kept", semrush_token=CREDENTIAL)
    # when
    code, result = _rotate()
    # then
    assert (code, result) == (
        1,
        {**NOTHING_ELSE, "rotated": 1, "undecryptableOrgIds": [str(lost.pk)]},
    )
    assert _ciphertext(lost) == before
    assert Organization.objects.get(pk=kept.pk).semrush_credential() == CREDENTIAL


def test_rotate_credentials_prints_no_secret(db, settings):
    # given
    organization_create(name="Acme", semrush_token=CREDENTIAL)
    out, err = io.StringIO(), io.StringIO()
    # when
    call_command("rotate_credentials", stdout=out, stderr=err)
    # then
    assert out.getvalue() == (
        "Re-encrypted 1 credential(s) and 0 webhook secret(s) with the first key.\n"
    )
    assert err.getvalue() == ""


def _hook(org: Organization) -> Webhook:
    return webhook_create(
        organization=org, url="http://127.0.0.1:9/hook", events=["job.completed"], description=""
    ).webhook


def test_rotate_credentials_reencrypts_webhook_secrets_the_current_and_the_one_still_signing(
    db, settings
):
    # given, under the old key, an endpoint and one whose secret was rotated (the replaced one
    # still signs for 24 h)
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    settings.FIELD_ENCRYPTION_KEYS = ("old-key",)
    org = organization_create(name="Hooks")
    plain = _hook(org)
    rotated = _hook(org)
    replaced = rotated.secret()
    secrets = {plain.pk: plain.secret(), rotated.pk: webhook_secret_rotate(webhook=rotated).secret}
    settings.FIELD_ENCRYPTION_KEYS = ("new-key", "old-key")
    # when
    code, result = _rotate()
    # then three secrets were re-encrypted ...
    assert (code, result) == (0, {**NOTHING_ELSE, "webhookSecretsRotated": 3})
    # ... and the new key alone signs with them
    settings.FIELD_ENCRYPTION_KEYS = ("new-key",)
    now = timezone.now()
    assert Webhook.objects.get(pk=plain.pk).signing_secrets(now=now) == [secrets[plain.pk]]
    signing = Webhook.objects.get(pk=rotated.pk).signing_secrets(now=now)
    assert signing == [secrets[rotated.pk], replaced]


def test_rotate_credentials_reports_a_webhook_secret_no_key_decrypts_and_leaves_it(db, settings):
    # given an endpoint whose secret is under a key no longer configured
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    settings.FIELD_ENCRYPTION_KEYS = ("lost-key",)
    lost = _hook(organization_create(name="Lost hooks"))
    before = Webhook.objects.values_list("secret_encrypted", flat=True).get(pk=lost.pk)
    settings.FIELD_ENCRYPTION_KEYS = ("new-key",)
    # when
    code, result = _rotate()
    # then it is named, exit 1, and its value is left as it was
    assert (code, result) == (1, {**NOTHING_ELSE, "undecryptableWebhookIds": [str(lost.pk)]})
    assert Webhook.objects.values_list("secret_encrypted", flat=True).get(pk=lost.pk) == before
