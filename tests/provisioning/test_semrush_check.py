"""`python manage.py semrush_check --org ID` (SPEC §12.1): a read-only preflight, run against
the simulator over HTTP through `call_command`."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import call_command

from provisioning.ledger.models import UpstreamCall
from provisioning.semrush.contract import PE, UM
from tests.factories import BrandFactory
from tests.support import sim_create_project, sim_create_workspace


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("semrush_check", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def brand_workspace(serenity_org, sim) -> str:
    """A brand of the org whose sub-workspace holds one project."""
    workspace_id = sim_create_workspace(sim, "Acme")
    sim_create_project(sim, workspace_id, name="US-en")
    BrandFactory(organization=serenity_org, name="Acme", semrush_sub_workspace_id=workspace_id)
    return workspace_id


def test_a_clean_org_passes_and_only_reads(serenity_org, sim, brand_workspace):
    # given an org whose brand has a workspace with a project
    before = len(sim.requests_log())

    # when the preflight runs
    code, out = run("--org", str(serenity_org.id))

    # then nothing differs, and only the four reads were sent
    assert code == 0
    assert out.splitlines() == [
        f"semrush check of org {serenity_org.id}: parent {sim.parent_id}, "
        f"projects of workspace {brand_workspace}",
        "Every answer matches the contract description.",
    ]
    assert [(r["method"], r["path"]) for r in sim.requests_log()[before:]] == [
        ("GET", f"{UM}/v1/workspaces/{sim.parent_id}/status"),
        ("GET", f"{UM}/v1/workspaces/{sim.parent_id}/family"),
        ("GET", f"{PE}/v1/languages"),
        ("GET", f"{PE}/v1/workspaces/{brand_workspace}/projects"),
    ]
    # and the ledger of upstream writes (SPEC §13.4) records none of them: they confirm no write
    assert not UpstreamCall.objects.exists()


def test_an_org_without_brands_checks_the_parent_s_projects_as_json(serenity_org, sim):
    # when the preflight of an org without brands runs with --json
    code, out = run("--org", str(serenity_org.id), "--json")

    # then the parent's projects were read and nothing differs
    assert code == 0
    assert json.loads(out) == {
        "orgId": str(serenity_org.id),
        "parentWorkspaceId": sim.parent_id,
        "workspaceId": sim.parent_id,
        "differences": [],
        "error": None,
        "exitCode": 0,
    }


def test_off_contract_answers_are_each_reported(serenity_org, sim, brand_workspace):
    # given Semrush answering an unknown status, a family entry without a title, a
    # language name the service cannot map and a project whose publish_status is unknown
    parent = sim.parent_id
    faults = [
        ("/status$", {"status": "provisioning"}),
        ("/family$", [{"id": parent, "status": "created"}]),
        (
            "/languages$",
            {
                "items": [
                    {"id": "l-1", "name": "en"},
                    {"id": "l-2", "name": "German"},
                    {"id": "l-3", "name": "Klingonish"},
                ]
            },
        ),
        (
            "/projects$",
            {
                "page": 1,
                "total": 1,
                "items": [
                    {"id": "p", "name": "x", "publish_status": "archived", "shared_with": []}
                ],
            },
        ),
    ]
    for regex, body in faults:
        sim.add_fault({"method": "GET", "pathRegex": regex, "status": 200, "body": body})

    # when the preflight runs
    code, out = run("--org", str(serenity_org.id), "--json")

    # then each difference is named and the exit code is 1
    assert code == 1
    assert json.loads(out)["differences"] == [
        {
            "operation": f"GET {UM}/v1/workspaces/{parent}/status",
            "detail": "status: unknown workspace status 'provisioning'",
        },
        {
            "operation": f"GET {UM}/v1/workspaces/{parent}/family",
            "detail": "answer[0]: 'title' is a required property",
        },
        {
            "operation": f"GET {PE}/v1/languages",
            "detail": "answer.items[0].name: 'en' is an ISO code, not the language name the "
            "service maps codes to",
        },
        {
            "operation": f"GET {PE}/v1/languages",
            "detail": "answer.items[2].name: 'Klingonish' is not a language name the service "
            "maps to an ISO code",
        },
        {
            "operation": f"GET {PE}/v1/workspaces/{brand_workspace}/projects",
            "detail": "answer.items[0].shared_with: [] is not of type 'integer'",
        },
        {
            "operation": f"GET {PE}/v1/workspaces/{brand_workspace}/projects",
            "detail": "answer.items[0].publish_status: unknown value 'archived'",
        },
    ]


def test_an_unreadable_answer_is_a_difference_and_the_other_reads_go_on(serenity_org, sim):
    # given a status answer without its `status`
    sim.add_fault({"method": "GET", "pathRegex": "/status$", "status": 200, "body": {}})

    # when the preflight runs
    code, out = run("--org", str(serenity_org.id))

    # then it is reported in text, and the family, languages and projects were still read
    assert code == 1
    assert out.splitlines()[1:] == [
        "1 difference(s) from the contract description:",
        "  get_workspace_status: unreadable answer: no string `status`",
    ]
    assert [r["path"] for r in sim.requests_log()][-3:] == [
        f"{UM}/v1/workspaces/{sim.parent_id}/family",
        f"{PE}/v1/languages",
        f"{PE}/v1/workspaces/{sim.parent_id}/projects",
    ]


def test_an_unknown_org_exits_2(db, sim):
    # when the preflight of an org that does not exist runs
    code, out = run("--org", str(uuid.uuid4()))

    # then it could not check, and nothing was sent
    assert code == 2
    assert out.splitlines()[1] == (
        "Could not check: unknown organization, or it has no Semrush parent workspace."
    )
    assert sim.requests_log() == []


def test_semrush_unreachable_exits_2(serenity_org, sim):
    # given Semrush dropping every connection
    sim.add_fault({"pathRegex": "", "status": 0, "times": 10})

    # when the preflight runs
    code, out = run("--org", str(serenity_org.id))

    # then it could not check
    assert code == 2
    assert (
        out.splitlines()[1] == "Could not check: Semrush could not be read (SemrushNetworkError)."
    )
