"""The Semrush client's one send path hands every attempt to its recorder (SPEC §13.4): each
attempt with its own `X-Request-Id` (on the wire, on its log line, in the record), its status
(None without an answer), and a recorder that fails never fails the call. Upstream faked with
`responses`; no database."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

import pytest
import responses
from requests.exceptions import ConnectionError

from provisioning.ledger.recorder import object_ids
from provisioning.semrush import SemrushClient, SemrushNetworkError
from provisioning.semrush.calls import SentAttempt

BASE = "https://semrush.test"
UM = f"{BASE}/enterprise/users/api"
PE = f"{BASE}/enterprise/projects/api"
TOKEN = "tok-0123456789abcdef"
WALL_NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
PARENT = "parent-ws-1"
WS = "child ws/1"  # percent-encoded in paths
WS_PATH = "child%20ws%2F1"
PID = "project-1"
CREATE_PROJECT = "projects-post-project"
CREATE_CHILD = "workspace-child-create-v2"


class Recorded:
    def __init__(self, *, fail: bool = False) -> None:
        self.attempts: list[SentAttempt] = []
        self.fail = fail

    def record(self, attempt: SentAttempt) -> None:
        self.attempts.append(attempt)
        if self.fail:
            raise RuntimeError("the ledger is down")


def client(recorder: Recorded) -> SemrushClient:
    return SemrushClient(
        base_url=BASE,
        token=TOKEN,
        sleep=lambda _: None,
        jitter=lambda: 0.0,
        wall_clock=WALL_NOW.timestamp,
        recorder=recorder,
    )


@responses.activate
def test_each_attempt_is_recorded_with_its_own_x_request_id(caplog):
    # given a create answered 429 once, then 201
    recorder = Recorded()
    url = f"{PE}/v1/workspaces/{WS_PATH}/projects"
    responses.post(url, status=429, json={"message": "slow down"})
    responses.post(url, status=201, json={"id": PID, "name": "US"})
    # when the project is created
    with caplog.at_level(logging.INFO, logger="serenity.semrush"):
        client(recorder).create_project(
            workspace_id=WS, name="US", location_id=2840, language="en-id", brand_names=["A"],
            brand_domain="a.example",
        )  # fmt: skip
    # then both attempts were recorded, each with the id it was sent with
    sent = [call.request.headers["X-Request-Id"] for call in responses.calls]
    assert [(a.method, a.status, a.request_id) for a in recorder.attempts] == [
        ("POST", 429, sent[0]),
        ("POST", 201, sent[1]),
    ]
    assert sent[0] != sent[1] and all(str(uuid.UUID(s)) == s for s in sent)
    assert {a.started_at for a in recorder.attempts} == {WALL_NOW.timestamp()}
    assert recorder.attempts[0].path == f"/enterprise/projects/api/v1/workspaces/{WS_PATH}/projects"
    # and each attempt's log line carries its id
    lines = [r for r in caplog.records if r.name == "serenity.semrush"]
    assert [r.x_request_id for r in lines] == sent  # type: ignore[attr-defined]
    assert all(f"x_request_id={s}" in r.getMessage() for r, s in zip(lines, sent, strict=True))
    # and the record names the workspace of the path and the project the answer returned
    assert object_ids(recorder.attempts[1], operation=CREATE_PROJECT) == (WS, PID)
    assert object_ids(recorder.attempts[0], operation=CREATE_PROJECT) == (WS, None)


@responses.activate
def test_an_attempt_without_an_answer_is_recorded_without_a_status():
    recorder = Recorded()
    responses.post(f"{UM}/v2/workspaces/{PARENT}/child", body=ConnectionError("reset"))
    with pytest.raises(SemrushNetworkError):
        client(recorder).create_subworkspace(parent_id=PARENT, title="Acme")
    [attempt] = recorder.attempts
    assert (attempt.method, attempt.status, attempt.response) == ("POST", None, None)
    # a child's create names its parent: the row names no workspace it did not make
    assert object_ids(attempt, operation=CREATE_CHILD) == (None, None)


@responses.activate
def test_a_workspace_create_names_the_child_it_made():
    recorder = Recorded()
    responses.post(
        f"{UM}/v2/workspaces/{PARENT}/child",
        json={"id": "child-9", "title": "Acme", "status": "not ready"},
    )
    client(recorder).create_subworkspace(parent_id=PARENT, title="Acme")
    assert object_ids(recorder.attempts[0], operation=CREATE_CHILD) == ("child-9", None)


@responses.activate
def test_a_failing_recorder_never_fails_the_call(caplog):
    # given a recorder that raises
    recorder = Recorded(fail=True)
    responses.delete(f"{PE}/v1/workspaces/{WS_PATH}/projects/{PID}", status=204)
    # when a project is deleted
    with caplog.at_level(logging.ERROR, logger="serenity.semrush"):
        deleted = client(recorder).delete_project(workspace_id=WS, project_id=PID)
    # then the call answers as always, and the failure is logged
    assert deleted is True
    assert len(recorder.attempts) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        "the upstream call was not recorded"
    ]
    assert object_ids(recorder.attempts[0], operation="projects-delete-project") == (WS, PID)
