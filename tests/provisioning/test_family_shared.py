"""The family listing shared by a group of an onboarding's items (SPEC §11.2)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import JobStatus
from provisioning.family import family_shared
from provisioning.models import Onboarding, OnboardingFamily, OnboardingItem
from provisioning.quota import PermitDeferredError
from provisioning.upstream import client_for_org
from tests.factories import AsyncJobFactory
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
        client=client,
        onboarding_id=str(group.pk),
        group=0,
        parent_id=sim.parent_id,
        job_id=uuid.uuid4(),
    )
    second = family_shared(
        client=client,
        onboarding_id=str(group.pk),
        group=0,
        parent_id=sim.parent_id,
        job_id=uuid.uuid4(),
    )
    # then the family was listed once, and the record holds the group's titles only
    assert calls_since(sim, start) == [family(sim.parent_id)]
    assert sorted(ws["title"] for ws in first) == ["Brand 3", "brand 7"]
    assert second == first


def test_an_item_finding_the_listing_under_way_comes_back_after_the_claimant(
    serenity_org, sim, group
):
    # given the group claimed by a step re-scheduled for the quota 30 s on
    claimant = AsyncJobFactory(run_after=timezone.now() + timedelta(seconds=30))
    OnboardingFamily.objects.create(onboarding=group, group=0, entries=None, claimed_by=claimant.pk)
    start = mark(sim)
    # when another item of the group asks, it is re-scheduled to just after the claimant
    with pytest.raises(PermitDeferredError) as deferred:
        family_shared(
            client=client_for_org(serenity_org),
            onboarding_id=str(group.pk),
            group=0,
            parent_id=sim.parent_id,
            job_id=uuid.uuid4(),
        )
    assert 30 <= deferred.value.retry_in <= 31
    assert calls_since(sim, start) == []


def test_the_claimant_itself_lists_when_it_comes_back(serenity_org, sim, group):
    claimant = AsyncJobFactory()
    OnboardingFamily.objects.create(onboarding=group, group=0, entries=None, claimed_by=claimant.pk)
    start = mark(sim)
    entries = family_shared(
        client=client_for_org(serenity_org),
        onboarding_id=str(group.pk),
        group=0,
        parent_id=sim.parent_id,
        job_id=claimant.pk,
    )
    assert (entries, calls_since(sim, start)) == ([], [family(sim.parent_id)])


def test_a_claimant_that_ended_without_filling_it_holds_nobody_back(serenity_org, sim, group):
    claimant = AsyncJobFactory(status=JobStatus.FAILED)
    record = OnboardingFamily.objects.create(
        onboarding=group, group=0, entries=None, claimed_by=claimant.pk
    )
    start = mark(sim)
    entries = family_shared(
        client=client_for_org(serenity_org),
        onboarding_id=str(group.pk),
        group=0,
        parent_id=sim.parent_id,
        job_id=uuid.uuid4(),
    )
    assert (entries, calls_since(sim, start)) == ([], [family(sim.parent_id)])
    assert OnboardingFamily.objects.get(pk=record.pk).entries == []
