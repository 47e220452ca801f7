"""`provisioning_audit` at scale (SPEC §12.4): its scopes (`--org`, `--brand`, `--since`), its
progress on stderr, and its share of the credential's rate, against the simulator over HTTP.

The world of most tests: two orgs of one credential under one parent; org A's brand A1 holds an
orphan project, its brand A2 a recorded one; org B's brand B1 holds an orphan project; a stray
workspace of no brand (attributed to A, the oldest org) holds a project."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from provisioning import quota
from provisioning.audit import _family_says_changed
from provisioning.audit_upstream import ParentView, list_workspaces
from provisioning.limiter import Reservation
from provisioning.models import AttemptStartedBy
from provisioning.semrush.errors import SemrushServerError
from serenity.models import Brand, Market, Organization
from tests.conftest import upstream_calls
from tests.factories import BrandFactory, OrganizationFactory, ProvisioningAttemptFactory
from tests.provisioning.test_audit import EMPTY, Upstream, brand_with_workspace, live_market


@pytest.fixture
def upstream(sim: Any) -> Upstream:
    sim.configure({"settleSeconds": 0})
    return Upstream(sim)


@dataclass
class World:
    org_a: Organization
    org_b: Organization
    a1: Brand
    ws_a1: str
    orphan_a1: str
    ws_a2: str
    b1: Brand
    ws_b1: str
    orphan_b1: str
    stray: str
    stray_project: str


@pytest.fixture
def world(serenity_org: Organization, sim: Any, upstream: Upstream) -> World:
    org_b = OrganizationFactory(
        semrush_parent_workspace_id=sim.parent_id, workspace_mode="subworkspace"
    )
    org_b.set_semrush_credential(sim.org_token)
    org_b.save(update_fields=["semrush_credential_encrypted"])
    ws_a1 = upstream.child(sim.parent_id, "A1")
    a1 = brand_with_workspace(serenity_org, ws_a1, name="A1")
    orphan_a1 = upstream.project(ws_a1)
    ws_a2 = upstream.child(sim.parent_id, "A2")
    a2 = brand_with_workspace(serenity_org, ws_a2, name="A2")
    live_market(a2, upstream.project(ws_a2), ws_a2)
    ws_b1 = upstream.child(sim.parent_id, "B1")
    b1 = brand_with_workspace(org_b, ws_b1, name="B1")
    orphan_b1 = upstream.project(ws_b1)
    stray = upstream.child(sim.parent_id, "Stray")
    stray_project = upstream.project(stray)
    return World(
        serenity_org, org_b, a1, ws_a1, orphan_a1, ws_a2, b1, ws_b1, orphan_b1, stray, stray_project
    )


def run_audit(*args: str) -> tuple[int, dict[str, Any], list[str]]:
    """(exit code, the JSON report, stderr lines)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("provisioning_audit", "--json", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, json.loads(out.getvalue()), err.getvalue().splitlines()


def listed(sim: Any) -> list[str]:
    """The workspaces whose projects were listed, in order."""
    return [
        path.split("/workspaces/")[1].split("/")[0]
        for method, path in upstream_calls(sim)
        if method == "GET" and path.endswith("/projects")
    ]


def family_reads(sim: Any) -> int:
    return sum(1 for method, path in upstream_calls(sim) if path.endswith("/family"))


def orphan(project: str, workspace: str, org: Organization) -> dict[str, str]:
    return {"id": project, "workspaceId": workspace, "orgId": str(org.id)}


# --- scopes -------------------------------------------------------------------------------------


def test_unscoped_the_audit_lists_every_ready_child_and_the_parent(world, sim):
    code, report, _ = run_audit()
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanWorkspaces": [{"id": world.stray, "orgId": str(world.org_a.id), "title": "Stray"}],
        "orphanProjects": sorted(
            [
                orphan(world.orphan_a1, world.ws_a1, world.org_a),
                orphan(world.stray_project, world.stray, world.org_a),
                orphan(world.orphan_b1, world.ws_b1, world.org_b),
            ],
            key=lambda e: (e["orgId"], e["workspaceId"], e["id"]),
        ),
    }
    assert family_reads(sim) == 1
    assert sorted(listed(sim)) == sorted(
        [world.ws_a1, world.ws_a2, world.ws_b1, world.stray, sim.parent_id]
    )


def test_org_scope_lists_its_brands_and_brandless_children_and_keeps_its_findings(world, sim):
    # when
    code, report, _ = run_audit("--org", str(world.org_a.id))
    # then: org B's brand workspace is not listed, and nothing of B is reported
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanWorkspaces": [{"id": world.stray, "orgId": str(world.org_a.id), "title": "Stray"}],
        "orphanProjects": sorted(
            [
                orphan(world.orphan_a1, world.ws_a1, world.org_a),
                orphan(world.stray_project, world.stray, world.org_a),
            ],
            key=lambda e: (e["workspaceId"], e["id"]),
        ),
    }
    assert sorted(listed(sim)) == sorted([world.ws_a1, world.ws_a2, world.stray, sim.parent_id])


def test_org_scope_leaves_out_a_sibling_orgs_stray(world, sim):
    code, report, _ = run_audit("--org", str(world.org_b.id))
    # the stray workspace is listed (it could be B's) but attributed to A, the oldest org
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanProjects": [orphan(world.orphan_b1, world.ws_b1, world.org_b)],
    }
    assert sorted(listed(sim)) == sorted([world.ws_b1, world.stray, sim.parent_id])


def test_brand_scope_lists_only_the_brands_workspace(world, sim):
    code, report, _ = run_audit("--brand", str(world.a1.id))
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanProjects": [orphan(world.orphan_a1, world.ws_a1, world.org_a)],
    }
    assert family_reads(sim) == 1
    assert listed(sim) == [world.ws_a1]


def test_since_lists_brands_changed_since_and_children_created_since(world, sim):
    # given: every row last changed two hours ago, but brand A1 now
    two_hours_ago = timezone.now() - timedelta(hours=2)
    Brand.objects.update(updated_at=two_hours_ago)
    Market.objects.update(updated_at=two_hours_ago)
    Brand.objects.filter(pk=world.a1.pk).update(updated_at=timezone.now())
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    # when
    code, report, _ = run_audit("--since", since)
    # then: A1's workspace, the stray (created upstream just now) and the parent are listed
    assert code == 1
    assert report == {
        **EMPTY,
        "orphanWorkspaces": [{"id": world.stray, "orgId": str(world.org_a.id), "title": "Stray"}],
        "orphanProjects": sorted(
            [
                orphan(world.orphan_a1, world.ws_a1, world.org_a),
                orphan(world.stray_project, world.stray, world.org_a),
            ],
            key=lambda e: (e["workspaceId"], e["id"]),
        ),
    }
    assert sorted(listed(sim)) == sorted([world.ws_a1, world.stray, sim.parent_id])


def test_since_after_every_change_lists_only_the_parent(world, sim):
    since = (timezone.now() + timedelta(hours=1)).isoformat()
    code, report, _ = run_audit("--since", since)
    assert code == 0
    assert report == EMPTY
    assert listed(sim) == [sim.parent_id]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--org", "00000000-0000-0000-0000-000000000000"], "No such organization."),
        (["--brand", "00000000-0000-0000-0000-000000000000"], "No such brand in the organization."),
    ],
)
def test_a_scope_naming_nothing_is_refused_before_any_call(world, sim, args, message):
    calls_before = len(upstream_calls(sim))
    with pytest.raises(CommandError) as raised:
        run_audit(*args)
    assert str(raised.value) == message
    assert len(upstream_calls(sim)) == calls_before


def test_a_brand_of_another_org_is_refused_before_any_call(world, sim):
    calls_before = len(upstream_calls(sim))
    with pytest.raises(CommandError) as raised:
        run_audit("--org", str(world.org_a.id), "--brand", str(world.b1.id))
    assert str(raised.value) == "No such brand in the organization."
    assert len(upstream_calls(sim)) == calls_before


def test_since_must_be_a_date_time(world, sim):
    calls_before = len(upstream_calls(sim))
    with pytest.raises(CommandError) as raised:
        run_audit("--since", "yesterday")
    assert "'yesterday' is not an ISO 8601 date-time" in str(raised.value)
    assert len(upstream_calls(sim)) == calls_before


# --- progress -----------------------------------------------------------------------------------


def test_progress_goes_to_stderr_as_json_lines(world, sim, settings):
    # given: an event after every listing
    settings.SERENITY_AUDIT_PROGRESS_SECONDS = 0
    # when
    _, _, lines = run_audit("--brand", str(world.a1.id))
    # then: the workspaces to list once the family is read, each listing, the end
    events = [json.loads(line) for line in lines]
    assert all(isinstance(e.pop("elapsedSeconds"), float) for e in events)
    common = {"parents": 1, "workspacesToList": 1}
    assert events == [
        {"event": "listing", **common, "workspacesListed": 0, "calls": 1},
        {"event": "progress", **common, "workspacesListed": 1, "calls": 2},
        {"event": "done", **common, "workspacesListed": 1, "calls": 2},
    ]


def test_progress_lines_for_a_person(world, sim, settings):
    settings.SERENITY_AUDIT_PROGRESS_SECONDS = 3600
    err = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("provisioning_audit", "--org", str(world.org_a.id), stderr=err)
    lines = [line.rsplit(", ", 1)[0] for line in err.getvalue().splitlines()]
    assert lines == [
        "provisioning audit listing: 0/4 workspace(s) listed under 1 parent(s), 1 call(s)",
        "provisioning audit done: 4/4 workspace(s) listed under 1 parent(s), 5 call(s)",
    ]


# --- its share of the rate ----------------------------------------------------------------------


class RecordingBuckets:
    """The process's real buckets, recording what each permit asked for."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.asked: list[tuple[str, float, int]] = []

    def reserve(self, key: str, **kwargs: Any) -> Reservation:
        self.asked.append((key, kwargs["rate"], kwargs["burst"]))
        return self.real.reserve(key, **kwargs)  # type: ignore[no-any-return]

    def take_and_reserve(self, key: str, **kwargs: Any) -> Any:
        """A slot and its permit asked for in one change."""
        self.asked.append((key, kwargs["rate"], kwargs["burst"]))
        return self.real.take_and_reserve(key, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_each_call_takes_a_permit_of_half_the_rate_then_one_of_the_credential(
    world, sim, settings, monkeypatch
):
    # given the limiter at 10 requests/s (paced 2 % below), burst 20, the audit's share half
    settings.SEMRUSH_RATE_LIMIT_PER_SECOND = 10.0
    settings.SEMRUSH_RATE_LIMIT_BURST = 20
    settings.SERENITY_AUDIT_RATE_SHARE = 0.5
    recording = RecordingBuckets(quota.store())
    monkeypatch.setattr(quota, "store", lambda: recording)
    # when
    run_audit("--brand", str(world.a1.id))
    # then: the family read and the one listing each took a permit of the audit's own bucket
    # at 4.9/s without burst, then one of the credential's bucket at its limits
    key = quota.credential_key(sim.org_token)
    assert recording.asked == [(f"{key}:share", pytest.approx(4.9), 1), (key, 9.8, 20)] * 2


class ScriptedBuckets:
    """Answers each reserve from a script; records (key, rate, burst, max_wait)."""

    def __init__(self, *answers: Reservation) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, float, int, float]] = []

    def reserve(
        self, key: str, *, rate: float, burst: int, max_wait: float, **_: Any
    ) -> Reservation:
        self.asked.append((key, rate, burst, max_wait))
        return self.answers.pop(0)

    def pause(self, key: str, **_: Any) -> None:
        raise AssertionError("no pause expected")

    def rate(self, key: str, *, ceiling: float, **_: Any) -> float:
        return ceiling

    def pause_remaining(self, key: str) -> float:
        return 0.0


def test_a_share_waits_for_its_own_pace_before_asking_the_credential(settings):
    # given a caller at half the rate whose own bucket is busy: a refusal with its place 0.3 s
    # away, then a permit due in 0.1 s; the credential's bucket grants at once
    settings.SEMRUSH_CONCURRENCY_LIMIT = 0
    store = ScriptedBuckets(Reservation(False, 0.3), Reservation(True, 0.1), Reservation(True, 0.0))
    sleeps: list[float] = []
    with quota.patient_permits(share=0.5):
        permits = quota.CredentialPermits(
            key="k",
            limits=quota.Limits(rate=8.0, burst=20),
            org_id="o",
            store=store,
            sleep=sleeps.append,
        )
    # when
    permits.acquire("list_projects")
    # then it slept out its own pace (refused, then due), then took the credential's permit
    assert store.asked == [
        ("k:share", 4.0, 1, quota.COMPENSATION_WAIT_SECONDS),
        ("k:share", 4.0, 1, quota.COMPENSATION_WAIT_SECONDS),
        ("k", 8.0, 20, quota.COMPENSATION_WAIT_SECONDS),
    ]
    assert sleeps == [0.3, 0.1]


def test_without_a_share_a_patient_caller_asks_the_credential_only(settings):
    settings.SEMRUSH_CONCURRENCY_LIMIT = 0
    store = ScriptedBuckets(Reservation(True, 0.0))
    with quota.patient_permits():
        permits = quota.CredentialPermits(
            key="k", limits=quota.Limits(rate=8.0, burst=20), org_id="o", store=store
        )
    permits.acquire("list_projects")
    assert store.asked == [("k", 8.0, 20, quota.COMPENSATION_WAIT_SECONDS)]


# --- live work costs no call --------------------------------------------------------------------


def test_the_workspaces_of_live_work_are_not_listed(world, sim):
    # given: brand A1 has a live attempt (a chained create-market between "project created"
    # and "project id recorded"), and a live create-brand's candidate holds a project
    ProvisioningAttemptFactory(
        brand=world.a1,
        started_by=AttemptStartedBy.CREATE_MARKET,
        candidate_workspace_id=world.ws_a1,
        workspace_promoted=True,
    )
    ProvisioningAttemptFactory(
        brand=BrandFactory(organization=world.org_a, name="Stray"),
        started_by=AttemptStartedBy.CREATE_BRAND,
        candidate_workspace_id=world.stray,
        freshly_created=True,
    )
    # when
    code, report, _ = run_audit("--org", str(world.org_a.id))
    # then: neither is listed nor reported
    assert (code, report) == (0, EMPTY)
    assert sorted(listed(sim)) == sorted([world.ws_a2, sim.parent_id])


@pytest.mark.parametrize(
    "entry, listed_since",
    [
        ({"created_at": "2026-01-01T00:00:00Z", "last_updated_at": "2026-03-01T00:00:00Z"}, True),
        ({"created_at": "2026-01-01T00:00:00Z", "last_updated_at": "2026-01-02T00:00:00"}, False),
        ({"created_at": "2026-13-45T00:00:00Z"}, True),  # unreadable: listed
        ({"created_at": "2026-01-01 00:00:00 +0000 UTC"}, True),  # not ISO 8601: listed
        ({}, True),
    ],
)
def test_a_brandless_child_is_judged_by_its_family_dates(entry, listed_since):
    since = datetime(2026, 2, 1, tzinfo=UTC)
    assert _family_says_changed({"id": "w", **entry}, since) is listed_since


# --- a listing that failed is tried once more at the end ----------------------------------------


class FlakyLister:
    """A client whose listing of each named workspace fails the given number of times."""

    def __init__(self, failures: dict[str, int]) -> None:
        self.failures = dict(failures)
        self.calls: list[str] = []

    def list_projects(self, *, workspace_id: str) -> list[dict[str, Any]]:
        self.calls.append(workspace_id)
        if self.failures.get(workspace_id, 0) > 0:
            self.failures[workspace_id] -= 1
            raise SemrushServerError(operation="list_projects", status=503)
        return [{"id": f"p-{workspace_id}"}]


@pytest.mark.parametrize(("failures", "error"), [(1, False), (2, True)])
def test_a_failed_listing_is_tried_once_more_after_the_others(failures, error):
    # given two workspaces, the first of which fails its listing `failures` times
    client = FlakyLister({"w1": failures})
    view = ParentView(parent_id="p", orgs=[], to_list=["w1", "w2"], client=client)  # type: ignore[arg-type]
    ticks: list[None] = []
    # when
    list_workspaces(view, on_listed=lambda: ticks.append(None))
    # then: w1 is tried again after w2; one failure is absorbed, a second marks the view
    assert client.calls == ["w1", "w2", "w1"]
    assert len(ticks) == 2
    assert view.projects == (
        {"w2": [{"id": "p-w2"}]} if error else {"w1": [{"id": "p-w1"}], "w2": [{"id": "p-w2"}]}
    )
    assert (view.error is not None) is error
