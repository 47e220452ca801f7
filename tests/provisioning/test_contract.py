"""The project's description of Semrush's contract (SPEC §12.1), and the check every test
against the session simulator ends with (`tests/conftest.py`: `sim`)."""

from __future__ import annotations

from typing import Any

import pytest

from provisioning.semrush import SemrushClient, SemrushValidationError
from provisioning.semrush.contract import (
    OPERATIONS,
    PE,
    UM,
    answer_problems,
    operation_for,
    request_problems,
)
from provisioning.simulator import server as simulator_server
from tests.conftest import SIM_TOKEN, off_contract_exchanges

PROJECT = f"{PE}/v1/workspaces/ws-1/projects/p-1"


def test_the_description_names_the_eleven_operations_the_service_uses():
    # when the operations are listed, then they are the contract README's eleven
    assert sorted((op.method, op.path, op.success) for op in OPERATIONS) == [
        ("DELETE", f"{PE}/v1/workspaces/{{id}}/projects/{{project_id}}", 204),
        ("GET", f"{PE}/v1/languages", 200),
        ("GET", f"{PE}/v1/workspaces/{{id}}/projects", 200),
        ("GET", f"{PE}/v1/workspaces/{{id}}/projects/{{project_id}}", 200),
        ("GET", f"{UM}/v1/workspaces/{{id}}/family", 200),
        ("GET", f"{UM}/v1/workspaces/{{id}}/status", 200),
        ("PATCH", f"{PE}/v1/workspaces/{{id}}/projects/{{project_id}}", 200),
        ("POST", f"{PE}/v1/workspaces/{{id}}/projects", 201),
        ("POST", f"{PE}/v1/workspaces/{{id}}/projects/{{project_id}}/publish", 202),
        ("POST", f"{PE}/v3/workspaces/{{id}}/projects/{{project_id}}/aio/prompts/tagged", 201),
        ("POST", f"{UM}/v2/workspaces/{{id}}/child", 200),
    ]


def test_an_operation_is_found_by_method_and_path():
    # when paths are looked up, then each finds its operation or none
    assert operation_for("get", PROJECT).name == "projects-get-project"  # type: ignore[union-attr]
    assert operation_for("POST", f"{PROJECT}/publish").name == "projects-publish-project"  # type: ignore[union-attr]
    assert operation_for("POST", f"{PROJECT}/prompts") is None
    assert operation_for("PUT", PROJECT) is None


@pytest.mark.parametrize(
    ("method", "path", "query", "body", "problems"),
    [
        ("GET", PROJECT, {"draft": "true", "type": "ai"}, None, []),
        ("GET", PROJECT, {"type": "ai"}, None, ["query: 'draft' is required"]),
        (
            "GET",
            f"{PE}/v1/workspaces/ws-1/projects",
            {"type": "ai", "page": "two", "sort": "x"},
            None,
            [
                "query: 'page' must be an integer, got 'two'",
                "query: 'sort' is not a parameter of projects-list-projects",
            ],
        ),
        (
            "POST",
            f"{PROJECT}/publish",
            {},
            {"now": True},
            ["body: projects-publish-project takes no body"],
        ),
        (
            "PATCH",
            PROJECT,
            {},
            {"primary_url": "https://x"},
            ["body: 'type' is a required property"],
        ),
        (
            "POST",
            f"{PE}/v1/workspaces/ws-1/projects",
            {},
            {"name": "US-en", "type": "ai", "location_id": "2840", "brand_names": ["a", None]},
            [
                "body.brand_names[1]: None is not of type 'string'",
                "body.location_id: '2840' is not of type 'integer'",
            ],
        ),
        ("POST", f"{UM}/v2/workspaces/p/child", {}, {"title": "Acme", "resources": {}}, []),
        (
            "DELETE",
            f"{UM}/v1/workspaces/p",
            {},
            None,
            [f"DELETE {UM}/v1/workspaces/p is not an operation of the contract"],
        ),
    ],
)
def test_request_problems_name_each_difference(method, path, query, body, problems):
    # when a request is checked, then each way it breaks the description is named
    assert request_problems(method, path, query, body) == problems


def test_answer_problems_judge_the_success_status_and_shape_only():
    # given a project answer as revision 5's simulator sent it
    project = {"id": "p-1", "name": "US-en", "shared_with": [], "published_at": None}
    workspace = {"id": "w", "title": "Acme", "status": "created", "users": [], "icon": None}

    # when answers are checked, then each difference is named
    assert answer_problems("GET", PROJECT, 200, project) == [
        "answer.published_at: None is not of type 'string'",
        "answer.shared_with: [] is not of type 'integer'",
    ]
    assert answer_problems("GET", f"{UM}/v1/workspaces/p/family", 200, [workspace]) == [
        "answer[0].icon: None is not of type 'string'",
        "answer[0].users: [] is not of type 'integer'",
    ]
    assert answer_problems("GET", f"{UM}/v1/workspaces/w/status", 200, {"state": "x"}) == [
        "answer: 'status' is a required property"
    ]
    assert answer_problems("POST", f"{PROJECT}/publish", 200, None) == [
        "status: 200, the contract says 202"
    ]
    assert answer_problems("POST", f"{PROJECT}/publish", 202, None) == []
    assert answer_problems("GET", PROJECT, 404, "404 page not found") == []


def _client(sim: Any) -> SemrushClient:
    return SemrushClient(base_url=sim.base_url, token=SIM_TOKEN)


def test_the_session_simulator_check_reports_a_broken_answer(sim, monkeypatch):
    # given a simulator whose project answers carry `shared_with` as an array
    payload = simulator_server.SemrushSimulator._project_payload

    def broken(project: Any, now: float) -> dict[str, Any]:
        return {**payload(project, now), "shared_with": []}

    monkeypatch.setattr(simulator_server.SemrushSimulator, "_project_payload", staticmethod(broken))
    client = _client(sim)
    [language] = [item for item in client.list_languages() if item["name"] == "English"]

    # when a project is created in the parent
    client.create_project(
        workspace_id=sim.parent_id,
        name="US-en",
        location_id=2840,
        language=language["id"],
        brand_names=["Acme"],
        brand_domain="acme.example",
    )

    # then the check names the broken answer, and only it
    assert off_contract_exchanges(sim.exchanges()) == [
        f"POST {PE}/v1/workspaces/{sim.parent_id}/projects: "
        "answer.shared_with: [] is not of type 'integer'"
    ]
    sim.reset()  # the difference was the point: `sim`'s own check after the test sees none


def test_the_session_simulator_check_reports_a_broken_request(sim):
    # given a request the client would never send: a project create without `type`
    client = _client(sim)

    # when it is sent
    with pytest.raises(SemrushValidationError):
        client._request_json(
            operation="create_project",
            method="POST",
            url=f"{sim.base_url}{PE}/v1/workspaces/{sim.parent_id}/projects",
            json_body={"name": "US-en"},
        )

    # then the check names it
    assert off_contract_exchanges(sim.exchanges()) == [
        f"POST {PE}/v1/workspaces/{sim.parent_id}/projects: body: 'type' is a required property"
    ]
    sim.reset()
