"""An org's `driftRepair` (SPEC §13.1) from the command line: `create_org --drift-repair` and
`set_drift_repair`."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from serenity.models import Organization
from tests.factories import OrganizationFactory


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_org_takes_drift_repair_and_defaults_to_off(db):
    auto = _run("create_org", "--name", "Auto", "--drift-repair", "auto").strip()
    plain = _run("create_org", "--name", "Plain").strip()
    assert Organization.objects.get(pk=auto).drift_repair == "auto"
    assert Organization.objects.get(pk=plain).drift_repair == "off"


def test_set_drift_repair_switches_an_org(db):
    org = OrganizationFactory()
    output = _run("set_drift_repair", str(org.pk), "auto")
    assert output.strip() == f"{org.pk} driftRepair=auto"
    org.refresh_from_db()
    assert org.drift_repair == "auto"


def test_set_drift_repair_refuses_an_unknown_org_or_value(db):
    with pytest.raises(CommandError, match="No organization"):
        _run("set_drift_repair", "not-an-id", "auto")
    org = OrganizationFactory()
    with pytest.raises(CommandError):
        _run("set_drift_repair", str(org.pk), "sometimes")
    org.refresh_from_db()
    assert org.drift_repair == "off"
