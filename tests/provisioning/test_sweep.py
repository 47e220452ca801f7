"""The stale sweep (SPEC §6.4) against the simulator: abandoned attempts are reconciled, the
candidates they freshly created are emptied with the org's credential (the shell stays), and
nothing canonical or adopted is ever touched."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobStep
from jobs.services import CHAINED_POSITION
from provisioning.audit import audit_run
from provisioning.models import (
    AttemptReason,
    AttemptStartedBy,
    AttemptStatus,
    ProvisioningAttempt,
)
from provisioning.sweep import attempts_sweep
from serenity.models import Brand, Market, MarketStatus
from tests.conftest import SIM_TOKEN
from tests.factories import (
    AsyncJobFactory,
    BrandFactory,
    MarketFactory,
    ProvisioningAttemptFactory,
)

STALE_ERROR = {
    "code": "provisioningStale",
    "message": "Provisioning was abandoned and has been reconciled.",
    "retryable": True,
}


class Upstream:
    """Raw HTTP to the simulator: what a worker had created before it was lost."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.headers = {"Authorization": f"Bearer {SIM_TOKEN}"}
        languages = requests.get(
            f"{sim.base_url}/enterprise/projects/api/v1/languages", headers=self.headers, timeout=5
        ).json()["items"]
        self.english = next(item["id"] for item in languages if item["name"] == "English")

    def child(self, title: str) -> str:
        response = requests.post(
            f"{self.sim.base_url}/enterprise/users/api/v2/workspaces/{self.sim.parent_id}/child",
            json={"title": title, "resources": {}},
            headers=self.headers,
            timeout=5,
        )
        assert response.status_code == 200, response.text
        return response.json()["id"]

    def project(self, workspace_id: str) -> str:
        response = requests.post(
            f"{self.sim.base_url}/enterprise/projects/api/v1/workspaces/{workspace_id}/projects",
            json={"name": "US-en", "type": "ai", "location_id": 2840, "language_id": self.english},
            headers=self.headers,
            timeout=5,
        )
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def projects_in(self, workspace_id: str) -> list[str]:
        return [p["id"] for p in self.sim.state()["projects"] if p["workspaceId"] == workspace_id]

    def workspace_ids(self) -> list[str]:
        return [ws["id"] for ws in self.sim.state()["workspaces"]]

    def calls_since(self, mark: int) -> list[tuple[str, str]]:
        return [(r["method"], r["path"]) for r in self.sim.requests_log()[mark:]]


@pytest.fixture
def upstream(sim: Any) -> Upstream:
    sim.configure({"settleSeconds": 0})
    return Upstream(sim)


def ago(seconds: float) -> Any:
    return timezone.now() - timedelta(seconds=seconds)


def chain_for(brand: Brand, *, runnable: bool = False) -> tuple[AsyncJob, AsyncJob]:
    """An async provisioning chain whose worker was lost: a settle read still in progress (its
    lease long expired) and the chained create-market waiting for promotion. Not `runnable`:
    nothing will run it again (its read lost its `runAfter`, as no code path leaves it: the
    abandoned chain the sweep exists for)."""
    chained = AsyncJobFactory(
        brand=brand, step=JobStep.CREATE_MARKET, position=CHAINED_POSITION, run_after=None
    )
    root = AsyncJobFactory(
        brand=brand,
        next=chained,
        run_after=ago(1200) if runnable else None,
        claim_token=uuid.uuid4(),
        lease_expires_at=ago(1000),
    )
    AsyncJob.objects.filter(pk=root.pk).update(current=root)
    AsyncJob.objects.filter(pk=chained.pk).update(root=root)
    return root, chained


def attempt_for(brand: Brand, **fields: Any) -> ProvisioningAttempt:
    fields.setdefault("started_by", AttemptStartedBy.CREATE_BRAND)
    return ProvisioningAttemptFactory(brand=brand, **fields)


def age(attempt: ProvisioningAttempt, seconds: float) -> None:
    ProvisioningAttempt.objects.filter(pk=attempt.pk).update(updated_at=ago(seconds))


def test_stale_attempt_is_reconciled_and_its_fresh_candidate_emptied(
    serenity_org, upstream, settings
):
    # given: a worker created the candidate and (somehow) a project in it, then was lost
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    brand = BrandFactory(organization=serenity_org, name="Acme")
    candidate = upstream.child("Acme")
    upstream.project(candidate)
    root, chained = chain_for(brand)
    attempt = attempt_for(brand, job=root, candidate_workspace_id=candidate, freshly_created=True)
    age(attempt, 1000)
    # when
    outcome = attempts_sweep()
    # then: the attempt failed/stale and cleaned up ...
    assert (outcome["reconciled"], outcome["cleaned"]) == (1, 1)
    attempt.refresh_from_db()
    assert (attempt.status, attempt.reason, attempt.cleanup_done) == (
        AttemptStatus.FAILED,
        AttemptReason.STALE,
        True,
    )
    # ... its chain FAILED provisioningStale ...
    for job in (root, chained):
        job.refresh_from_db()
        assert (job.status, job.error) == (JobStatus.FAILED, STALE_ERROR)
    # ... and the candidate is empty upstream, its shell kept
    assert upstream.projects_in(candidate) == []
    assert upstream.workspace_ids() == [candidate]
    assert audit_run().as_dict() == {
        "orphanWorkspaces": [],
        "orphanProjects": [],
        "stuckAttempts": [],
        "errors": [],
    }


def test_a_chain_waiting_its_turn_is_alive_however_old(serenity_org, upstream, settings):
    # given: a chain whose settle read is due (waiting for a worker or for quota) for far
    # longer than the stale threshold, its attempt untouched as long
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    brand = BrandFactory(organization=serenity_org, name="Acme")
    candidate = upstream.child("Acme")
    root, chained = chain_for(brand, runnable=True)
    attempt = attempt_for(brand, job=root, candidate_workspace_id=candidate, freshly_created=True)
    age(attempt, 5000)
    mark = len(upstream.sim.requests_log())
    # when
    outcome = attempts_sweep()
    # then: nothing is reconciled, no job ended, nothing called upstream
    assert (outcome["reconciled"], outcome["cleaned"]) == (0, 0)
    assert ProvisioningAttempt.objects.get(pk=attempt.pk).status == AttemptStatus.PENDING
    assert [AsyncJob.objects.get(pk=j.pk).status for j in (root, chained)] == [
        JobStatus.IN_PROGRESS,
        JobStatus.IN_PROGRESS,
    ]
    assert upstream.calls_since(mark) == []


def test_fresh_pending_attempt_is_left_alone(serenity_org, upstream, settings):
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    brand = BrandFactory(organization=serenity_org, name="Acme")
    candidate = upstream.child("Acme")
    upstream.project(candidate)
    attempt = attempt_for(brand, candidate_workspace_id=candidate, freshly_created=True)
    age(attempt, 800)
    mark = len(upstream.sim.requests_log())
    outcome = attempts_sweep()
    assert (outcome["reconciled"], outcome["cleaned"]) == (0, 0)
    assert ProvisioningAttempt.objects.get(pk=attempt.pk).status == AttemptStatus.PENDING
    assert len(upstream.projects_in(candidate)) == 1
    assert upstream.calls_since(mark) == []


def test_cancelled_attempts_fresh_candidate_is_emptied_once(serenity_org, upstream):
    # given: a cancel before promotion; the worker that should have emptied it never ran
    brand = BrandFactory(organization=serenity_org, name="Acme")
    candidate = upstream.child("Acme")
    upstream.project(candidate)
    attempt = attempt_for(
        brand,
        status=AttemptStatus.FAILED,
        reason=AttemptReason.CANCELLED,
        candidate_workspace_id=candidate,
        freshly_created=True,
    )
    # when
    first = attempts_sweep()
    # then
    assert first["cleaned"] == 1
    assert upstream.projects_in(candidate) == []
    assert upstream.workspace_ids() == [candidate]
    assert ProvisioningAttempt.objects.get(pk=attempt.pk).cleanup_done is True
    # and a later sweep never goes back to it
    later_project = upstream.project(candidate)
    mark = len(upstream.sim.requests_log())
    assert attempts_sweep()["cleaned"] == 0
    assert upstream.projects_in(candidate) == [later_project]
    assert upstream.calls_since(mark) == []


def test_adopted_candidate_is_never_touched(serenity_org, upstream):
    # given: the attempt adopted an existing workspace (freshly_created False)
    brand = BrandFactory(organization=serenity_org, name="Acme")
    adopted = upstream.child("Acme")
    project = upstream.project(adopted)
    attempt_for(
        brand,
        status=AttemptStatus.FAILED,
        reason=AttemptReason.CANCELLED,
        candidate_workspace_id=adopted,
        freshly_created=False,
    )
    mark = len(upstream.sim.requests_log())
    # when
    outcome = attempts_sweep()
    # then
    assert outcome["cleaned"] == 0
    assert upstream.projects_in(adopted) == [project]
    assert upstream.calls_since(mark) == []


def test_promoted_candidate_is_never_touched(serenity_org, upstream):
    brand = BrandFactory(organization=serenity_org, name="Acme")
    workspace = upstream.child("Acme")
    project = upstream.project(workspace)
    attempt_for(
        brand,
        status=AttemptStatus.FAILED,
        reason=AttemptReason.UNEXPECTED,
        candidate_workspace_id=workspace,
        freshly_created=True,
        workspace_promoted=True,
    )
    assert attempts_sweep()["cleaned"] == 0
    assert upstream.projects_in(workspace) == [project]


def test_terminal_candidate_is_left_alone(serenity_org, upstream):
    # given: the workspace reached a terminal status (SPEC §6.3: failed/terminal, no cleanup)
    brand = BrandFactory(organization=serenity_org, name="Acme")
    workspace = upstream.child("Acme")
    attempt = attempt_for(
        brand,
        status=AttemptStatus.FAILED,
        reason=AttemptReason.TERMINAL,
        candidate_workspace_id=workspace,
        freshly_created=True,
    )
    mark = len(upstream.sim.requests_log())
    # when / then: no upstream call, now or at any later sweep
    assert attempts_sweep()["cleaned"] == 0
    assert upstream.calls_since(mark) == []
    assert ProvisioningAttempt.objects.get(pk=attempt.pk).cleanup_done is False


def test_stale_sync_attempt_whose_candidate_became_the_pointer_keeps_its_projects(
    serenity_org, upstream, settings
):
    # given: a sync brand create persisted the pointer to the workspace it created, made the
    # market, and its process died before finishing the attempt
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    brand = BrandFactory(organization=serenity_org, name="Acme")
    workspace = upstream.child("Acme")
    Brand.objects.filter(pk=brand.pk).update(semrush_sub_workspace_id=workspace)
    project = upstream.project(workspace)
    MarketFactory(brand=brand, semrush_project_id=project, workspace_id=workspace)
    attempt = attempt_for(brand, candidate_workspace_id=workspace, freshly_created=True)
    age(attempt, 1000)
    # when
    outcome = attempts_sweep()
    # then: reconciled, but the brand's canonical workspace is not emptied
    assert (outcome["reconciled"], outcome["cleaned"]) == (1, 0)
    assert ProvisioningAttempt.objects.get(pk=attempt.pk).reason == AttemptReason.STALE
    assert upstream.projects_in(workspace) == [project]


# --- leftover reservations ("the stale sweep clears leftovers", SPEC §3) -----------------------


def reservation(brand: Brand, owner: uuid.UUID, *, geo: int, **fields: Any) -> Market:
    market = MarketFactory(
        brand=brand,
        geo_target_id=geo,
        language_code="en",
        name=f"{geo}-en",
        status=MarketStatus.CREATING,
        reserved_by=owner,
        **fields,
    )
    return market


def age_market(market: Market, seconds: float) -> None:
    Market.objects.filter(pk=market.pk).update(updated_at=ago(seconds))


def test_leftover_reservations_of_finished_owners_are_released(db, settings):
    # given
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    brand = BrandFactory()
    dead = attempt_for(brand, status=AttemptStatus.FAILED, reason=AttemptReason.UNEXPECTED)
    nothing_created = reservation(brand, dead.id, geo=2840)
    project_recorded = reservation(
        brand, dead.id, geo=2276, semrush_project_id="p-1", workspace_id="ws-1"
    )
    sync_request = reservation(brand, uuid.uuid4(), geo=2250)
    for market in (nothing_created, project_recorded, sync_request):
        age_market(market, 1000)
    # when
    outcome = attempts_sweep()
    # then: nothing created → the slice is free; a project exists → resumable and deletable
    assert outcome["released"] == 3
    assert not Market.objects.filter(pk__in=[nothing_created.pk, sync_request.pk]).exists()
    project_recorded.refresh_from_db()
    assert (project_recorded.status, project_recorded.reserved_by) == (
        MarketStatus.PUBLISH_FAILED,
        None,
    )
    assert (project_recorded.semrush_project_id, project_recorded.deleted_at) == ("p-1", None)


def test_reservations_of_live_or_recent_owners_are_kept(db, settings):
    # given
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    brand = BrandFactory()
    live = attempt_for(brand)  # pending and fresh
    other = BrandFactory(organization=brand.organization)
    finished = attempt_for(other, status=AttemptStatus.READY)
    job = AsyncJobFactory(brand=brand, step=JobStep.CREATE_MARKET)
    held_by_attempt = reservation(brand, live.id, geo=2840)
    held_by_job = reservation(brand, job.id, geo=2276)
    just_finished = reservation(other, finished.id, geo=2840)
    for market in (held_by_attempt, held_by_job):
        age_market(market, 5000)
    # when
    outcome = attempts_sweep()
    # then: a live owner keeps its reservation however old; a fresh one waits for its worker
    assert outcome["released"] == 0
    assert set(Market.objects.values_list("pk", flat=True)) == {
        held_by_attempt.pk,
        held_by_job.pk,
        just_finished.pk,
    }
    assert set(Market.objects.values_list("status", flat=True)) == {MarketStatus.CREATING}
