"""Shared assertion helpers for the API integration tests (SPEC §4, §7).

`assert_error` checks the one error envelope and that nothing of upstream leaks into it;
`assert_clean` applies the leak checks to any body (success bodies too). Upstream paths are
spelled here once, so tests compare the simulator's request log against readable expectations.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings

from jobs.models import FINISHED_STATUSES, AsyncJob
from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market, Prompt

UM = "/enterprise/users/api"
PE = "/enterprise/projects/api"

# Texts that only upstream bodies carry (simulator and real Semrush): none may reach a client.
UPSTREAM_TEXTS = (
    "internal server error",
    "invalid access attempt",
    "service unavailable",
    "not authenticated",
    "rate limit exceeded",
    "404 page not found",
    "workspace not ready",
    "request body must be",
    "/enterprise/",
    "__sim",
)
ENVELOPE_KEYS = {"error", "message", "details"}


# --- Upstream paths (as the simulator logs them: no host, no query string) ----------------------


def family(parent_id: str) -> tuple[str, str]:
    return ("GET", f"{UM}/v1/workspaces/{parent_id}/family")


def create_child(parent_id: str) -> tuple[str, str]:
    return ("POST", f"{UM}/v2/workspaces/{parent_id}/child")


def status_read(workspace_id: str) -> tuple[str, str]:
    return ("GET", f"{UM}/v1/workspaces/{workspace_id}/status")


def assert_settle_reads(made: list[tuple[str, str]], workspace_id: str) -> None:
    """`made` is a settle of `workspace_id`: one status read or more, and nothing else (a sync
    request reads until the workspace is ready, SPEC §4; how many reads that takes is the
    simulator's timing, not the test's)."""
    assert made, "no status read of the workspace"
    assert made == [status_read(workspace_id)] * len(made), made


def list_projects(workspace_id: str) -> tuple[str, str]:
    return ("GET", f"{PE}/v1/workspaces/{workspace_id}/projects")


def create_project(workspace_id: str) -> tuple[str, str]:
    return ("POST", f"{PE}/v1/workspaces/{workspace_id}/projects")


def set_tracked_url(workspace_id: str, project_id: str) -> tuple[str, str]:
    return ("PATCH", f"{PE}/v1/workspaces/{workspace_id}/projects/{project_id}")


def publish(workspace_id: str, project_id: str) -> tuple[str, str]:
    return ("POST", f"{PE}/v1/workspaces/{workspace_id}/projects/{project_id}/publish")


def read_project(workspace_id: str, project_id: str) -> tuple[str, str]:
    """The read that confirms a publish (its query `draft=true&type=ai` is not in the path)."""
    return ("GET", f"{PE}/v1/workspaces/{workspace_id}/projects/{project_id}")


def delete_project(workspace_id: str, project_id: str) -> tuple[str, str]:
    return ("DELETE", f"{PE}/v1/workspaces/{workspace_id}/projects/{project_id}")


def languages() -> tuple[str, str]:
    return ("GET", f"{PE}/v1/languages")


def calls(sim: Any) -> list[tuple[str, str]]:
    """(method, path) of every upstream request since the last reset, oldest first."""
    return [(entry["method"], entry["path"]) for entry in sim.requests_log()]


def calls_with_status(sim: Any) -> list[tuple[str, str, int | None]]:
    return [(e["method"], e["path"], e["status"]) for e in sim.requests_log()]


def mark(sim: Any) -> int:
    """The current length of the request log: `calls_since(sim, mark(sim))` reads what came next."""
    return len(sim.requests_log())


def calls_since(sim: Any, start: int) -> list[tuple[str, str]]:
    return calls(sim)[start:]


def wait_until_settled(sim: Any, workspace_id: str, timeout: float = 5.0) -> None:
    """Wait (on the simulator's own clock) until a workspace leaves `not ready`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = {w["id"]: w["status"] for w in sim.state()["workspaces"]}.get(workspace_id)
        if status != "not ready":
            return
        time.sleep(0.05)
    raise AssertionError(f"workspace {workspace_id} did not settle")


# --- Bodies -------------------------------------------------------------------------------------


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def stamps(row: Brand | Market) -> dict[str, str]:
    """`createdAt`/`updatedAt` of a row as the API renders them."""
    row.refresh_from_db()
    return {"createdAt": iso(row.created_at), "updatedAt": iso(row.updated_at)}


def db_counts() -> dict[str, int]:
    """Rows a failed request must not have written."""
    return {
        "brands": Brand.objects.count(),
        "markets": Market.objects.count(),
        "attempts": ProvisioningAttempt.objects.count(),
        "jobs": AsyncJob.objects.count(),
        "prompts": Prompt.objects.count(),
    }


def db_counts_but_ended_sync_jobs() -> dict[str, int]:
    """`db_counts()` without the job rows of sync work that has ended: a failed sync request
    leaves its chain's rows, ended (SPEC §13.5), and nothing else."""
    counts = db_counts()
    counts["jobs"] = AsyncJob.objects.exclude(mode="sync", status__in=FINISHED_STATUSES).count()
    return counts


def sync_chains() -> list[tuple[str, str]]:
    """Every chain (root row) as (mode, effective status): what sync work leaves behind
    (SPEC §13.5: its job rows, ended)."""
    roots = AsyncJob.objects.filter(root__isnull=True).select_related("current")
    return [(root.mode, str((root.current or root).status)) for root in roots]


def upstream_ids(sim: Any) -> set[str]:
    """Every workspace, parent and project id the simulator knows."""
    state = sim.state()
    return (
        {w["id"] for w in state["workspaces"]}
        | {p["id"] for p in state["projects"]}
        | set(state["parentWorkspaces"])
    )


def foreign_ids(sim: Any, *, own: Iterable[str | None] = ()) -> set[str]:
    """Upstream ids a caller does not own: everything the simulator knows minus `own` (the
    brand's own pointer and project ids, which the API legitimately returns)."""
    return upstream_ids(sim) - {i for i in own if i}


def assert_clean(response: Any, *, forbidden: Iterable[str] = ()) -> None:
    """No upstream URL, token, upstream error text or foreign upstream id in the body."""
    raw = response.content.decode("utf-8", errors="replace")
    lowered = raw.lower()
    base_url = getattr(settings, "SEMRUSH_BASE_URL", "")
    if base_url:
        assert base_url.lower() not in lowered, raw
    token = getattr(settings, "SEMRUSH_API_TOKEN", "")
    if token:
        assert token not in raw, raw
    assert "bearer " not in lowered, raw
    for text in UPSTREAM_TEXTS:
        assert text not in lowered, (text, raw)
    for upstream_id in forbidden:
        assert upstream_id not in raw, (upstream_id, raw)


def assert_error(
    response: Any, status: int, code: str, *, forbidden: Iterable[str] = ()
) -> dict[str, Any]:
    """The exact error envelope of SPEC §4: `{"error", "message"[, "details"]}`, the message
    one line of at most 500 characters, and nothing of upstream in the body (`assert_clean`).
    `forbidden` are upstream ids the caller does not own (see `foreign_ids`). Returns the body.
    """
    body = response.json()
    assert response.status_code == status, (response.status_code, body)
    assert isinstance(body, dict), body
    assert set(body) <= ENVELOPE_KEYS and {"error", "message"} <= set(body), body
    assert body["error"] == code, body
    message = body["message"]
    assert isinstance(message, str) and message.strip(), body
    assert "\n" not in message and "\r" not in message, body
    assert len(message) <= 500, body
    # The simulator's 404 body is {"message": "not found"}; our own say what was not found.
    assert message.strip().lower() != "not found", body
    if "details" in body:
        assert body["details"] is None or isinstance(body["details"], dict), body
    assert_clean(response, forbidden=forbidden)
    return body


def assert_no_upstream_calls(sim: Any, start: int = 0) -> None:
    assert calls_since(sim, start) == []


def dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


# --- Arranging upstream state directly (as another client of the same Semrush account would) ----


def sim_request(sim: Any, method: str, path: str, body: Any = None) -> Any:
    import requests

    response = requests.request(
        method,
        f"{sim.base_url}{path}",
        json=body,
        headers={"Authorization": f"Bearer {settings.SEMRUSH_API_TOKEN}"},
        timeout=5,
    )
    assert response.status_code < 300, (response.status_code, response.text)
    return response.json() if response.content else None


def sim_create_workspace(sim: Any, title: str, *, settle: bool = True) -> str:
    """A sub-workspace of the sim's parent made outside the service; waits until it settled."""
    created = sim_request(
        sim, "POST", f"{UM}/v2/workspaces/{sim.parent_id}/child", {"title": title, "resources": {}}
    )
    if settle:
        wait_until_settled(sim, created["id"])
    return str(created["id"])


def sim_create_project(
    sim: Any, workspace_id: str, *, name: str = "Stray", location_id: int = 2840
) -> str:
    from provisioning.simulator.server import language_id

    created = sim_request(
        sim,
        "POST",
        f"{PE}/v1/workspaces/{workspace_id}/projects",
        {
            "name": name,
            "type": "ai",
            "domain": "stray.example",
            "location_id": location_id,
            "language_id": language_id("English"),
        },
    )
    return str(created["id"])
