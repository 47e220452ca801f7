"""`provisioning_audit` (SPEC §7 "no orphan", §8) against the simulator over HTTP.

Orphan situations are made directly upstream (a child posted with the bearer token, a project
added to it) and in the database with factories; the command runs through `call_command`.
"""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.core.management import call_command
from django.utils import timezone

from jobs.models import AsyncJob, JobStep
from provisioning.audit import (
    ERROR_FORBIDDEN,
    ERROR_UNAUTHORIZED,
    audit_run,
)
from provisioning.models import AttemptStartedBy, AttemptStatus, ProvisioningAttempt
from serenity.models import Brand, Market, MarketStatus
from tests.conftest import SIM_TOKEN
from tests.factories import (
    AsyncJobFactory,
    BrandFactory,
    MarketFactory,
    OrganizationFactory,
    ProvisioningAttemptFactory,
)

EMPTY = {"orphanWorkspaces": [], "orphanProjects": [], "stuckAttempts": [], "errors": []}


class Upstream:
    """Raw HTTP to the simulator, as another Semrush user (or a crashed worker) would."""

    def __init__(self, sim: Any) -> None:
        self.base = sim.base_url
        self.headers = {"Authorization": f"Bearer {SIM_TOKEN}"}
        languages = requests.get(
            f"{self.base}/enterprise/projects/api/v1/languages", headers=self.headers, timeout=5
        ).json()["items"]
        self.language_ids = {item["name"]: item["id"] for item in languages}

    def child(self, parent_id: str, title: str) -> str:
        response = requests.post(
            f"{self.base}/enterprise/users/api/v2/workspaces/{parent_id}/child",
            json={"title": title, "resources": {}},
            headers=self.headers,
            timeout=5,
        )
        assert response.status_code == 200, response.text
        return response.json()["id"]

    def project(
        self, workspace_id: str, *, location_id: int = 2840, language: str = "English"
    ) -> str:
        response = requests.post(
            f"{self.base}/enterprise/projects/api/v1/workspaces/{workspace_id}/projects",
            json={
                "name": "stray",
                "type": "ai",
                "location_id": location_id,
                "language_id": self.language_ids[language],
            },
            headers=self.headers,
            timeout=5,
        )
        assert response.status_code == 201, response.text
        return response.json()["id"]


@pytest.fixture
def upstream(sim: Any) -> Upstream:
    # Children are usable (ready) at once, so projects can be added right away.
    sim.configure({"settleSeconds": 0})
    return Upstream(sim)


def run_audit(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("provisioning_audit", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def run_audit_json() -> tuple[int, dict[str, Any]]:
    code, out = run_audit("--json")
    return code, json.loads(out)


def aged(seconds: float) -> Any:
    return timezone.now() - timedelta(seconds=seconds)


def brand_with_workspace(org: Any, workspace_id: str, **kw: Any) -> Brand:
    brand = BrandFactory(organization=org, **kw)
    Brand.objects.filter(pk=brand.pk).update(semrush_sub_workspace_id=workspace_id)
    brand.refresh_from_db()
    return brand


def live_market(brand: Brand, project_id: str, workspace_id: str, **kw: Any) -> Market:
    return MarketFactory(
        brand=brand, semrush_project_id=project_id, workspace_id=workspace_id, **kw
    )


# --- clean --------------------------------------------------------------------------------------


def test_canonical_objects_and_empty_shells_are_clean(serenity_org, sim, upstream):
    # given: a brand's workspace whose project a market points at, and an empty stray shell
    workspace = upstream.child(sim.parent_id, "Acme")
    project = upstream.project(workspace)
    brand = brand_with_workspace(serenity_org, workspace, name="Acme")
    live_market(brand, project, workspace)
    upstream.child(sim.parent_id, "Emptied leftover")
    # when
    code, report = run_audit_json()
    # then
    assert code == 0
    assert report == EMPTY


def test_clean_audit_prints_a_human_summary(serenity_org, upstream):
    code, out = run_audit()
    assert code == 0
    assert "0 orphan workspace(s), 0 orphan project(s), 0 stuck attempt(s)" in out
    assert "Nothing needs an operator." in out


# --- orphans ------------------------------------------------------------------------------------


def test_non_empty_child_that_is_no_brands_workspace_is_an_orphan(serenity_org, sim, upstream):
    # given
    stray = upstream.child(sim.parent_id, "Stray")
    project = upstream.project(stray)
    # when
    code, report = run_audit_json()
    # then: the workspace and the project inside it (SPEC §10.2)
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanWorkspaces": [{"id": stray, "orgId": str(serenity_org.id), "title": "Stray"}],
        "orphanProjects": [{"id": project, "workspaceId": stray, "orgId": str(serenity_org.id)}],
    }


def test_every_project_inside_an_orphan_workspace_is_listed(serenity_org, sim, upstream):
    # given: an orphan workspace with two projects no market accounts for, and one that a
    # market row (left pointing there) still accounts for
    brand = BrandFactory(organization=serenity_org, name="Acme")
    stray = upstream.child(sim.parent_id, "Stray")
    first = upstream.project(stray)
    second = upstream.project(stray, location_id=2276, language="German")
    accounted = upstream.project(stray, location_id=2250, language="French")
    live_market(brand, accounted, stray, geo_target_id=2250, language_code="fr")
    # when
    code, report = run_audit_json()
    # then
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanWorkspaces": [{"id": stray, "orgId": str(serenity_org.id), "title": "Stray"}],
        "orphanProjects": [
            {"id": pid, "workspaceId": stray, "orgId": str(serenity_org.id)}
            for pid in sorted([first, second])
        ],
    }


def test_project_in_a_brand_workspace_without_a_market_is_an_orphan(serenity_org, sim, upstream):
    # given: one project with a market, one without, one whose market was tombstoned
    workspace = upstream.child(sim.parent_id, "Acme")
    brand = brand_with_workspace(serenity_org, workspace, name="Acme")
    kept = upstream.project(workspace)
    live_market(brand, kept, workspace)
    unrecorded = upstream.project(workspace, location_id=2276, language="German")
    tombstoned = upstream.project(workspace, location_id=2250, language="French")
    live_market(
        brand,
        tombstoned,
        workspace,
        geo_target_id=2250,
        language_code="fr",
        deleted_at=timezone.now(),
    )
    # when
    code, report = run_audit_json()
    # then
    assert code == 1
    expected = sorted([unrecorded, tombstoned])
    assert report == {
        **EMPTY,
        "orphanProjects": [
            {"id": pid, "workspaceId": workspace, "orgId": str(serenity_org.id)} for pid in expected
        ],
    }


def test_project_in_the_parent_of_a_flat_org_without_a_market_is_an_orphan(db, sim, upstream):
    # given
    org = OrganizationFactory(
        semrush_parent_workspace_id=sim.parent_id, workspace_mode="flat", serenity_enabled=True
    )
    brand = BrandFactory(organization=org, workspace_mode="flat")
    recorded = upstream.project(sim.parent_id)
    live_market(brand, recorded, sim.parent_id)
    stray = upstream.project(sim.parent_id, location_id=2276, language="German")
    # when
    code, report = run_audit_json()
    # then
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanProjects": [{"id": stray, "workspaceId": sim.parent_id, "orgId": str(org.id)}],
    }


def test_stray_project_in_the_parent_of_a_subworkspace_org_is_an_orphan(
    serenity_org, sim, upstream
):
    # given: nothing of ours is ever created in the parent of a sub-workspace org, so a project
    # there is a stray (SPEC §10.2: "in the parent itself")
    stray = upstream.project(sim.parent_id)
    # when
    code, report = run_audit_json()
    # then
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanProjects": [
            {"id": stray, "workspaceId": sim.parent_id, "orgId": str(serenity_org.id)}
        ],
    }


def test_human_output_lists_each_finding(serenity_org, sim, upstream):
    stray = upstream.child(sim.parent_id, "Stray")
    upstream.project(stray)
    code, out = run_audit()
    assert code == 1
    assert (
        "1 orphan workspace(s), 1 orphan project(s), 0 stuck attempt(s), 0 org(s) not checked"
        in out
    )
    assert f"  {stray}  org {serenity_org.id}  title 'Stray'" in out


# --- live work is not an orphan -----------------------------------------------------------------


def test_candidate_of_a_live_pending_attempt_is_not_an_orphan(serenity_org, sim, upstream):
    # given: a worker created the candidate (not yet promoted) and it already has a project
    brand = BrandFactory(organization=serenity_org, name="Acme")
    candidate = upstream.child(sim.parent_id, "Acme")
    upstream.project(candidate)
    ProvisioningAttemptFactory(
        brand=brand,
        started_by=AttemptStartedBy.CREATE_BRAND,
        candidate_workspace_id=candidate,
        freshly_created=True,
    )
    # when
    code, report = run_audit_json()
    # then
    assert (code, report) == (0, EMPTY)


def test_stale_pending_attempt_is_stuck_and_its_candidate_an_orphan(
    serenity_org, sim, upstream, settings
):
    # given: the same situation, abandoned for longer than the stale threshold
    settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900
    brand = BrandFactory(organization=serenity_org, name="Acme")
    candidate = upstream.child(sim.parent_id, "Acme")
    left_behind = upstream.project(candidate)
    attempt = ProvisioningAttemptFactory(
        brand=brand,
        started_by=AttemptStartedBy.CREATE_BRAND,
        candidate_workspace_id=candidate,
        freshly_created=True,
    )
    ProvisioningAttempt.objects.filter(pk=attempt.pk).update(updated_at=aged(1000))
    # when
    code, report = run_audit_json()
    # then
    assert code == 1
    stuck = report.pop("stuckAttempts")
    assert [(s["id"], s["brandId"]) for s in stuck] == [(str(attempt.id), str(brand.id))]
    assert 1000 <= stuck[0]["ageSeconds"] < 1100
    assert report == {
        "orphanWorkspaces": [{"id": candidate, "orgId": str(serenity_org.id), "title": "Acme"}],
        "orphanProjects": [
            {"id": left_behind, "workspaceId": candidate, "orgId": str(serenity_org.id)}
        ],
        "errors": [],
    }


def test_stuck_attempt_alone_exits_1(serenity_org, upstream):
    brand = BrandFactory(organization=serenity_org)
    attempt = ProvisioningAttemptFactory(brand=brand, started_by=AttemptStartedBy.ACTIVATE)
    ProvisioningAttempt.objects.filter(pk=attempt.pk).update(updated_at=aged(5000))
    code, report = run_audit_json()
    assert code == 1
    assert [s["id"] for s in report["stuckAttempts"]] == [str(attempt.id)]
    assert set(report["stuckAttempts"][0]) == {"id", "brandId", "ageSeconds"}


def test_unrecorded_project_of_a_brand_with_a_live_attempt_is_not_an_orphan(
    serenity_org, sim, upstream
):
    # given: a chained create-market between "project created" and "project id recorded"
    workspace = upstream.child(sim.parent_id, "Acme")
    brand = brand_with_workspace(serenity_org, workspace, name="Acme")
    upstream.project(workspace)
    attempt = ProvisioningAttemptFactory(
        brand=brand,
        started_by=AttemptStartedBy.CREATE_MARKET,
        candidate_workspace_id=workspace,
        workspace_promoted=True,
    )
    MarketFactory(brand=brand, status=MarketStatus.CREATING, reserved_by=attempt.id)
    # when / then
    assert run_audit_json() == (0, EMPTY)
    # and once the attempt has finished without recording it, the project is an orphan
    ProvisioningAttempt.objects.filter(pk=attempt.pk).update(status=AttemptStatus.FAILED)
    code, report = run_audit_json()
    assert code == 1
    assert len(report["orphanProjects"]) == 1


def test_creating_market_with_a_recorded_project_protects_it(serenity_org, sim, upstream):
    # given: the reservation recorded the project id; its owner is gone (a crash): resumable
    workspace = upstream.child(sim.parent_id, "Acme")
    brand = brand_with_workspace(serenity_org, workspace, name="Acme")
    project = upstream.project(workspace)
    live_market(brand, project, workspace, status=MarketStatus.CREATING, reserved_by=uuid.uuid4())
    # when / then
    assert run_audit_json() == (0, EMPTY)


def test_flat_project_of_a_live_job_reservation_is_not_an_orphan(db, sim, upstream):
    # given: a flat create-market job created the project but has not recorded it yet
    org = OrganizationFactory(
        semrush_parent_workspace_id=sim.parent_id, workspace_mode="flat", serenity_enabled=True
    )
    brand = BrandFactory(organization=org, workspace_mode="flat")
    job = AsyncJobFactory(brand=brand, step=JobStep.CREATE_MARKET)
    MarketFactory(brand=brand, status=MarketStatus.CREATING, reserved_by=job.id)
    in_flight = upstream.project(sim.parent_id)
    other_slice = upstream.project(sim.parent_id, location_id=2276, language="German")
    # when
    code, report = run_audit_json()
    # then: only the project on another slice is reported
    assert code == 1
    assert report["orphanProjects"] == [
        {"id": other_slice, "workspaceId": sim.parent_id, "orgId": str(org.id)}
    ]
    # and once the job has finished, its unrecorded project is reported too
    AsyncJob.objects.filter(pk=job.pk).update(status="FAILED")
    _, report = run_audit_json()
    assert sorted(p["id"] for p in report["orphanProjects"]) == sorted([in_flight, other_slice])


# --- orgs that could not be checked -------------------------------------------------------------


def test_unknown_parent_is_an_error_and_exits_2(db, sim, upstream):
    # given
    org = OrganizationFactory(semrush_parent_workspace_id=f"gone-{uuid.uuid4()}")
    # when
    code, report = run_audit_json()
    # then
    assert code == 2
    assert report == {**EMPTY, "errors": [{"orgId": str(org.id), "error": ERROR_FORBIDDEN}]}
    assert org.semrush_parent_workspace_id not in json.dumps(report)


def test_rejected_credential_is_an_error_without_the_token(db, sim, upstream):
    # given
    org = OrganizationFactory(semrush_parent_workspace_id=sim.parent_id)
    org.set_semrush_credential("not-the-simulator-token")
    org.save()
    # when
    code, out = run_audit("--json")
    # then
    assert code == 2
    assert json.loads(out) == {
        **EMPTY,
        "errors": [{"orgId": str(org.id), "error": ERROR_UNAUTHORIZED}],
    }
    assert "not-the-simulator-token" not in out
    assert "Not authenticated" not in out


def test_findings_and_errors_together_exit_1(serenity_org, sim, upstream):
    broken = OrganizationFactory(semrush_parent_workspace_id=f"gone-{uuid.uuid4()}")
    stray = upstream.child(sim.parent_id, "Stray")
    upstream.project(stray)
    code, report = run_audit_json()
    assert code == 1
    assert report["orphanWorkspaces"][0]["id"] == stray
    assert report["errors"] == [{"orgId": str(broken.id), "error": ERROR_FORBIDDEN}]


def test_orgs_without_a_parent_are_not_audited(db, sim, upstream):
    OrganizationFactory(semrush_parent_workspace_id=None, serenity_enabled=False)
    assert run_audit_json() == (0, EMPTY)


# --- orgs sharing a parent ----------------------------------------------------------------------


def test_parent_shared_by_two_orgs_is_audited_once(serenity_org, sim, upstream):
    # given: a second org on the same parent and credential; its brand's workspace is canonical
    sibling = OrganizationFactory(semrush_parent_workspace_id=sim.parent_id)
    sibling.set_semrush_credential(sim.org_token)
    sibling.save(update_fields=["semrush_credential_encrypted"])
    theirs = upstream.child(sim.parent_id, "Theirs")
    brand = brand_with_workspace(sibling, theirs, name="Theirs")
    live_market(brand, upstream.project(theirs), theirs)
    stray = upstream.child(sim.parent_id, "Sibling Stray")
    stray_project = upstream.project(stray)
    BrandFactory(organization=sibling, name="Sibling Stray")
    sim_requests_before = len(sim.requests_log())
    # when
    code, report = run_audit_json()
    # then: one entry, attributed to the org with a brand of that title; the family read once
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanWorkspaces": [{"id": stray, "orgId": str(sibling.id), "title": "Sibling Stray"}],
        "orphanProjects": [{"id": stray_project, "workspaceId": stray, "orgId": str(sibling.id)}],
    }
    family_reads = [
        r for r in sim.requests_log()[sim_requests_before:] if r["path"].endswith("/family")
    ]
    assert len(family_reads) == 1


def test_audit_run_changes_nothing(serenity_org, sim, upstream):
    # given
    stray = upstream.child(sim.parent_id, "Stray")
    upstream.project(stray)
    before = sim.state()
    logged = len(sim.requests_log())
    # when
    report = audit_run()
    # then: only reads upstream
    assert report.exit_code == 1
    assert sim.state() == before
    assert {r["method"] for r in sim.requests_log()[logged:]} == {"GET"}


def test_what_the_service_provisions_is_clean(sw_writer, sim, upstream):
    # given: a brand with a market made through the API, then a second market
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands",
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    assert response.status_code == 201, response.json()
    brand_path = f"/v2/orgs/{sw_writer.org.id}/brands/{response.json()['id']}/serenity"
    created = sw_writer.post(f"{brand_path}/markets", {"market": "DE", "languageCode": "de"})
    assert created.status_code == 201, created.json()
    assert len(sim.state()["projects"]) == 2
    # when / then
    assert run_audit_json() == (0, EMPTY)
    # and after a deactivate the emptied shell is still clean
    assert sw_writer.post(f"{brand_path}/deactivate").status_code == 200
    assert run_audit_json() == (0, EMPTY)
