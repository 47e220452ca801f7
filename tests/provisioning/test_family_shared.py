"""The family listings an onboarding's items share: a group's for their create-or-adopt (SPEC
§11.2), the onboarding's for their settle reads (SPEC §12.5)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from jobs.models import JobStatus
from provisioning import quota
from provisioning.exceptions import UpstreamRateLimitedError
from provisioning.family import family_shared, family_status_shared
from provisioning.models import (
    Onboarding,
    OnboardingFamily,
    OnboardingItem,
)
from provisioning.quota import PermitDeferredError
from provisioning.upstream import client_for_org
from tests.factories import AsyncJobFactory, BrandFactory, ProvisioningAttemptFactory
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


# --- the onboarding's settle reads (SPEC §12.5) -------------------------------------------------


def status_of(sim, onboarding, workspace_id, *, job_id, due):  # type: ignore[no-untyped-def]
    """One settle read of `workspace_id` by an item of `onboarding`, due at `due`, made by the
    step `job_id`."""
    return family_status_shared(
        client=client_for_org(onboarding.organization),
        onboarding_id=str(onboarding.pk),
        parent_id=sim.parent_id,
        job_id=job_id,
        workspace_id=workspace_id,
        due=due,
    )


def settling_item(onboarding, index, workspace_id, **attempt):  # type: ignore[no-untyped-def]
    """Item `index` of `onboarding`, its brand's pending attempt settling `workspace_id`."""
    brand = BrandFactory(organization=onboarding.organization)
    OnboardingItem.objects.filter(onboarding=onboarding, index=index).update(brand=brand)
    return ProvisioningAttemptFactory(
        brand=brand,
        started_by="create-brand",
        candidate_workspace_id=workspace_id,
        freshly_created=True,
        **attempt,
    )


def read_due_in(onboarding, *, seconds, status=JobStatus.IN_PROGRESS, elsewhere=False):  # type: ignore[no-untyped-def]
    """A settle read's row of an item of `onboarding` (of another onboarding: `elsewhere`),
    due in `seconds`."""
    of = str(uuid.uuid4()) if elsewhere else str(onboarding.pk)
    return AsyncJobFactory(
        status=status,
        run_after=timezone.now() + timedelta(seconds=seconds),
        metadata={"onboardingId": of},
    )


def shared(onboarding):  # type: ignore[no-untyped-def]
    """The onboarding's shared statuses: (statuses, statuses_at, statuses_by)."""
    return (
        Onboarding.objects.filter(pk=onboarding.pk)
        .values_list("statuses", "statuses_at", "statuses_by")
        .get()
    )


def test_a_listing_asked_for_after_the_read_was_due_answers_it_without_a_call(
    serenity_org, sim, group
):
    # given the onboarding's statuses listed 1 s after the read was due
    now = timezone.now()
    Onboarding.objects.filter(pk=group.pk).update(
        statuses={"ws-3": "created", "ws-7": "not ready"}, statuses_at=now
    )
    start = mark(sim)
    due = now - timedelta(seconds=1)
    # when reads of the onboarding's workspaces are made
    ready = status_of(sim, group, "ws-3", job_id=uuid.uuid4(), due=due)
    settling = status_of(sim, group, "ws-7", job_id=uuid.uuid4(), due=due)
    # a workspace the listing does not show: the caller reads its status itself
    missing = status_of(sim, group, "ws-5", job_id=uuid.uuid4(), due=due)
    # then the listing answered them, and nothing was sent upstream
    assert (ready, settling, missing) == ("created", "not ready", None)
    assert calls_since(sim, start) == []


def test_a_read_waits_the_gather_window_after_it_was_due_before_it_lists(
    serenity_org, sim, group, settings
):
    # given the statuses listed before this read was due (they cannot answer it), and another
    # item's read due in a second
    settings.SERENITY_ONBOARDING_STATUS_GATHER_SECONDS = 2.0
    due = timezone.now() - timedelta(seconds=0.5)
    Onboarding.objects.filter(pk=group.pk).update(
        statuses={"ws-3": "not ready"}, statuses_at=due - timedelta(seconds=1)
    )
    read_due_in(group, seconds=1.0)
    start = mark(sim)
    # when the read is made half a second after it was due
    with pytest.raises(PermitDeferredError) as deferred:
        status_of(sim, group, "ws-3", job_id=read_due_in(group, seconds=0).pk, due=due)
    # then it comes back 2 s after it was due (1.5 s from now): the reads due meanwhile share
    # the listing it makes then; nothing was sent or recorded
    assert 1.4 <= deferred.value.retry_in <= 1.5
    assert calls_since(sim, start) == []
    assert shared(group) == ({"ws-3": "not ready"}, due - timedelta(seconds=1), None)


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"seconds": 3.0}, id="another read due after the window"),
        pytest.param({"seconds": -0.5}, id="another read due already"),
        pytest.param({"seconds": 1.0, "status": JobStatus.COMPLETED}, id="another read done"),
        pytest.param({"seconds": 1.0, "elsewhere": True}, id="another onboarding's read"),
    ],
)
def test_a_read_with_no_other_due_within_its_gather_window_lists_at_once(
    serenity_org, sim, group, settings, other
):
    # given a settling workspace, and no other read of the onboarding due within the window
    settings.SERENITY_ONBOARDING_STATUS_GATHER_SECONDS = 2.0
    ready = sim_create_workspace(sim, "Brand 3")
    settling_item(group, 3, ready)
    read_due_in(group, **other)
    start = mark(sim)
    # when its read is made as it falls due
    status = status_of(
        sim, group, ready, job_id=read_due_in(group, seconds=0).pk, due=timezone.now()
    )
    # then it lists the family at once: waiting would gather nothing
    assert (status, calls_since(sim, start)) == ("created", [family(sim.parent_id)])


def test_a_read_past_its_gather_window_lists_and_records_the_settling_workspaces_statuses(
    serenity_org, sim, group
):
    # given two items' workspaces settling (one ready, one not), an item's promoted already,
    # and a workspace no item of the onboarding has
    ready = sim_create_workspace(sim, "Brand 3")
    promoted = sim_create_workspace(sim, "Brand 5")
    sim_create_workspace(sim, "Unrelated")
    sim.configure({"settleSeconds": 30})
    settling = sim_create_workspace(sim, "Brand 11", settle=False)
    settling_item(group, 3, ready)
    settling_item(group, 11, settling)
    settling_item(group, 5, promoted, workspace_promoted=True)
    start = mark(sim)
    before = timezone.now()
    # when a read due 3 s ago is made (the default window is 2 s)
    status = status_of(
        sim, group, ready, job_id=AsyncJobFactory().pk, due=before - timedelta(seconds=3)
    )
    # then it listed the family once, and recorded the settling workspaces' statuses with the
    # time it asked
    assert (status, calls_since(sim, start)) == ("created", [family(sim.parent_id)])
    statuses, statuses_at, statuses_by = shared(group)
    assert (statuses, statuses_by) == ({ready: "created", settling: "not ready"}, None)
    assert statuses_at is not None and before <= statuses_at <= timezone.now()
    # and a read due before that listing is answered by it, without a call
    start = mark(sim)
    other = status_of(sim, group, settling, job_id=uuid.uuid4(), due=before)
    assert (other, calls_since(sim, start)) == ("not ready", [])


def test_a_read_finding_another_step_listing_waits_for_its_answer(serenity_org, sim, group):
    # given another step running, listing the family for the onboarding
    lister = AsyncJobFactory()
    Onboarding.objects.filter(pk=group.pk).update(statuses_by=lister.pk)
    start = mark(sim)
    # when a read due 3 s ago is made
    with pytest.raises(PermitDeferredError) as deferred:
        status_of(
            sim, group, "ws-3", job_id=uuid.uuid4(), due=timezone.now() - timedelta(seconds=3)
        )
    # then it comes back half a second later for that listing's answer; nothing was sent
    assert deferred.value.retry_in == 0.5
    assert shared(group) == (None, None, lister.pk)
    assert calls_since(sim, start) == []


@pytest.mark.parametrize(
    "lister",
    [
        pytest.param({"status": JobStatus.CANCELLED}, id="ended"),
        pytest.param({"run_after_in": 30}, id="re-scheduled"),
    ],
)
def test_a_step_no_longer_listing_holds_nobody_back(serenity_org, sim, group, lister):
    # given the listing marked as another step's, which ended (its attempt was cancelled) or
    # was re-scheduled (a crash's re-run is due later) before it could record
    ws = sim_create_workspace(sim, "Brand 3")
    settling_item(group, 3, ws)
    holder = AsyncJobFactory(
        status=lister.get("status", JobStatus.IN_PROGRESS),
        run_after=timezone.now() + timedelta(seconds=lister.get("run_after_in", 0)),
    )
    Onboarding.objects.filter(pk=group.pk).update(statuses_by=holder.pk)
    start = mark(sim)
    # when a read due 3 s ago is made
    status = status_of(
        sim, group, ws, job_id=AsyncJobFactory().pk, due=timezone.now() - timedelta(seconds=3)
    )
    # then it lists at once
    assert (status, calls_since(sim, start)) == ("created", [family(sim.parent_id)])
    statuses, _, statuses_by = shared(group)
    assert (statuses, statuses_by) == ({ws: "created"}, None)


def test_a_failed_listing_records_no_status_so_its_reads_read_their_own(serenity_org, sim, group):
    # given the family listing failing (503, with the client's retries)
    ws = sim_create_workspace(sim, "Brand 3")
    settling_item(group, 3, ws)
    sim.add_fault({"method": "GET", "pathRegex": "/family$", "status": 503, "times": 3})
    start = mark(sim)
    due = timezone.now() - timedelta(seconds=3)
    # when a read lists
    status = status_of(sim, group, ws, job_id=AsyncJobFactory().pk, due=due)
    # then it is told to read its own status, as is a read the listing was to answer, which
    # sends nothing
    other = status_of(sim, group, ws, job_id=uuid.uuid4(), due=due)
    assert (status, other) == (None, None)
    assert calls_since(sim, start) == [family(sim.parent_id)] * 3
    statuses, statuses_at, statuses_by = shared(group)
    assert (statuses, statuses_by) == ({}, None)
    assert statuses_at is not None


def test_a_listing_refused_for_the_rate_records_nothing_and_leaves_the_listing_to_the_next(
    serenity_org, sim, group
):
    # given the family listing refused for the rate, for a minute (429, Retry-After 60)
    sim.add_fault(
        {"method": "GET", "pathRegex": "/family$", "status": 429, "headers": {"Retry-After": "60"}}
    )
    start = mark(sim)
    # when a read lists
    with pytest.raises(UpstreamRateLimitedError) as refused:
        status_of(
            sim,
            group,
            "ws-3",
            job_id=AsyncJobFactory().pk,
            due=timezone.now() - timedelta(seconds=3),
        )
    # then it is re-scheduled as for any 429; nothing is recorded and no step is marked as
    # listing: the next read lists
    assert refused.value.retry_after == 60
    assert calls_since(sim, start) == [family(sim.parent_id)]
    assert shared(group) == (None, None, None)


def test_a_listing_deferred_for_a_permit_leaves_the_listing_to_the_next(serenity_org, sim, group):
    # given the org's credential paused for 30 s, and a read in a chained step (which is
    # re-scheduled rather than wait for a permit)
    quota.store().pause(
        quota.credential_key(sim.org_token),
        rate=settings.SEMRUSH_RATE_LIMIT_PER_SECOND,
        burst=settings.SEMRUSH_RATE_LIMIT_BURST,
        seconds=30,
    )
    start = mark(sim)
    # when it would list
    with quota.step_permits(), pytest.raises(PermitDeferredError) as deferred:
        status_of(
            sim,
            group,
            "ws-3",
            job_id=AsyncJobFactory().pk,
            due=timezone.now() - timedelta(seconds=3),
        )
    # then it is re-scheduled for about then, nothing was sent, and no step is marked as
    # listing: the next read lists
    assert deferred.value.retry_in >= 29
    assert calls_since(sim, start) == []
    assert shared(group) == (None, None, None)
