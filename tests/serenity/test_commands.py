"""`create_org` and `create_api_token` (SPEC §8's exact forms)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from serenity.models import ApiToken, Membership, Organization
from serenity.tokens import token_digest
from tests.factories import BrandFactory, OrganizationFactory


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def _brands_status(org_id: str, token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get(f"/v2/orgs/{org_id}/brands").status_code


# --- create_org --------------------------------------------------------------------------------


def test_create_org_json_prints_only_the_id_and_stores_every_flag(db):
    # when
    output = _run(
        "create_org",
        "--name",
        "Acme",
        "--parent-workspace-id",
        "ws-parent-1",
        "--serenity",
        "--workspace-mode",
        "flat",
        "--semrush-token",
        "org-credential-xyz",
        "--json",
    )
    # then
    body = json.loads(output)
    assert list(body) == ["id"]
    org = Organization.objects.get(pk=body["id"])
    assert org.name == "Acme"
    assert org.semrush_parent_workspace_id == "ws-parent-1"
    assert org.serenity_enabled is True
    assert org.workspace_mode == "flat"
    assert org.is_serenity_org is True
    # and the credential is stored encrypted, never echoed
    assert "org-credential-xyz" not in output
    assert org.semrush_credential_encrypted != "org-credential-xyz"
    assert org.semrush_credential() == "org-credential-xyz"


def test_create_org_defaults(db):
    # when
    output = _run("create_org", "--name", "Plain")
    # then: plain output is the id on one line
    org_id = output.strip()
    assert str(uuid.UUID(org_id)) == org_id
    org = Organization.objects.get(pk=org_id)
    assert org.semrush_parent_workspace_id is None
    assert org.serenity_enabled is False
    assert org.workspace_mode == "subworkspace"
    assert org.semrush_credential() is None
    assert org.is_serenity_org is False


def test_create_org_rejects_a_blank_name(db):
    # when / then
    with pytest.raises(CommandError, match="name must not be blank"):
        _run("create_org", "--name", "   ")
    assert Organization.objects.count() == 0


def test_create_org_rejects_an_unknown_workspace_mode(db):
    # when / then
    with pytest.raises(CommandError):
        _run("create_org", "--name", "Acme", "--workspace-mode", "tree")
    assert Organization.objects.count() == 0


# --- create_api_token --------------------------------------------------------------------------


def test_create_api_token_for_an_org_member_authenticates(db):
    # given
    org = OrganizationFactory()
    # when
    output = _run("create_api_token", "--org", str(org.id), "--username", "bob", "--json")
    # then
    body = json.loads(output)
    assert list(body) == ["token"]
    token = body["token"]
    membership = Membership.objects.get(user__username="bob", organization=org)
    assert membership.role == "writer"
    stored = ApiToken.objects.get(user__username="bob")
    assert stored.token_hash == token_digest(token)
    assert _brands_status(str(org.id), token) == 200


def test_create_api_token_with_reader_role(db):
    # given
    org = OrganizationFactory()
    # when
    token = _run("create_api_token", "--org", str(org.id), "--role", "reader", "--username", "r")
    # then: plain output is the token on one line
    token = token.strip()
    assert Membership.objects.get(user__username="r", organization=org).role == "reader"
    assert _brands_status(str(org.id), token) == 200


def test_create_api_token_again_updates_the_role_and_adds_a_second_token(db):
    # given
    org = OrganizationFactory()
    first = _run("create_api_token", "--org", str(org.id), "--role", "reader", "--username", "u")
    # when
    second = _run("create_api_token", "--org", str(org.id), "--role", "writer", "--username", "u")
    # then
    assert first.strip() != second.strip()
    assert get_user_model().objects.filter(username="u").count() == 1
    assert Membership.objects.get(user__username="u").role == "writer"
    assert ApiToken.objects.filter(user__username="u").count() == 2
    assert _brands_status(str(org.id), first.strip()) == 200
    assert _brands_status(str(org.id), second.strip()) == 200


def test_create_api_token_staff_acts_on_every_org(db):
    # given orgs with brands, none of which the user belongs to
    first = BrandFactory().organization
    second = BrandFactory().organization
    # when
    output = _run("create_api_token", "--staff", "--username", "ops", "--json")
    # then
    token = json.loads(output)["token"]
    user = get_user_model().objects.get(username="ops")
    assert user.is_staff is True
    assert Membership.objects.filter(user=user).count() == 0
    assert _brands_status(str(first.id), token) == 200
    assert _brands_status(str(second.id), token) == 200


def test_created_user_cannot_log_in_with_a_password(db):
    # when
    _run("create_api_token", "--staff", "--username", "ops")
    # then
    assert get_user_model().objects.get(username="ops").has_usable_password() is False


def test_create_api_token_for_an_unknown_org_fails_and_writes_nothing(db):
    # when / then
    with pytest.raises(CommandError, match="No organization with id"):
        _run("create_api_token", "--org", str(uuid.uuid4()), "--username", "bob")
    assert get_user_model().objects.filter(username="bob").exists() is False
    assert ApiToken.objects.count() == 0


def test_create_api_token_for_a_malformed_org_id_fails(db):
    # when / then
    with pytest.raises(CommandError, match="must be an organization id"):
        _run("create_api_token", "--org", "acme", "--username", "bob")
    assert ApiToken.objects.count() == 0


def test_create_api_token_needs_exactly_one_of_org_and_staff(db):
    # given
    org = OrganizationFactory()
    # when / then
    with pytest.raises(CommandError):
        _run("create_api_token", "--username", "bob")
    with pytest.raises(CommandError):
        _run("create_api_token", "--org", str(org.id), "--staff", "--username", "bob")
    with pytest.raises(CommandError, match="--role applies to --org only"):
        _run("create_api_token", "--staff", "--role", "reader", "--username", "bob")
    assert ApiToken.objects.count() == 0


def test_create_api_token_rejects_an_unknown_role(db):
    # given
    org = OrganizationFactory()
    # when / then
    with pytest.raises(CommandError):
        _run("create_api_token", "--org", str(org.id), "--role", "admin", "--username", "bob")
    assert ApiToken.objects.count() == 0


def test_create_api_token_cli_exits_non_zero_for_an_unknown_org(db):
    # given the command run as operators run it, against the test database
    db_settings = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{db_settings['USER']}@{db_settings['HOST']}:{db_settings['PORT']}"
            f"/{db_settings['NAME']}"
        ),
    }
    missing = uuid.uuid4()
    # when
    completed = subprocess.run(
        [sys.executable, "manage.py", "create_api_token", "--org", str(missing), "--username", "x"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # then
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert f"CommandError: No organization with id {missing}." in completed.stderr


@pytest.mark.parametrize("parent", [None, "", "   "])
def test_create_org_serenity_without_a_parent_workspace_is_refused(db, parent):
    # given
    args = ["create_org", "--name", "Orphan", "--serenity"]
    if parent is not None:
        args += ["--parent-workspace-id", parent]
    # when / then it names the missing option, and writes nothing
    with pytest.raises(CommandError, match="--serenity needs --parent-workspace-id"):
        _run(*args)
    assert Organization.objects.count() == 0


def test_create_org_cli_serenity_without_a_parent_exits_non_zero(db):
    # when run as operators run it (no database is reached: it fails before writing)
    completed = subprocess.run(
        [sys.executable, "manage.py", "create_org", "--name", "Orphan", "--serenity"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # then
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert "--parent-workspace-id" in completed.stderr
