"""The family listing shared by a group of an onboarding's items (SPEC §11.2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from provisioning.models import Onboarding, OnboardingFamily, OnboardingItem
from provisioning.quota import PermitDeferredError
from provisioning.upstream import client_for_org
from provisioning.workspace import family_shared
from tests.support import calls_since, family, mark, sim_create_workspace


@pytest.fixture
def group(serenity_org):  # type: ignore[no-untyped-def]
    onboarding = Onboarding.objects.create(organization=serenity_org, total=12)
    OnboardingItem.objects.bulk_create(
        OnboardingItem(onboarding=onboarding, index=i, name=f"Brand {i}") for i in range(12)
    )
    return onboarding


def test_the_first_item_lists_and_the_group_reads_its_record(serenity_org, sim, group):
    # given workspaces titled as two of group 0's items, one of group 1's, and others
    for title in ("Brand 3", "brand 7", "Brand 11", "Unrelated"):
        sim_create_workspace(sim, title)
    client = client_for_org(serenity_org)
    start = mark(sim)
    # when two items of group 0 ask
    first = family_shared(
        client=client, onboarding_id=str(group.pk), group=0, parent_id=sim.parent_id
    )
    second = family_shared(
        client=client, onboarding_id=str(group.pk), group=0, parent_id=sim.parent_id
    )
    # then the family was listed once, and the record holds the group's titles only
    assert calls_since(sim, start) == [family(sim.parent_id)]
    assert sorted(ws["title"] for ws in first) == ["Brand 3", "brand 7"]
    assert second == first


def test_an_item_finding_the_listing_under_way_comes_back_later(serenity_org, sim, group):
    OnboardingFamily.objects.create(onboarding=group, group=0, entries=None)
    start = mark(sim)
    with pytest.raises(PermitDeferredError):
        family_shared(
            client=client_for_org(serenity_org),
            onboarding_id=str(group.pk),
            group=0,
            parent_id=sim.parent_id,
        )
    assert calls_since(sim, start) == []


def test_a_claim_its_worker_never_filled_holds_nobody_back(serenity_org, sim, group):
    record = OnboardingFamily.objects.create(onboarding=group, group=0, entries=None)
    OnboardingFamily.objects.filter(pk=record.pk).update(
        created_at=timezone.now() - timedelta(seconds=11)
    )
    start = mark(sim)
    entries = family_shared(
        client=client_for_org(serenity_org),
        onboarding_id=str(group.pk),
        group=0,
        parent_id=sim.parent_id,
    )
    assert (entries, calls_since(sim, start)) == ([], [family(sim.parent_id)])
    assert OnboardingFamily.objects.get(pk=record.pk).entries == []
