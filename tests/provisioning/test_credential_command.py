"""`manage.py semrush_credential` (SPEC §13.2): an org's credential changed from the command line
(read from standard input, never printed) is re-checked at once."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.core.management import CommandError, call_command

from provisioning.credential_hold import RECHECK_TASK
from tests.factories import OrganizationFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_credential_set_from_stdin_is_stored_and_rechecked_at_once(monkeypatch):
    org = OrganizationFactory()
    monkeypatch.setattr("sys.stdin", io.StringIO("new-secret-credential\n"))
    out = io.StringIO()
    with mock.patch("provisioning.credential_hold.publish_task") as publish:
        call_command("semrush_credential", "--org", str(org.id), stdout=out)
    org.refresh_from_db()
    assert org.semrush_credential() == "new-secret-credential"
    publish.assert_called_once_with(task_name=RECHECK_TASK, args=[str(org.id)])
    assert "new-secret-credential" not in out.getvalue()


def test_clear_goes_back_to_the_service_credential(monkeypatch):
    org = OrganizationFactory()
    org.set_semrush_credential("old")
    org.save()
    with mock.patch("provisioning.credential_hold.publish_task") as publish:
        call_command("semrush_credential", "--org", str(org.id), "--clear", stdout=io.StringIO())
    org.refresh_from_db()
    assert org.semrush_credential() is None
    assert publish.call_count == 1


def test_nothing_on_stdin_changes_nothing(monkeypatch):
    org = OrganizationFactory()
    org.set_semrush_credential("old")
    org.save()
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with (
        mock.patch("provisioning.credential_hold.publish_task") as publish,
        pytest.raises(CommandError),
    ):
        call_command("semrush_credential", "--org", str(org.id))
    org.refresh_from_db()
    assert org.semrush_credential() == "old"
    assert publish.call_count == 0
