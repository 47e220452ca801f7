"""The Semrush simulator over real HTTP on loopback (SPEC §5.1). No database involved."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pycountry
import pytest
import requests

from provisioning.semrush.contract import answer_problems, operation_for
from provisioning.simulator import LANGUAGES, SemrushSimulator, language_id

TOKEN = "test-token"
PARENT = "parent-1"
UM = "/enterprise/users/api"
PE = "/enterprise/projects/api"
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def simulator():
    sim = SemrushSimulator(
        port=0, token=TOKEN, parents=[PARENT], config={"recordExchanges": True}
    ).start()
    yield sim
    sim.stop()


@pytest.fixture
def sim(simulator: SemrushSimulator):
    """The module's simulator, reset to its startup seeds before each test; after it, every
    answer the simulator gave of its own (not a scripted fault's) keeps the contract
    description (SPEC §12.1)."""
    response = requests.post(f"{simulator.base_url}/__sim/reset", timeout=5)
    assert response.status_code == 200
    yield simulator
    assert off_contract_answers(simulator) == []


def off_contract_answers(sim: SemrushSimulator) -> list[str]:
    """`METHOD path: problem` for each recorded answer that breaks the description."""
    return [
        f"{e['method']} {e['path']}: {problem}"
        for e in sim.exchanges()
        if not e["scripted"] and operation_for(e["method"], e["path"]) is not None
        for problem in answer_problems(e["method"], e["path"], e["status"], e["answer"])
    ]


@pytest.fixture
def api(sim: SemrushSimulator):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {TOKEN}"
    yield session
    session.close()


def control(sim: SemrushSimulator, method: str, name: str, body: Any = None) -> Any:
    response = requests.request(method, f"{sim.base_url}/__sim/{name}", json=body, timeout=5)
    assert response.status_code in (200, 201), response.text
    return response.json()


def configure(sim: SemrushSimulator, **config: Any) -> None:
    control(sim, "POST", "config", config)


def create_child(api: requests.Session, sim: SemrushSimulator, title: str = "Acme") -> Any:
    return api.post(
        f"{sim.base_url}{UM}/v2/workspaces/{PARENT}/child",
        json={"title": title, "resources": {}},
        timeout=5,
    )


def settled_workspace(api: requests.Session, sim: SemrushSimulator, title: str = "Acme") -> str:
    configure(sim, settleSeconds=0)
    response = create_child(api, sim, title)
    assert response.status_code == 200
    return response.json()["id"]


def workspace_status(api: requests.Session, sim: SemrushSimulator, workspace_id: str) -> str:
    response = api.get(f"{sim.base_url}{UM}/v1/workspaces/{workspace_id}/status", timeout=5)
    assert response.status_code == 200
    return response.json()["status"]


def poll_status(api: requests.Session, sim: SemrushSimulator, workspace_id: str) -> str:
    deadline = time.monotonic() + 5
    status = workspace_status(api, sim, workspace_id)
    while status == "not ready" and time.monotonic() < deadline:
        time.sleep(0.05)
        status = workspace_status(api, sim, workspace_id)
    return status


def project_body(**overrides: Any) -> dict[str, Any]:
    body = {
        "name": "US-en",
        "type": "ai",
        "domain": "acme.com",
        "country_code": "us",
        "location_id": 2840,
        "location_name": "United States",
        "language_id": language_id("English"),
        "brand_name_display": "Acme",
        "brand_names": ["Acme", "Acme Inc"],
        "primary_url": "https://ignored.example",
    }
    body.update(overrides)
    return body


# --- workspaces -----------------------------------------------------------------------------


def test_child_workspace_is_not_ready_then_created_after_settle_seconds(api, sim):
    # given a settle time of 0.3 s
    configure(sim, settleSeconds=0.3)

    # when a child workspace is created under the parent
    response = create_child(api, sim, "Acme")

    # then it answers 200 "not ready", stays so at first, and settles to "created"
    assert response.status_code == 200
    body = response.json()
    assert uuid.UUID(body["id"])
    assert (body["title"], body["status"], body["parent_id"]) == ("Acme", "not ready", PARENT)
    assert workspace_status(api, sim, body["id"]) == "not ready"
    assert poll_status(api, sim, body["id"]) == "created"
    assert control(sim, "GET", "state")["workspaces"] == [
        {"id": body["id"], "title": "Acme", "status": "created", "parentId": PARENT}
    ]


def test_settle_outcome_failed_ends_in_creation_failed(api, sim):
    # given workspaces that fail to provision
    configure(sim, settleSeconds=0.1, settleOutcome="failed")

    # when one is created and polled
    workspace_id = create_child(api, sim).json()["id"]
    status = poll_status(api, sim, workspace_id)

    # then its terminal status is "creation failed"
    assert status == "creation failed"


def test_settle_outcome_stuck_stays_not_ready(api, sim):
    # given stuck workspaces with no settle time at all
    configure(sim, settleSeconds=0, settleOutcome="stuck")

    # when one is created and read a little later
    workspace_id = create_child(api, sim).json()["id"]
    time.sleep(0.2)

    # then it is still "not ready"
    assert workspace_status(api, sim, workspace_id) == "not ready"


def test_settle_config_is_taken_at_creation(api, sim):
    # given a workspace created while the outcome is "failed"
    configure(sim, settleSeconds=0, settleOutcome="failed")
    workspace_id = create_child(api, sim).json()["id"]

    # when the configuration changes afterwards
    configure(sim, settleOutcome="created")

    # then the workspace keeps the outcome it was created with
    assert workspace_status(api, sim, workspace_id) == "creation failed"


def test_child_create_requires_title_and_resources(api, sim):
    # when a child is created without a title, then without resources
    url = f"{sim.base_url}{UM}/v2/workspaces/{PARENT}/child"
    no_title = api.post(url, json={"resources": {}}, timeout=5)
    no_resources = api.post(url, json={"title": "Acme"}, timeout=5)

    # then both are refused and nothing is created
    assert (no_title.status_code, no_title.json()) == (
        400,
        {
            "message": "invalid request body",
            "errors": {"body": ["body: 'title' is a required property"]},
        },
    )
    assert (no_resources.status_code, no_resources.json()) == (
        400,
        {
            "message": "invalid request body",
            "errors": {"body": ["body: 'resources' is a required property"]},
        },
    )
    assert control(sim, "GET", "state")["workspaces"] == []


def test_family_is_a_bare_array_of_the_parent_and_its_descendants(api, sim):
    # given two children of the parent, one with a child of its own
    configure(sim, settleSeconds=0)
    first = create_child(api, sim, "Acme").json()["id"]
    second = create_child(api, sim, "Acme").json()["id"]
    grandchild = api.post(
        f"{sim.base_url}{UM}/v2/workspaces/{first}/child",
        json={"title": "Nested", "resources": {}},
        timeout=5,
    ).json()["id"]

    # when the parent's family is listed
    response = api.get(f"{sim.base_url}{UM}/v1/workspaces/{PARENT}/family", timeout=5)

    # then it is a bare array: the parent first (no parent_id: never null), then every
    # descendant
    assert response.status_code == 200
    assert [(w["id"], w["title"], w["status"], w.get("parent_id")) for w in response.json()] == [
        (PARENT, f"Parent {PARENT}", "created", None),
        (first, "Acme", "created", PARENT),
        (second, "Acme", "created", PARENT),
        (grandchild, "Nested", "created", first),
    ]


def test_family_shows_each_workspace_as_it_is_at_each_listing(api, sim):
    # given a child settling in 0.3 s, listed once while not ready
    configure(sim, settleSeconds=0.3)
    child = create_child(api, sim, "Acme").json()["id"]
    family = f"{sim.base_url}{UM}/v1/workspaces/{PARENT}/family"

    def entry() -> dict[str, Any]:
        return next(w for w in api.get(family, timeout=5).json() if w["id"] == child)

    first = entry()
    # when it has settled, and then has a live project
    settled = poll_status(api, sim, child)
    second = entry()
    projects = f"{sim.base_url}{PE}/v1/workspaces/{child}/projects"
    project_id = api.post(projects, json=project_body(), timeout=5).json()["id"]
    assert api.post(f"{projects}/{project_id}/publish", timeout=5).status_code == 202
    third = entry()

    # then each listing shows the state of that moment (the entries are not stale copies)
    assert (first["status"], first["published_projects_count"]) == ("not ready", 0)
    assert settled == "created"
    assert (second["status"], second["published_projects_count"]) == ("created", 0)
    assert (third["status"], third["published_projects_count"]) == ("created", 1)
    assert {k: v for k, v in third.items() if k != "published_projects_count"} == {
        k: v for k, v in second.items() if k != "published_projects_count"
    }


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", f"{UM}/v2/workspaces/nope/child", {"title": "Acme", "resources": {}}),
        ("GET", f"{UM}/v1/workspaces/nope/status", None),
        ("GET", f"{UM}/v1/workspaces/nope/family", None),
        ("DELETE", f"{UM}/v1/workspaces/nope", None),
        ("GET", f"{PE}/v1/workspaces/nope/projects?type=ai", None),
        ("POST", f"{PE}/v1/workspaces/nope/projects", project_body()),
        ("GET", f"{PE}/v1/workspaces/nope/projects/p?draft=true&type=ai", None),
        ("POST", f"{PE}/v1/workspaces/nope/projects/p/publish", None),
    ],
)
def test_unknown_workspace_answers_403(api, sim, method, path, body):
    # when any route names a workspace the simulator does not know
    response = api.request(method, f"{sim.base_url}{path}", json=body, timeout=5)

    # then upstream's 403 comes back and nothing is created
    assert (response.status_code, response.json()) == (403, {"message": "invalid access attempt"})
    assert control(sim, "GET", "state")["workspaces"] == []


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Token {TOKEN}", "Bearer "])
def test_missing_or_wrong_bearer_answers_401(sim, authorization):
    # given a request without the configured bearer token
    headers = {} if authorization is None else {"Authorization": authorization}

    # when it creates a child
    response = requests.post(
        f"{sim.base_url}{UM}/v2/workspaces/{PARENT}/child",
        json={"title": "Acme", "resources": {}},
        headers=headers,
        timeout=5,
    )

    # then it is refused with 401 and nothing is created
    assert (response.status_code, response.json()) == (401, {"detail": "Not authenticated"})
    assert control(sim, "GET", "state")["workspaces"] == []


def test_unrouted_path_answers_bare_404_and_wrong_method_405(api, sim):
    # when an unmodelled path and a modelled path with the wrong method are called
    unrouted = api.post(f"{sim.base_url}{UM}/v2/workspaces/{PARENT}/subworkspace", timeout=5)
    wrong_method = api.get(f"{sim.base_url}{UM}/v2/workspaces/{PARENT}/child", timeout=5)

    # then the gateway's bare 404 and a JSON 405 come back
    assert (unrouted.status_code, unrouted.text) == (404, "404 page not found")
    assert (wrong_method.status_code, wrong_method.json()) == (
        405,
        {"message": "method not allowed"},
    )


def test_workspace_delete_cascades_and_later_reads_answer_403(api, sim):
    # given a settled workspace with a project
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    assert api.post(projects, json=project_body(), timeout=5).status_code == 201

    # when the workspace is deleted
    response = api.delete(f"{sim.base_url}{UM}/v1/workspaces/{workspace_id}", timeout=5)

    # then it answers {id}, its projects are gone and its status reads 403
    assert (response.status_code, response.json()) == (200, {"id": workspace_id})
    status = api.get(f"{sim.base_url}{UM}/v1/workspaces/{workspace_id}/status", timeout=5)
    assert status.status_code == 403
    state = control(sim, "GET", "state")
    assert (state["workspaces"], state["projects"]) == ([], [])


def test_workspace_delete_while_not_ready_answers_422(api, sim):
    # given a workspace that has not settled
    configure(sim, settleSeconds=60)
    workspace_id = create_child(api, sim).json()["id"]

    # when it is deleted
    response = api.delete(f"{sim.base_url}{UM}/v1/workspaces/{workspace_id}", timeout=5)

    # then upstream's 422 comes back and the workspace stays
    assert (response.status_code, response.json()) == (422, {"message": "workspace not ready"})
    assert len(control(sim, "GET", "state")["workspaces"]) == 1


# --- projects -------------------------------------------------------------------------------


def test_project_create_publish_read_list_and_delete(api, sim):
    # given a settled workspace
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"

    # when a project is created
    created = api.post(projects, json=project_body(), timeout=5)

    # then it is a 201 draft whose settings echo the request, primary_url ignored
    assert created.status_code == 201
    project = created.json()
    project_id = project["id"]
    assert uuid.UUID(project_id)
    assert "created_at" not in project
    assert (project["name"], project["domain"], project["type"]) == ("US-en", "acme.com", "ai")
    assert (project["publish_status"], project["shared_with"]) == ("draft", 0)
    assert "published_at" not in project  # a string the contract never makes null: omitted
    assert project["settings"]["ai"] == {
        "location": {"id": 2840, "name": "United States"},
        "language": {"id": language_id("English"), "name": "en"},
        "country": {"code": "us", "name": "United States"},
        "brand_name_display": "Acme",
        "brand_names": ["Acme", "Acme Inc"],
        "prompts_count": 0,
        "models_stats": {"models_count": 0},
        "benchmarks_count": 0,
    }

    # when its tracked URL is set and it is published
    patched = api.patch(
        f"{projects}/{project_id}",
        json={"type": "ai", "primary_url": "https://www.acme.com/us"},
        timeout=5,
    )
    published = api.post(f"{projects}/{project_id}/publish", timeout=5)

    # then the PATCH answers the project and publish answers 202 with an empty body
    assert patched.status_code == 200
    assert patched.json()["settings"]["ai"]["primary_url"] == "https://www.acme.com/us"
    assert (published.status_code, published.content) == (202, b"")
    assert published.headers["Content-Length"] == "0"
    assert "Content-Type" not in published.headers

    # and with publishSeconds 0 the draft read and the list show it live at once
    read = api.get(f"{projects}/{project_id}", params={"draft": "true", "type": "ai"}, timeout=5)
    assert read.status_code == 200
    assert read.json()["publish_status"] == "live"
    listed = api.get(projects, params={"type": "ai"}, timeout=5)
    assert listed.status_code == 200
    assert (listed.json()["page"], listed.json()["total"]) == (1, 1)
    assert [item["id"] for item in listed.json()["items"]] == [project_id]
    assert control(sim, "GET", "state")["projects"] == [
        {
            "id": project_id,
            "workspaceId": workspace_id,
            "name": "US-en",
            "locationId": 2840,
            "language": "en",
            "publishStatus": "live",
            "primaryUrl": "https://www.acme.com/us",
        }
    ]

    # when it is deleted twice
    first_delete = api.delete(f"{projects}/{project_id}", timeout=5)
    second_delete = api.delete(f"{projects}/{project_id}", timeout=5)

    # then 204 then 404, and reads and the list no longer see it
    assert (first_delete.status_code, first_delete.content) == (204, b"")
    assert (second_delete.status_code, second_delete.json()) == (404, {"message": "not found"})
    gone = api.get(f"{projects}/{project_id}", params={"draft": "true", "type": "ai"}, timeout=5)
    assert (gone.status_code, gone.json()) == (404, {"message": "not found"})
    assert api.get(projects, params={"type": "ai"}, timeout=5).json() == {
        "page": 1,
        "total": 0,
        "items": [],
    }


def test_publish_goes_through_publishing_to_live_after_publish_seconds(api, sim):
    # given a project and a publish time of 0.3 s
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    project_id = api.post(projects, json=project_body(), timeout=5).json()["id"]
    configure(sim, publishSeconds=0.3)

    # when it is published
    assert api.post(f"{projects}/{project_id}/publish", timeout=5).status_code == 202

    # then it reads "publishing" first and "live" once the time has passed
    def publish_status() -> str:
        url = f"{projects}/{project_id}?draft=true&type=ai"
        return api.get(url, timeout=5).json()["publish_status"]

    assert publish_status() == "publishing"
    deadline = time.monotonic() + 5
    while publish_status() == "publishing" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert publish_status() == "live"


def test_project_create_on_a_not_ready_workspace_answers_500(api, sim):
    # given a workspace that has not settled
    configure(sim, settleSeconds=60)
    workspace_id = create_child(api, sim).json()["id"]

    # when a project is created in it
    response = api.post(
        f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects",
        json=project_body(),
        timeout=5,
    )

    # then upstream's not-ready 500 comes back and nothing is created
    assert (response.status_code, response.json()) == (500, {"message": "internal server error"})
    assert control(sim, "GET", "state")["projects"] == []


def test_projects_can_live_in_the_parent_workspace(api, sim):
    # when a project is created directly in the parent (flat mode)
    response = api.post(
        f"{sim.base_url}{PE}/v1/workspaces/{PARENT}/projects", json=project_body(), timeout=5
    )

    # then it is created there
    assert response.status_code == 201
    assert control(sim, "GET", "state")["projects"][0]["workspaceId"] == PARENT


@pytest.mark.parametrize(
    ("overrides", "status", "text"),
    [
        ({"name": ""}, 400, "name is required"),
        ({"type": "seo"}, 400, "type must be ai"),
        ({"domain": "acme.com/us"}, 400, "domain must be a bare host name"),
        ({"location_id": "2840"}, 400, "body.location_id: '2840' is not of type 'integer'"),
        ({"language_id": str(uuid.uuid4())}, 500, '{"message": "internal server error"}'),
    ],
)
def test_project_create_validation(api, sim, overrides, status, text):
    # given a settled workspace
    workspace_id = settled_workspace(api, sim)

    # when a project is created with a bad field
    response = api.post(
        f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects",
        json=project_body(**overrides),
        timeout=5,
    )

    # then upstream's answer comes back and nothing is created
    assert (response.status_code, response.text) == (status, text)
    assert control(sim, "GET", "state")["projects"] == []


def test_project_reads_and_patches_need_their_query_and_type(api, sim):
    # given a project
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    project_id = api.post(projects, json=project_body(), timeout=5).json()["id"]

    # when it is listed without type, read without draft and patched without type
    listed = api.get(projects, timeout=5)
    read = api.get(f"{projects}/{project_id}", timeout=5)
    patched = api.patch(f"{projects}/{project_id}", json={"primary_url": "https://x"}, timeout=5)

    # then upstream's 500 / 400 / 400 come back and the URL is not set
    assert (listed.status_code, listed.json()) == (500, {"message": "internal server error"})
    assert (read.status_code, read.text) == (400, "draft query parameter is required")
    assert (patched.status_code, patched.text) == (400, "body: 'type' is a required property")
    assert control(sim, "GET", "state")["projects"][0]["primaryUrl"] is None


def test_unknown_project_answers_404(api, sim):
    # given a settled workspace
    workspace_id = settled_workspace(api, sim)
    base = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects/{uuid.uuid4()}"

    # when an unknown project is read, patched, published and given prompts
    responses = [
        api.get(f"{base}?draft=true&type=ai", timeout=5),
        api.patch(base, json={"type": "ai", "primary_url": "https://x"}, timeout=5),
        api.post(f"{base}/publish", timeout=5),
        api.post(
            tagged_prompts_url(sim, workspace_id, base.rsplit("/", 1)[1]),
            json={"prompts": [{"name": "x"}]},
            timeout=5,
        ),
    ]

    # then each answers 404 not found
    assert [(r.status_code, r.json()) for r in responses] == [(404, {"message": "not found"})] * 4


def tagged_prompts_url(sim: SemrushSimulator, workspace_id: str, project_id: str) -> str:
    return (
        f"{sim.base_url}{PE}/v3/workspaces/{workspace_id}/projects/{project_id}/aio/prompts/tagged"
    )


def test_tagged_prompts_are_created_with_ids_and_deduped_by_name(api, sim):
    # given a project holding the prompt "acme login"
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    project_id = api.post(projects, json=project_body(), timeout=5).json()["id"]
    url = tagged_prompts_url(sim, workspace_id, project_id)
    held = api.post(url, json={"prompts": [{"name": "acme login"}]}, timeout=5).json()
    held_id = held["items"][0]["id"]

    # when three prompts are pushed, one of them held already and one sent twice
    response = api.post(
        url,
        json={
            "prompts": [
                {"name": "best running shoes", "tags": ["shoes"]},
                {"name": "acme login", "tags": []},
                {"name": "best running shoes"},
            ]
        },
        timeout=5,
    )

    # then 201: each comes back by name with an id, the held and repeated ones `is_new: false`
    assert response.status_code == 201
    items = response.json()["items"]
    new_id = items[0]["id"]
    assert uuid.UUID(new_id)
    assert response.json() == {
        "items": [
            {"id": new_id, "name": "best running shoes", "is_new": True},
            {"id": held_id, "name": "acme login", "is_new": False},
            {"id": new_id, "name": "best running shoes", "is_new": False},
        ],
        "existing_count": 2,
    }
    read = api.get(f"{projects}/{project_id}?draft=true&type=ai", timeout=5).json()
    assert read["settings"]["ai"]["prompts_count"] == 2
    assert control(sim, "GET", "state")["prompts"] == [
        {"id": held_id, "projectId": project_id, "text": "acme login", "tags": []},
        {"id": new_id, "projectId": project_id, "text": "best running shoes", "tags": ["shoes"]},
    ]


@pytest.mark.parametrize(
    ("body", "problems"),
    [
        ({"prompts": []}, ["body.prompts: [] should be non-empty"]),
        ({"prompts": ["x"]}, ["body.prompts[0]: 'x' is not of type 'object'"]),
        ({"prompts": [{"text": "x"}]}, ["body.prompts[0]: 'name' is a required property"]),
        (
            {"prompts": [{"name": "x", "tags": "a"}]},
            ["body.prompts[0].tags: 'a' is not of type 'array'"],
        ),
    ],
)
def test_tagged_prompts_breaking_the_contract_answer_400(api, sim, body, problems):
    # given a project
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    project_id = api.post(projects, json=project_body(), timeout=5).json()["id"]

    # when prompts that break the contract are pushed
    response = api.post(tagged_prompts_url(sim, workspace_id, project_id), json=body, timeout=5)

    # then the contract's 400 `{message, errors}` comes back and nothing is added
    assert (response.status_code, response.json()) == (
        400,
        {"message": "invalid request body", "errors": {"body": problems}},
    )
    assert control(sim, "GET", "state")["prompts"] == []


def test_the_v1_prompts_route_does_not_exist(api, sim):
    # given a project
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    project_id = api.post(projects, json=project_body(), timeout=5).json()["id"]

    # when prompts are pushed to the v1 route of revisions 1-5
    response = api.post(
        f"{projects}/{project_id}/prompts", json={"prompts": [{"text": "x"}]}, timeout=5
    )

    # then the gateway's 404 comes back and nothing is added
    assert (response.status_code, response.json()) == (404, {"message": "not found"})
    assert control(sim, "GET", "state")["prompts"] == []


def test_exchanges_record_bodies_and_an_off_contract_answer_is_reported(api, sim):
    # given a workspace, then a scripted 200 status answer missing `status`, and one that
    # the simulator answered itself
    workspace_id = settled_workspace(api, sim)
    status_url = f"{sim.base_url}{UM}/v1/workspaces/{workspace_id}/status"
    control(
        sim, "POST", "faults", {"method": "GET", "pathRegex": "/status$", "status": 200, "body": {}}
    )
    api.get(status_url, timeout=5)
    api.get(status_url, timeout=5)

    # when the exchanges are read
    exchanges = control(sim, "GET", "exchanges")

    # then each has its bodies; only the scripted answer breaks the description
    status_path = f"{UM}/v1/workspaces/{workspace_id}/status"
    assert [(e["method"], e["path"], e["status"], e["scripted"], e["answer"]) for e in exchanges][
        1:
    ] == [
        ("GET", status_path, 200, True, {}),
        ("GET", status_path, 200, False, {"status": "created"}),
    ]
    assert exchanges[0]["request"] == {"title": "Acme", "resources": {}}
    assert answer_problems("GET", status_path, 200, exchanges[1]["answer"]) == [
        "answer: 'status' is a required property"
    ]
    assert answer_problems("GET", status_path, 200, exchanges[2]["answer"]) == []


def test_languages_are_a_fixed_catalogue_of_iso_639_names_with_uuid5_ids(api, sim):
    # when the catalogue is read
    response = api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5)

    # then it is {items: [{id, name}]}: stable uuid5 ids and pycountry's English ISO 639 names
    assert response.status_code == 200
    items = response.json()["items"]
    assert len(items) == len(LANGUAGES) == 20
    assert items[:3] == [
        {"id": language_id("English"), "name": "English"},
        {"id": language_id("German"), "name": "German"},
        {"id": language_id("French"), "name": "French"},
    ]
    for item in items:
        assert set(item) == {"id", "name"}
        assert uuid.UUID(item["id"]).version == 5
        assert pycountry.languages.get(name=item["name"]) is not None
    assert {lang.code: pycountry.languages.get(name=lang.name).alpha_2 for lang in LANGUAGES} == {
        lang.code: lang.code for lang in LANGUAGES
    }


# --- faults ---------------------------------------------------------------------------------


def test_fault_fires_exactly_times_then_requests_are_handled_normally(api, sim):
    # given a scripted 503 for the next two child creates
    control(
        sim,
        "POST",
        "faults",
        {
            "method": "POST",
            "pathRegex": r"/child$",
            "times": 2,
            "status": 503,
            "body": {"message": "busy"},
        },
    )

    # when three creates are sent
    responses = [create_child(api, sim) for _ in range(3)]

    # then two get the scripted answer without effect, the third creates the one workspace
    assert [(r.status_code, r.json().get("message")) for r in responses] == [
        (503, "busy"),
        (503, "busy"),
        (200, None),
    ]
    assert [w["id"] for w in control(sim, "GET", "state")["workspaces"]] == [
        responses[2].json()["id"]
    ]
    assert control(sim, "GET", "faults") == []


def test_fault_matches_method_and_searches_the_path_without_query(api, sim):
    # given a fault on GET requests whose path contains "/projects"
    workspace_id = settled_workspace(api, sim)
    control(sim, "POST", "faults", {"method": "get", "pathRegex": "/projects", "status": 502})
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"

    # when a POST and then a GET with a query string hit that path
    created = api.post(projects, json=project_body(), timeout=5)
    listed = api.get(projects, params={"type": "ai"}, timeout=5)

    # then only the GET is faulted, with an empty body
    assert created.status_code == 201
    assert (listed.status_code, listed.content) == (502, b"")


def test_commit_fault_performs_the_operation_but_answers_the_scripted_status(api, sim):
    # given an ambiguous create: committed, then answered 504
    control(sim, "POST", "faults", {"pathRegex": "/child$", "status": 504, "commit": True})

    # when a child is created
    response = create_child(api, sim, "Acme")

    # then the client sees 504 but the workspace exists upstream
    assert response.status_code == 504
    assert [w["title"] for w in control(sim, "GET", "state")["workspaces"]] == ["Acme"]


def test_status_zero_drops_the_connection_without_changing_anything(api, sim):
    # given a fault that drops the connection
    control(sim, "POST", "faults", {"pathRegex": "/child$", "status": 0})

    # when a child is created, then the client sees a connection error
    with pytest.raises(requests.ConnectionError):
        create_child(api, sim)

    # then nothing was created, the log records status 0, and the session still works
    assert control(sim, "GET", "state")["workspaces"] == []
    assert control(sim, "GET", "requests")[0]["status"] == 0
    assert create_child(api, sim).status_code == 200


def test_commit_fault_with_status_zero_creates_then_drops(api, sim):
    # given a create that commits and then drops the connection
    control(sim, "POST", "faults", {"pathRegex": "/child$", "status": 0, "commit": True})

    # when a child is created, then the client sees a connection error
    with pytest.raises(requests.ConnectionError):
        create_child(api, sim, "Acme")

    # then the workspace exists upstream
    assert [w["title"] for w in control(sim, "GET", "state")["workspaces"]] == ["Acme"]


def test_fault_without_status_only_delays(api, sim):
    # given a 300 ms delay on child creates
    control(sim, "POST", "faults", {"pathRegex": "/child$", "delayMs": 300})

    # when a child is created
    started = time.monotonic()
    response = create_child(api, sim)
    elapsed = time.monotonic() - started

    # then it is handled normally, after the delay
    assert response.status_code == 200
    assert elapsed >= 0.3
    assert len(control(sim, "GET", "state")["workspaces"]) == 1


def test_a_delayed_request_does_not_block_others(api, sim):
    # given a slow status read
    workspace_id = create_child(api, sim).json()["id"]
    control(sim, "POST", "faults", {"pathRegex": "/status$", "delayMs": 1500})
    results: queue.Queue[int] = queue.Queue()

    def slow_read() -> None:
        url = f"{sim.base_url}{UM}/v1/workspaces/{workspace_id}/status"
        results.put(requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code)

    # when the slow read is in flight and another request is sent
    thread = threading.Thread(target=slow_read)
    thread.start()
    time.sleep(0.1)
    languages = api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5)

    # then the other request is answered while the slow one is still pending
    assert languages.status_code == 200
    assert results.empty()
    thread.join(timeout=5)
    assert results.get_nowait() == 200


def test_scripted_429_carries_retry_after(api, sim):
    # given a retry-after of 3 s and a scripted 429
    configure(sim, retryAfterSeconds=3)
    control(sim, "POST", "faults", {"pathRegex": "/languages$", "status": 429})

    # when the catalogue is read
    response = api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5)

    # then 429 with Retry-After: 3
    assert (response.status_code, response.headers["Retry-After"]) == (429, "3")


@pytest.mark.parametrize(
    "fault",
    [
        {"pathRegex": "("},
        {"times": 0},
        {"status": 99},
        {"delayMs": -1},
        {"commit": "yes"},
        {"pathRegex": "x", "unexpected": 1},
    ],
)
def test_bad_fault_answers_400(sim, fault):
    # when a malformed fault is posted
    response = requests.post(f"{sim.base_url}/__sim/faults", json=fault, timeout=5)

    # then it is refused and not stored
    assert response.status_code == 400
    assert control(sim, "GET", "faults") == []


# --- configuration, rate limit, errors ------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"settleSeconds": -1},
        {"settleSeconds": "1"},
        {"settleOutcome": "error"},
        {"errorRate5xx": 1.5},
        {"latencyMs": -5},
        {"seed": 1.5},
        {"rateLimitPerSecond": -1},
        {"concurrencyLimit": -1},
        {"concurrencyLimit": 1.5},
        {"retryAfterSeconds": True},
        {"publishSeconds": None},
        {"settleSecs": 1},
    ],
)
def test_bad_config_answers_400_and_changes_nothing(sim, config):
    # given the current configuration
    before = control(sim, "GET", "config")

    # when a bad value is merged
    response = requests.post(f"{sim.base_url}/__sim/config", json=config, timeout=5)

    # then it is refused and the configuration is unchanged
    assert response.status_code == 400
    assert control(sim, "GET", "config") == before


def test_config_merges_and_fractional_settle_is_accepted(sim):
    # when two partial updates are merged
    configure(sim, settleSeconds=0.25)
    merged = control(sim, "POST", "config", {"latencyMs": 5})

    # then both are kept along with the defaults
    assert merged == {
        "settleSeconds": 0.25,
        "settleOutcome": "created",
        "latencyMs": 5,
        "errorRate5xx": 0.0,
        "seed": 0,
        "rateLimitPerSecond": None,
        "concurrencyLimit": None,
        "retryAfterSeconds": 1,
        "publishSeconds": 0.0,
        "publishOutcome": "live",
        "recordExchanges": True,
    }


def test_rate_limit_answers_429_with_retry_after(api, sim):
    # given at most two requests a second and a retry-after of 7 s
    configure(sim, rateLimitPerSecond=2, retryAfterSeconds=7)

    # when three requests are sent at once
    responses = [api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5) for _ in range(3)]

    # then the third is refused with 429 and Retry-After
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert responses[2].headers["Retry-After"] == "7"


def test_retry_after_null_sends_429s_without_the_header(api, sim):
    # given a rate limit of one request a second and no Retry-After
    configure(sim, rateLimitPerSecond=1, retryAfterSeconds=None)

    # when two requests are sent at once
    responses = [api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5) for _ in range(2)]

    # then the second is refused with 429 and no Retry-After
    assert [r.status_code for r in responses] == [200, 429]
    assert "Retry-After" not in responses[1].headers


def test_concurrency_limit_refuses_a_request_beyond_the_token_s_calls_in_flight(api, sim):
    # given at most two calls in flight per token and a slow status read
    configure(sim, concurrencyLimit=2)
    workspace_id = create_child(api, sim).json()["id"]
    control(sim, "POST", "faults", {"pathRegex": "/status$", "delayMs": 800, "times": 2})
    url = f"{sim.base_url}{UM}/v1/workspaces/{workspace_id}/status"
    slow: queue.Queue[int] = queue.Queue()

    def slow_read() -> None:
        slow.put(requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code)

    # when two slow reads are in flight and a third request arrives
    threads = [threading.Thread(target=slow_read) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    third = api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5)
    for thread in threads:
        thread.join(timeout=5)
    after = api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5)

    # then the third is refused with 429 Retry-After: 1, the slow ones pass, and once they
    # have answered a request passes again
    assert (third.status_code, third.headers["Retry-After"]) == (429, "1")
    assert sorted([slow.get_nowait(), slow.get_nowait()]) == [200, 200]
    assert after.status_code == 200


def test_concurrency_limit_is_per_token(api, sim):
    # given one call in flight per token, a second token, and a slow read of the first token
    configure(sim, concurrencyLimit=1)
    control(sim, "POST", "tokens", {"token": "other-token"})
    control(sim, "POST", "faults", {"pathRegex": "/languages$", "delayMs": 800})
    thread = threading.Thread(target=lambda: api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5))
    thread.start()
    time.sleep(0.3)

    # when the other token calls meanwhile
    other = requests.get(
        f"{sim.base_url}{PE}/v1/languages",
        headers={"Authorization": "Bearer other-token"},
        timeout=5,
    )
    thread.join(timeout=5)

    # then it is served
    assert other.status_code == 200


def test_request_log_has_each_call_s_duration(api, sim):
    # given a latency of 150 ms
    configure(sim, latencyMs=150)

    # when the catalogue is read
    api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5)

    # then its log entry has its duration, arrival to answer
    (entry,) = control(sim, "GET", "requests")
    assert entry["status"] == 200
    assert 150 <= entry["durationMs"] < 2000


def test_error_rate_is_reproducible_from_the_seed(api, sim):
    # given a 50 % error rate with a fixed seed
    def statuses() -> list[int]:
        configure(sim, errorRate5xx=0.5, seed=42)
        url = f"{sim.base_url}{PE}/v1/languages"
        return [api.get(url, timeout=5).status_code for _ in range(20)]

    # when the same sequence is requested twice
    first, second = statuses(), statuses()

    # then both runs fail the same requests, with 503s and successes mixed
    assert first == second
    assert set(first) == {200, 503}


def test_error_rate_one_fails_every_request_without_effect(api, sim):
    # given every request failing
    configure(sim, errorRate5xx=1)

    # when a child is created
    response = create_child(api, sim)

    # then 503 and nothing is created
    assert (response.status_code, response.json()) == (503, {"message": "service unavailable"})
    assert control(sim, "GET", "state")["workspaces"] == []


def test_latency_delays_every_request(api, sim):
    # given 200 ms of latency
    configure(sim, latencyMs=200)

    # when a request is sent
    started = time.monotonic()
    response = api.get(f"{sim.base_url}{PE}/v1/languages", timeout=5)

    # then it is answered after at least that long
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.2


# --- control: log, reset, parents -----------------------------------------------------------


def test_request_log_records_api_calls_oldest_first_and_skips_control_routes(api, sim):
    # given a few API calls interleaved with control calls
    create_child(api, sim, "Acme")
    control(sim, "GET", "state")
    api.get(f"{sim.base_url}{PE}/v1/workspaces/{PARENT}/projects?type=ai&page=1", timeout=5)
    requests.get(f"{sim.base_url}{PE}/v1/languages", timeout=5)

    # when the log is read
    log = control(sim, "GET", "requests")

    # then it holds exactly the API calls, in order, with their status and an ISO time
    assert [{k: v for k, v in entry.items() if k not in ("at", "durationMs")} for entry in log] == [
        {
            "method": "POST",
            "path": f"{UM}/v2/workspaces/{PARENT}/child",
            "query": "",
            "status": 200,
        },
        {
            "method": "GET",
            "path": f"{PE}/v1/workspaces/{PARENT}/projects",
            "query": "type=ai&page=1",
            "status": 200,
        },
        {"method": "GET", "path": f"{PE}/v1/languages", "query": "", "status": 401},
    ]
    assert all(datetime.fromisoformat(entry["at"]).tzinfo is not None for entry in log)
    assert all(entry["durationMs"] >= 0 for entry in log)


def test_reset_forgets_state_and_replaces_seeds_until_the_next_bare_reset(api, sim):
    # given a workspace, a fault and some log entries
    create_child(api, sim)
    control(sim, "POST", "faults", {"pathRegex": "/status$", "status": 500})

    # when the simulator is reset with a new parent and a new token
    control(sim, "POST", "reset", {"parentWorkspaces": ["parent-2"], "token": "other"})

    # then everything is forgotten and only the new token and parent are accepted
    state = control(sim, "GET", "state")
    assert (state["workspaces"], state["projects"], state["parentWorkspaces"]) == (
        [],
        [],
        ["parent-2"],
    )
    assert control(sim, "GET", "requests") == []
    assert control(sim, "GET", "faults") == []
    assert create_child(api, sim).status_code == 401
    other = requests.post(
        f"{sim.base_url}{UM}/v2/workspaces/parent-2/child",
        json={"title": "Acme", "resources": {}},
        headers={"Authorization": "Bearer other"},
        timeout=5,
    )
    assert other.status_code == 200

    # and a bare reset goes back to the startup seeds
    control(sim, "POST", "reset")
    assert control(sim, "GET", "state")["parentWorkspaces"] == [PARENT]
    assert create_child(api, sim).status_code == 200


def test_added_parent_accepts_children(api, sim):
    # given a parent added at runtime
    control(sim, "POST", "parents", {"id": "parent-9"})

    # when a child is created under it
    response = api.post(
        f"{sim.base_url}{UM}/v2/workspaces/parent-9/child",
        json={"title": "Acme", "resources": {}},
        timeout=5,
    )

    # then it is created there
    assert (response.status_code, response.json()["parent_id"]) == (200, "parent-9")
    assert control(sim, "GET", "state")["parentWorkspaces"] == [PARENT, "parent-9"]


def test_stop_closes_kept_alive_connections():
    # given a private simulator and a session holding a kept-alive connection to it
    private = SemrushSimulator(port=0, token=TOKEN).start()
    session = requests.Session()
    url = f"{private.base_url}{PE}/v1/languages"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert session.get(url, headers=headers, timeout=5).status_code == 200

    # when it is stopped
    private.stop()

    # then the session can no longer reach it
    with pytest.raises(requests.ConnectionError):
        session.get(url, headers=headers, timeout=5)


def test_management_command_serves_with_its_seeds():
    # given the command started on a free port with two parents and a token
    process = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "semrush_simulator",
            "--port",
            "0",
            "--token",
            "cmd-token",
            "--parent",
            "p-1",
            "--parent",
            "p-2",
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # when it prints its listening line
        line = process.stdout.readline()
        assert line.startswith("Semrush simulator listening on http://127.0.0.1:"), line
        base_url = line.split(" on ")[1].split()[0]

        # then it serves the seeded parents and accepts only its token
        state = requests.get(f"{base_url}/__sim/state", timeout=5).json()
        assert state["parentWorkspaces"] == ["p-1", "p-2"]
        child = f"{base_url}{UM}/v2/workspaces/p-2/child"
        body = {"title": "Acme", "resources": {}}
        ok = requests.post(child, json=body, headers={"Authorization": "Bearer cmd-token"})
        refused = requests.post(child, json=body, headers={"Authorization": "Bearer dev-token"})
        assert (ok.status_code, refused.status_code) == (200, 401)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
    assert process.returncode == 0


def test_rate_limit_is_per_bearer_token_and_tokens_can_be_added():
    import json as _json
    import urllib.request

    from provisioning.simulator import SemrushSimulator

    sim = SemrushSimulator(port=0, token="first", parents=["p1"]).start()
    try:
        # given a second accepted token (control route) and a limit of 1 request/s per token
        request = urllib.request.Request(
            f"{sim.base_url}/__sim/tokens",
            data=_json.dumps({"token": "second"}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as answer:
            assert _json.loads(answer.read()) == {"token": "second"}
        sim.configure({"rateLimitPerSecond": 1, "retryAfterSeconds": 7})

        def status(token: str) -> tuple[int, str | None]:
            req = urllib.request.Request(
                f"{sim.base_url}/enterprise/projects/api/v1/languages",
                headers={"Authorization": f"Bearer {token}"},
            )
            try:
                with urllib.request.urlopen(req) as answer:
                    return answer.status, answer.headers.get("Retry-After")
            except urllib.error.HTTPError as exc:
                return exc.code, exc.headers.get("Retry-After")

        # when each token sends two requests at once
        # then each token's second is 429 with Retry-After; the other token is not held back
        assert status("first") == (200, None)
        assert status("first") == (429, "7")
        assert status("second") == (200, None)
        assert status("second") == (429, "7")
        assert status("third")[0] == 401
        # and a reset forgets the added token
        sim.reset()
        assert status("second")[0] == 401
    finally:
        sim.stop()


def test_a_snapshot_restored_in_another_simulator_keeps_workspaces_projects_and_prompts(api, sim):
    # given a settled workspace, a project publishing for an hour, one still a draft, a prompt
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    published = api.post(projects, json=project_body(), timeout=5).json()["id"]
    draft = api.post(projects, json=project_body(name="US-es"), timeout=5).json()["id"]
    configure(sim, publishSeconds=3600)
    assert api.post(f"{projects}/{published}/publish", timeout=5).status_code == 202
    tagged = f"{sim.base_url}{PE}/v3/workspaces/{workspace_id}/projects/{draft}/aio/prompts/tagged"
    prompt = {"prompts": [{"name": "best shoes", "tags": ["t"]}]}
    assert api.post(tagged, json=prompt, timeout=5).status_code == 201
    before = sim.state()
    # when its snapshot, through JSON, is restored in a fresh simulator (a restart)
    restarted = SemrushSimulator(port=0, token=TOKEN, parents=[PARENT]).start()
    try:
        restarted.restore(json.loads(json.dumps(sim.snapshot())))
        after = restarted.state()
        url = f"{restarted.base_url}{PE}/v1/workspaces/{workspace_id}/projects/{published}"
        read = api.get(url, params={"draft": "true", "type": "ai"}, timeout=5)
        again = api.post(tagged.replace(sim.base_url, restarted.base_url), json=prompt, timeout=5)
    finally:
        restarted.stop()
    # then it reads the same, a publish in flight still publishing, prompts still deduped
    assert after == before
    assert [p["publishStatus"] for p in after["projects"]] == ["publishing", "draft"]
    assert (read.status_code, read.json()["publish_status"]) == (200, "publishing")
    assert again.json()["items"][0]["is_new"] is False


def test_the_command_keeps_its_state_file_across_restarts(tmp_path):
    # given the command with a state file, and a workspace created through it
    state_file = tmp_path / "simulator-state.json"

    def serve() -> tuple[subprocess.Popen[str], str]:
        process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "semrush_simulator",
                "--port",
                "0",
                "--token",
                "t",
                "--parent",
                "p-1",
                "--state-file",
                str(state_file),
            ],
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = process.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("Semrush simulator listening on "), line
        return process, line.split(" on ")[1].split()[0]

    def stop(process: subprocess.Popen[str]) -> None:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
        assert process.returncode == 0

    first, base_url = serve()
    try:
        created = requests.post(
            f"{base_url}{UM}/v2/workspaces/p-1/child",
            json={"title": "Kept", "resources": {}},
            headers={"Authorization": "Bearer t"},
            timeout=5,
        )
        assert created.status_code == 200
    finally:
        stop(first)
    # when it is started again
    second, base_url = serve()
    try:
        state = requests.get(f"{base_url}/__sim/state", timeout=5).json()
    finally:
        stop(second)
    # then
    assert [(ws["id"], ws["title"]) for ws in state["workspaces"]] == [
        (created.json()["id"], "Kept")
    ]
    assert state["parentWorkspaces"] == ["p-1"]


# --- drift control routes (SPEC §13.1) --------------------------------------------------------


def test_drift_routes_change_a_project_and_a_workspace_as_semrush_ui_would(api, sim):
    # given a settled workspace with a published project
    workspace_id = settled_workspace(api, sim)
    configure(sim, publishSeconds=0)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    project_id = api.post(projects, json=project_body(), timeout=5).json()["id"]
    api.post(f"{projects}/{project_id}/publish", timeout=5)

    # when the project is unpublished and its domain edited, and the workspace fails
    drifted = control(
        sim, "POST", f"projects/{project_id}", {"publishStatus": "draft", "domain": "evil.com"}
    )
    failed = control(sim, "POST", f"workspaces/{workspace_id}", {"status": "invalid subscription"})

    # then the listing shows what changed, and so do the workspace's status and its family entry
    assert drifted == {"id": project_id, "publishStatus": "draft", "domain": "evil.com"}
    assert failed == {"id": workspace_id, "status": "invalid subscription"}
    [listed] = api.get(projects, params={"type": "ai"}, timeout=5).json()["items"]
    assert (listed["publish_status"], listed["domain"]) == ("draft", "evil.com")
    assert workspace_status(api, sim, workspace_id) == "invalid subscription"
    family = api.get(f"{sim.base_url}{UM}/v1/workspaces/{PARENT}/family", timeout=5).json()
    assert [w["status"] for w in family if w["id"] == workspace_id] == ["invalid subscription"]


def test_drift_routes_refuse_unknown_ids_and_bad_bodies(sim):
    def post(name: str, body: Any) -> requests.Response:
        return requests.post(f"{sim.base_url}/__sim/{name}", json=body, timeout=5)

    assert post("projects/nope", {"publishStatus": "draft"}).status_code == 404
    assert post("workspaces/nope", {"status": "creation failed"}).status_code == 404
    assert post(f"workspaces/{PARENT}", {"status": ""}).status_code == 400
    assert post(f"workspaces/{PARENT}", {"color": "red"}).status_code == 400
    assert requests.get(f"{sim.base_url}/__sim/workspaces/{PARENT}", timeout=5).status_code == 405


def test_a_held_prompt_pushed_again_with_tags_gets_them_attached(api, sim):
    # given a project holding "acme login" tagged "a"
    workspace_id = settled_workspace(api, sim)
    projects = f"{sim.base_url}{PE}/v1/workspaces/{workspace_id}/projects"
    project_id = api.post(projects, json=project_body(), timeout=5).json()["id"]
    url = tagged_prompts_url(sim, workspace_id, project_id)
    api.post(url, json={"prompts": [{"name": "acme login", "tags": ["a"]}]}, timeout=5)

    # when it is pushed again with other tags
    again = api.post(url, json={"prompts": [{"name": "acme login", "tags": ["b"]}]}, timeout=5)

    # then it is not new, and Semrush stacked the tags on it (as Adobe saw)
    assert again.json()["existing_count"] == 1
    assert [p["tags"] for p in control(sim, "GET", "state")["prompts"]] == [["a", "b"]]
