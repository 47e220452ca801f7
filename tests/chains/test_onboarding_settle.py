"""An onboarding's settle reads through a shared family listing (SPEC §12.5): the statuses of
items settling together (of any of its groups of ten) are read with one listing, a workspace
the listing does not show is read on its own, and a status read that way decides as a read of
its own would (not ready: read again after the back-off; failed: the chain fails).

The steps run in-process (the Celery tasks called as functions), publishing recorded and the
chained step left undelivered; the parent has a learned settle time, as in steady state, so an
item's first hop creates its workspace and schedules its first status read."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from provisioning import tasks
from provisioning.models import AttemptStatus, OnboardingItem, ProvisioningAttempt
from provisioning.selectors import learning_forget
from serenity.models import Brand
from tests.conftest import Caller
from tests.factories import BrandFactory, ProvisioningAttemptFactory
from tests.support import UM, calls_since, family, mark, sim_request, status_read

pytestmark = pytest.mark.django_db(transaction=True)

WORKSPACE_CALLS = ("/family", "/status", "/child")


def onboard(caller: Caller, count: int) -> list[str]:
    """Accept an onboarding of `count` brands with a market; their first hops run (one family
    listing per group of ten, a create each), each scheduling its first status read 5 s on (the
    learned settle time). The items' root job ids, by index."""
    learning_forget()
    for seconds in (4.0, 5.0, 6.0):
        ProvisioningAttemptFactory(
            brand=BrandFactory(organization=caller.org),
            status=AttemptStatus.READY,
            freshly_created=True,
            workspace_promoted=True,
            promoted_at=timezone.now(),
            settle_seconds=seconds,
        )
    brands = [
        {
            "name": f"Settling {n}",
            "baseUrl": f"https://settling-{n}.example",
            "markets": [{"market": "US", "languageCode": "en"}],
        }
        for n in range(count)
    ]
    response = caller.post(f"/v2/orgs/{caller.org.id}/serenity/onboardings", {"brands": brands})
    assert response.status_code == 202, response.json()
    roots = [
        str(job_id)
        for job_id in OnboardingItem.objects.filter(onboarding_id=response.json()["onboardingId"])
        .order_by("index")
        .values_list("job_id", flat=True)
    ]
    for root in roots:
        tasks.provision_workspace(root)
    return roots


def reads_due(seconds_ago: float = 1.0, roots: list[str] | None = None) -> None:
    """Every workspace (of the chains `roots`, when given) was created 5 s + `seconds_ago` ago:
    its read, scheduled 5 s after, was due `seconds_ago` ago (its row too; negative: due in
    that many seconds)."""
    now = timezone.now()
    attempts = ProvisioningAttempt.objects.filter(candidate_at__isnull=False)
    rows = AsyncJob.objects.filter(
        step="provisionWorkspace", status=JobStatus.IN_PROGRESS, position__gt=0
    )
    if roots is not None:
        attempts, rows = attempts.filter(job_id__in=roots), rows.filter(root_id__in=roots)
    attempts.update(candidate_at=now - timedelta(seconds=5 + seconds_ago))
    rows.update(run_after=now - timedelta(seconds=seconds_ago))


def settle_row(root: str) -> AsyncJob:
    return AsyncJob.objects.get(
        root_id=root, step="provisionWorkspace", status=JobStatus.IN_PROGRESS
    )


def run_settle_read(root: str) -> None:
    """Deliver the chain's scheduled status read now (whenever it is due)."""
    row = settle_row(root)
    AsyncJob.objects.filter(pk=row.pk).update(run_after=timezone.now())
    tasks.provision_workspace(str(row.pk))


def workspace_calls(sim: Any, start: int) -> list[tuple[str, str]]:
    return [c for c in calls_since(sim, start) if c[1].endswith(WORKSPACE_CALLS)]


def workspace_of(root: str) -> str:
    attempt = ProvisioningAttempt.objects.get(job_id=root)
    assert attempt.candidate_workspace_id is not None
    return attempt.candidate_workspace_id


def test_items_settling_together_read_their_statuses_through_one_family_listing(
    sw_writer, sim, published, chained_job_delivered_separately, settings
):
    # given twelve onboarding items (two groups of ten) whose workspaces are ready, the reads
    # of six due, the others' due in half a second (the rate out of the way of their 14 calls)
    settings.SERENITY_ONBOARDING_STATUS_GATHER_SECONDS = 2.0
    settings.SEMRUSH_RATE_LIMIT_PER_SECOND = 1000
    sim.configure({"settleSeconds": 0})
    roots = onboard(sw_writer, 12)
    reads_due(roots=roots[:6])
    reads_due(seconds_ago=-0.5, roots=roots[6:])
    start = mark(sim)
    # when the six due run, each waits the rest of its gather window (about 1 s) for the others,
    # sending nothing
    for root in roots[:6]:
        run_settle_read(root)
    assert workspace_calls(sim, start) == []
    now = timezone.now()
    waits = [(settle_row(root).run_after or now) - now for root in roots[:6]]
    assert all(timedelta(seconds=0.5) <= wait <= timedelta(seconds=1.1) for wait in waits), waits
    # when the window has passed and they run again, the first first
    reads_due(seconds_ago=3)
    for root in roots:
        run_settle_read(root)
    # then one family listing answered every read: no status read of any workspace
    assert workspace_calls(sim, start) == [family(sim.parent_id)]
    # and every workspace was promoted, its settle time sampled as scheduled (5 s)
    attempts = ProvisioningAttempt.objects.filter(job_id__in=roots)
    assert (
        sorted((a.workspace_promoted, a.status, round(a.settle_seconds or 0)) for a in attempts)
        == [(True, AttemptStatus.PENDING, 5)] * 12
    )
    pointers = set(
        Brand.objects.filter(pk__in=[a.brand_id for a in attempts]).values_list(
            "semrush_sub_workspace_id", flat=True
        )
    )
    assert pointers == {workspace_of(root) for root in roots}
    assert len(pointers) == 12


def test_a_workspace_the_listing_does_not_show_is_read_on_its_own(
    sw_writer, sim, published, chained_job_delivered_separately, settings
):
    # given two items whose reads are due, and a family listing that does not show the second
    # item's workspace yet (a listing lagging behind a create)
    settings.SERENITY_ONBOARDING_STATUS_GATHER_SECONDS = 0.0
    sim.configure({"settleSeconds": 0})
    first, second = onboard(sw_writer, 2)
    reads_due()
    listing = sim_request(sim, "GET", f"{UM}/v1/workspaces/{sim.parent_id}/family")
    lagging = [ws for ws in listing if ws["id"] != workspace_of(second)]
    sim.add_fault({"method": "GET", "pathRegex": "/family$", "status": 200, "body": lagging})
    start = mark(sim)
    # when both reads run
    run_settle_read(first)
    run_settle_read(second)
    # then the listing answered the first, the second read its own status; both promoted
    assert workspace_calls(sim, start) == [
        family(sim.parent_id),
        status_read(workspace_of(second)),
    ]
    assert [
        ProvisioningAttempt.objects.get(job_id=r).workspace_promoted for r in (first, second)
    ] == [
        True,
        True,
    ]


def test_a_not_ready_status_in_the_listing_schedules_the_next_read_after_the_back_off(
    sw_writer, sim, published, chained_job_delivered_separately, settings
):
    # given an item whose workspace takes 30 s to settle, its first read due
    settings.SERENITY_ONBOARDING_STATUS_GATHER_SECONDS = 0.0
    sim.configure({"settleSeconds": 30})
    (root,) = onboard(sw_writer, 1)
    reads_due()
    read = settle_row(root)
    start = mark(sim)
    before = timezone.now()
    # when it runs
    run_settle_read(root)
    # then the listing said "not ready": nothing promoted, the next read is a new row due after
    # the back-off's first wait (5 s), as after a read of its own
    assert workspace_calls(sim, start) == [family(sim.parent_id)]
    assert AsyncJob.objects.get(pk=read.pk).result == {"workspaceStatus": "notReady"}
    after = settle_row(root)
    assert after.pk != read.pk and after.position == read.position + 1
    assert after.run_after is not None
    assert timedelta(seconds=4.9) <= after.run_after - before <= timedelta(seconds=6)
    attempt = ProvisioningAttempt.objects.get(job_id=root)
    assert (attempt.status, attempt.workspace_promoted) == (AttemptStatus.PENDING, False)
    assert Brand.objects.get(pk=attempt.brand_id).semrush_sub_workspace_id is None


def test_a_failed_status_in_the_listing_fails_the_chain_as_a_read_of_its_own_would(
    sw_writer, sim, published, chained_job_delivered_separately, settings
):
    # given an item whose workspace's creation failed upstream, its first read due
    settings.SERENITY_ONBOARDING_STATUS_GATHER_SECONDS = 0.0
    sim.configure({"settleSeconds": 0, "settleOutcome": "failed"})
    (root,) = onboard(sw_writer, 1)
    reads_due()
    read = settle_row(root)
    start = mark(sim)
    # when it runs
    run_settle_read(root)
    # then the chain failed with the creation failure, the attempt too; nothing promoted
    assert workspace_calls(sim, start) == [family(sim.parent_id)]
    failed = AsyncJob.objects.get(pk=read.pk)
    assert (failed.status, failed.error) == (
        JobStatus.FAILED,
        {
            "code": "subworkspaceCreationFailed",
            "message": "Semrush could not create the brand's workspace.",
            "retryable": False,
        },
    )
    attempt = ProvisioningAttempt.objects.get(job_id=root)
    assert (attempt.status, attempt.reason, attempt.workspace_promoted) == (
        AttemptStatus.FAILED,
        "terminal",
        False,
    )
    assert Brand.objects.get(pk=attempt.brand_id).semrush_sub_workspace_id is None
