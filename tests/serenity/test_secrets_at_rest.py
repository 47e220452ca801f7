"""No API token and no Semrush credential is ever stored in the clear (SPEC §3, §4)."""

from __future__ import annotations

import io
import json

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db.models import Model

from serenity.models import ApiToken, Organization
from serenity.services import api_token_create, organization_create, user_ensure
from serenity.tokens import token_digest

CREDENTIAL = "semrush-credential-3f9a1c7e5b"


def _stored_cells(model: type[Model]) -> list[str]:
    """Every column of every row of `model`, as text. No field of ours transforms its value on
    read (the credential is decrypted by a method, not by its field), so this is what is
    stored."""
    manager = model._meta.default_manager
    assert manager is not None
    return [str(cell) for row in manager.values_list() for cell in row]


def _all_cells() -> list[str]:
    """The stored cells of every model's table, Django's own (users, sessions, admin log) and
    the many-to-many tables included."""
    cells: list[str] = []
    for model in apps.get_models(include_auto_created=True):
        cells.extend(_stored_cells(model))
    return cells


def test_services_store_neither_token_nor_credential_in_the_clear(db):
    # given
    org = organization_create(
        name="Acme", parent_workspace_id="p-1", serenity_enabled=True, semrush_token=CREDENTIAL
    )
    user = user_ensure(username="alice")
    token, raw = api_token_create(user=user, name="ci")
    # when
    token_cells = _stored_cells(ApiToken)
    org_cells = _stored_cells(Organization)
    # then
    assert token_cells
    assert org_cells
    assert not [cell for cell in token_cells if raw in cell]
    assert not [cell for cell in org_cells if CREDENTIAL in cell]
    # and nothing anywhere in the database holds either
    assert not [cell for cell in _all_cells() if raw in cell or CREDENTIAL in cell]
    # and what is stored is the digest and a short prefix
    stored = ApiToken.objects.get(pk=token.pk)
    assert stored.token_hash == token_digest(raw)
    assert stored.prefix == raw[:8]
    # and the credential decrypts back
    assert Organization.objects.get(pk=org.pk).semrush_credential() == CREDENTIAL


def test_commands_store_neither_token_nor_credential_in_the_clear(db):
    # given
    out = io.StringIO()
    call_command(
        "create_org",
        "--name=Acme",
        "--serenity",
        "--parent-workspace-id=p-1",
        f"--semrush-token={CREDENTIAL}",
        "--json",
        stdout=out,
    )
    org_id = json.loads(out.getvalue())["id"]
    out = io.StringIO()
    call_command("create_api_token", f"--org={org_id}", "--username=bob", "--json", stdout=out)
    raw = json.loads(out.getvalue())["token"]
    # when
    cells = _all_cells()
    # then
    assert not [cell for cell in cells if raw in cell or CREDENTIAL in cell]
    assert Organization.objects.get(pk=org_id).semrush_credential() == CREDENTIAL


def test_credential_ciphertext_differs_each_time_and_fails_under_another_key(db, settings):
    # given
    first = organization_create(name="A", semrush_token=CREDENTIAL)
    second = organization_create(name="B", semrush_token=CREDENTIAL)
    # then: Fernet uses a random IV, so equal secrets do not look equal at rest
    assert first.semrush_credential_encrypted != second.semrush_credential_encrypted
    # when the key changes
    settings.FIELD_ENCRYPTION_KEYS = ("another-key",)
    # then the value cannot be read back
    with pytest.raises(ValueError):
        Organization.objects.get(pk=first.pk).semrush_credential()


def test_org_without_credential_has_none(db):
    # when
    org = organization_create(name="Plain")
    # then
    assert org.semrush_credential() is None
    assert org.has_semrush_credential is False
