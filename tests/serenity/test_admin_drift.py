"""The drift admin (SPEC §13.1): current drift listed and filtered by kind, an action that
repairs the selected brands (a repairing reconciliation, in the admin log), reconciliations
with their items, and the org's `driftRepair` switch."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from provisioning.reconcile.models import Drift, Reconciliation
from serenity.models import Organization
from tests.factories import BrandFactory, MarketFactory

DRIFT = "/admin/reconcile/drift/"


@pytest.fixture
def admin_client(db) -> Client:  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def drifted(serenity_org):  # type: ignore[no-untyped-def]
    gone = BrandFactory(organization=serenity_org, name="Gone", semrush_sub_workspace_id="ws-1")
    market = MarketFactory(brand=BrandFactory(organization=serenity_org, name="Unpublished"))
    now = timezone.now()
    return [
        Drift.objects.create(brand=gone, kind="workspaceGone", detected_at=now),
        Drift.objects.create(
            brand=market.brand, market=market, kind="projectNotLive", detected_at=now
        ),
    ]


def test_drift_is_listed_and_filtered_by_kind(admin_client, drifted):
    page = admin_client.get(DRIFT).content.decode()
    assert "Gone" in page and "Unpublished" in page
    filtered = admin_client.get(f"{DRIFT}?kind=workspaceGone").content.decode()
    assert "Gone" in filtered and "Unpublished" not in filtered


def test_the_repair_action_begins_a_repairing_reconciliation_of_those_brands(
    admin_client, drifted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = admin_client.post(
            DRIFT,
            {"action": "repair_brands", "_selected_action": [str(d.pk) for d in drifted]},
            follow=True,
        )
    assert response.status_code == 200
    assert "Began 1 repairing reconciliation(s)." in response.content.decode()
    reconciliation = Reconciliation.objects.get()
    assert reconciliation.repair is True
    assert sorted(reconciliation.brand_ids or []) == sorted(str(d.brand_id) for d in drifted)
    assert reconciliation.started_by_actor == "admin: root"
    entry = LogEntry.objects.get(object_id=str(reconciliation.pk))
    assert (entry.action_flag, entry.change_message) == (ADDITION, "Repair of 2 brand(s).")
    # the reconciliation's own page
    page = admin_client.get(f"/admin/reconcile/reconciliation/{reconciliation.pk}/change/")
    assert page.status_code == 200


def test_a_repair_is_refused_while_the_org_has_a_reconciliation_running(
    admin_client, drifted, serenity_org
):
    Reconciliation.objects.create(organization=serenity_org)
    response = admin_client.post(
        DRIFT,
        {"action": "repair_brands", "_selected_action": [str(drifted[0].pk)]},
        follow=True,
    )
    assert "in progress" in response.content.decode()
    assert Reconciliation.objects.count() == 1


def test_the_org_page_sets_drift_repair(admin_client, serenity_org):
    page = admin_client.get(f"/admin/serenity/organization/{serenity_org.pk}/change/")
    assert 'name="drift_repair"' in page.content.decode()
    assert Organization.objects.get(pk=serenity_org.pk).drift_repair == "off"


def test_metrics_count_drifted_brands_per_kind_without_an_org_label(
    drifted, serenity_org, anonymous, settings
):
    settings.SERENITY_METRICS_PER_ORG = False
    text = anonymous.get("/metrics").content.decode()
    assert 'serenity_drifted_brands{kind="workspaceGone"} 1.0' in text
    assert 'serenity_drifted_brands{kind="projectNotLive"} 1.0' in text
    assert str(serenity_org.pk) not in text
    settings.SERENITY_METRICS_PER_ORG = True
    text = anonymous.get("/metrics").content.decode()
    assert f'serenity_drifted_brands{{kind="workspaceGone",org="{serenity_org.pk}"}} 1.0' in text
