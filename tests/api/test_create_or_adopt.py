"""Create-or-adopt of the brand's sub-workspace (SPEC §5), through sync brand create."""

from __future__ import annotations

from serenity.models import Brand, Role
from tests.conftest import make_caller
from tests.factories import OrganizationFactory
from tests.support import (
    assert_error,
    assert_settle_reads,
    calls,
    create_child,
    db_counts_but_ended_sync_jobs,
    family,
    foreign_ids,
    list_projects,
    sim_create_project,
    sim_create_workspace,
    status_read,
    wait_until_settled,
)


def brands_path(caller) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands"


def create_bare(caller, name: str = "Acme"):  # type: ignore[no-untyped-def]
    return caller.post(brands_path(caller), {"name": name, "baseUrl": "https://acme.example"})


def test_a_ready_empty_sibling_with_the_same_title_is_adopted(sw_writer, sim):
    # given a settled, empty workspace titled like the brand (e.g. left by an earlier attempt)
    sibling = sim_create_workspace(sim, "acme ")
    setup = len(calls(sim))
    # when
    response = create_bare(sw_writer, "Acme")
    # then it becomes the pointer; nothing new is created
    assert response.status_code == 201, response.json()
    assert response.json()["semrushSubWorkspaceId"] == sibling
    assert calls(sim)[setup:] == [
        family(sim.parent_id),
        list_projects(sibling),
        status_read(sibling),
    ]
    assert [w["id"] for w in sim.state()["workspaces"]] == [sibling]
    assert Brand.objects.get().semrush_sub_workspace_id == sibling


def test_a_same_title_sibling_with_projects_is_502_not_empty(sw_writer, sim):
    # given a same-title workspace that is in use
    sibling = sim_create_workspace(sim, "Acme")
    sim_create_project(sim, sibling)
    # when
    response = create_bare(sw_writer)
    # then it is neither adopted nor duplicated
    assert_error(response, 502, "workspaceNotEmpty", forbidden=foreign_ids(sim))
    assert [w["id"] for w in sim.state()["workspaces"]] == [sibling]
    assert db_counts_but_ended_sync_jobs() == {
        "brands": 0,
        "markets": 0,
        "attempts": 0,
        "jobs": 0,
        "prompts": 0,
    }


def test_two_same_title_siblings_are_409_ambiguous(sw_writer, sim):
    # given
    first = sim_create_workspace(sim, "Acme")
    second = sim_create_workspace(sim, "ACME")
    setup = len(calls(sim))
    # when
    response = create_bare(sw_writer)
    # then
    assert_error(response, 409, "ambiguousWorkspace", forbidden=foreign_ids(sim))
    assert calls(sim)[setup:] == [family(sim.parent_id)]
    assert sorted(w["id"] for w in sim.state()["workspaces"]) == sorted([first, second])
    assert db_counts_but_ended_sync_jobs() == {
        "brands": 0,
        "markets": 0,
        "attempts": 0,
        "jobs": 0,
        "prompts": 0,
    }


def test_a_not_ready_same_title_stub_is_ignored(sw_writer, sim):
    # given a same-title workspace that has not settled (another request's create in flight)
    sim.configure({"settleOutcome": "stuck"})
    stub = sim_create_workspace(sim, "Acme", settle=False)
    sim.configure({"settleOutcome": "created"})
    # when
    response = create_bare(sw_writer)
    # then a new workspace is made
    assert response.status_code == 201, response.json()
    assert response.json()["semrushSubWorkspaceId"] != stub
    assert len(sim.state()["workspaces"]) == 2


def test_another_brands_workspace_is_never_adopted(sim, serenity_org, sw_writer):
    # given another org under the same parent whose brand "Acme" owns a settled, empty workspace
    other_org = OrganizationFactory(
        serenity_enabled=True, semrush_parent_workspace_id=sim.parent_id
    )
    other = make_caller(other_org, Role.WRITER)
    theirs = create_bare(other).json()["semrushSubWorkspaceId"]
    wait_until_settled(sim, theirs)
    setup = len(calls(sim))
    # when our org creates its own "Acme"
    response = create_bare(sw_writer)
    # then a second workspace is created for it
    assert response.status_code == 201, response.json()
    ours = response.json()["semrushSubWorkspaceId"]
    assert ours != theirs
    made = calls(sim)[setup:]
    assert made[:2] == [family(sim.parent_id), create_child(sim.parent_id)]
    assert_settle_reads(made[2:], ours)
    assert sorted(w["id"] for w in sim.state()["workspaces"]) == sorted([ours, theirs])
    assert Brand.objects.get(organization=other_org).semrush_sub_workspace_id == theirs
    assert theirs not in response.content.decode()


def test_a_create_that_times_out_is_resolved_by_adoption(sw_writer, sim, settings):
    # given the child create commits upstream but answers only after the client gave up
    settings.SEMRUSH_TIMEOUT_SECONDS = 0.5
    sim.add_fault(
        {"method": "POST", "pathRegex": "/child$", "commit": True, "status": 200, "delayMs": 1500}
    )
    # when
    response = create_bare(sw_writer)
    # then the single (not yet ready) match is adopted, and settled: exactly one workspace,
    # and it is ours
    assert response.status_code == 201, response.json()
    [workspace] = sim.state()["workspaces"]
    assert response.json()["semrushSubWorkspaceId"] == workspace["id"]
    assert Brand.objects.get().semrush_sub_workspace_id == workspace["id"]
    made = calls(sim)
    assert made[:3] == [
        family(sim.parent_id),
        create_child(sim.parent_id),
        family(sim.parent_id),
    ]
    assert_settle_reads(made[3:], workspace["id"])
