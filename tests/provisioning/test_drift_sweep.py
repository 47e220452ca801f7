"""The drift sweep (SPEC §13.1): each Serenity org at most once an interval, at its own offset
in it, plan-only unless its `driftRepair` is `auto`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from provisioning.reconcile.models import Reconciliation
from provisioning.reconcile.sweep import drift_sweep, org_offset_seconds, sweep_due
from tests.factories import OrganizationFactory

INTERVAL = 6 * 3600.0


def test_an_org_never_swept_is_due_only_in_the_tick_of_its_offset(settings):
    settings.SERENITY_DRIFT_SWEEP_INTERVAL_SECONDS = INTERVAL
    settings.SERENITY_DRIFT_SWEEP_TICK_SECONDS = 300.0
    org_id = uuid.UUID("00000000-0000-0000-0000-00000000a11c")
    offset = org_offset_seconds(org_id, INTERVAL)
    start = datetime(2026, 12, 7, tzinfo=UTC)  # a multiple of the interval since the epoch
    assert start.timestamp() % INTERVAL == 0

    due = [
        sweep_due(organization_id=org_id, last_swept=None, now=start + timedelta(seconds=t))
        for t in (offset - 1, offset, offset + 299, offset + 300)
    ]

    assert due == [False, True, True, False]


def test_orgs_are_spread_over_the_interval():
    offsets = sorted(org_offset_seconds(uuid.uuid4(), INTERVAL) for _ in range(200))
    # no hour of the six holds more than half of them
    per_hour = [sum(1 for o in offsets if h * 3600 <= o < (h + 1) * 3600) for h in range(6)]
    assert max(per_hour) < 100


@pytest.mark.django_db
def test_the_sweep_starts_a_due_orgs_reconciliation_at_most_once_an_interval(settings):
    # given two Serenity orgs swept an interval ago, one repairing what it finds
    settings.SERENITY_DRIFT_SWEEP_INTERVAL_SECONDS = INTERVAL
    plain = OrganizationFactory(workspace_mode="subworkspace")
    auto = OrganizationFactory(workspace_mode="subworkspace", drift_repair="auto")
    off = OrganizationFactory(serenity_enabled=False)
    now = datetime.now(UTC)
    for org in (plain, auto, off):
        old = Reconciliation.objects.create(organization=org, status="COMPLETED", swept=True)
        Reconciliation.objects.filter(pk=old.pk).update(
            created_at=now - timedelta(seconds=INTERVAL + 1)
        )

    # when the sweep runs twice
    first = drift_sweep(now=now)
    second = drift_sweep(now=now + timedelta(seconds=300))

    # then each Serenity org got one reconciliation, plan-only unless `auto`
    assert first["started"] == 2
    assert second["started"] == 0
    started = Reconciliation.objects.filter(status="IN_PROGRESS")
    assert {(r.organization_id, r.repair, r.swept) for r in started} == {
        (plain.id, False, True),
        (auto.id, True, True),
    }


@pytest.mark.django_db
def test_a_whole_org_plan_drops_the_drift_of_what_it_no_longer_compares():
    # given drift on a deactivated brand, on a deleted market and on an active brand
    from django.utils import timezone

    from provisioning.reconcile.models import Drift
    from provisioning.reconcile.services import reconciliation_planned
    from tests.factories import BrandFactory, MarketFactory

    org = OrganizationFactory(workspace_mode="subworkspace")
    gone = BrandFactory(organization=org, status="pending")
    kept = BrandFactory(organization=org)
    deleted = MarketFactory(brand=kept, deleted_at=timezone.now())
    now = timezone.now()
    Drift.objects.create(brand=gone, kind="workspaceGone", detected_at=now)
    Drift.objects.create(brand=kept, market=deleted, kind="projectGone", detected_at=now)
    Drift.objects.create(brand=kept, kind="workspaceFailed", detected_at=now)
    reconciliation = Reconciliation.objects.create(organization=org, plan_done=False)

    # when its plan has read every brand
    reconciliation_planned(reconciliation=reconciliation)

    # then only the active brand's own drift is left, and the reconciliation has ended
    assert list(Drift.objects.values_list("brand_id", "kind")) == [(kept.pk, "workspaceFailed")]
    reconciliation.refresh_from_db()
    assert reconciliation.status == "COMPLETED"
