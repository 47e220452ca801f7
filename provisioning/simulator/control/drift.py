"""The simulator's drift control routes (SPEC §13.1): change upstream state as someone in
Semrush's own UI would, behind the service's back.

- ``POST /__sim/projects/{projectId}`` ``{publishStatus?, domain?, primaryUrl?}``: the project's
  publish status is forced to ``publishStatus`` until its next publish (any string Semrush
  answers: ``draft``, ``initial_publish_failed``, …), its ``domain`` and tracked URL
  (``settings.ai.primary_url``) set. Unknown project → 404.
- ``POST /__sim/workspaces/{workspaceId}`` ``{status}``: the workspace's status is forced
  (``creation failed``, ``invalid subscription``, …) from now on. Unknown workspace → 404.

Both answer 200 with what they set. Validation errors → 400 ``{message}``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from provisioning.simulator.control.routing import ControlRoute
from provisioning.simulator.wire import SimulatorConfigError, _json, _Response

if TYPE_CHECKING:
    from provisioning.simulator.control.api import ControlAPI

PROJECT_ROUTE = re.compile(r"^projects/(?P<id>[^/]+)$")
WORKSPACE_ROUTE = re.compile(r"^workspaces/(?P<id>[^/]+)$")


class DriftControlError(ValueError):
    """A drift control body that cannot be applied (→ 400)."""


def drift_route(name: str) -> bool:
    """Whether `name` (a control path after ``/__sim/``) is one of the drift routes."""
    return bool(PROJECT_ROUTE.match(name) or WORKSPACE_ROUTE.match(name))


def drift_apply(
    *, name: str, data: Any, projects: dict[str, Any], workspaces: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    """Apply a drift control request to the simulator's state (the caller holds its lock):
    the status and JSON body to answer. Raises `DriftControlError`."""
    if not isinstance(data, dict):
        raise DriftControlError("body must be a JSON object")
    project_match = PROJECT_ROUTE.match(name)
    if project_match is not None:
        project = projects.get(project_match["id"])
        if project is None:
            return 404, {"message": "unknown project"}
        return 200, _project_drift(project, data)
    workspace_match = WORKSPACE_ROUTE.match(name)
    assert workspace_match is not None
    workspace = workspaces.get(workspace_match["id"])
    if workspace is None:
        return 404, {"message": "unknown workspace"}
    status = data.get("status")
    if not isinstance(status, str) or not status.strip() or set(data) - {"status"}:
        raise DriftControlError("body must be {status: <non-empty string>}")
    workspace.forced_status = status
    return 200, {"id": workspace.id, "status": status}


def _project_drift(project: Any, data: dict[str, Any]) -> dict[str, Any]:
    allowed = {"publishStatus", "domain", "primaryUrl"}
    if not data or set(data) - allowed:
        raise DriftControlError(f"body must hold some of {sorted(allowed)} and nothing else")
    for key in allowed & set(data):
        if data[key] is not None and not isinstance(data[key], str):
            raise DriftControlError(f"{key} must be a string or null")
    if "publishStatus" in data:
        project.forced_publish_status = data["publishStatus"]
    if "domain" in data:
        project.domain = data["domain"]
    if "primaryUrl" in data:
        project.primary_url = data["primaryUrl"]
    return {"id": project.id, **data}


def _drift(sim: ControlAPI, params: dict[str, str], data: Any, name: str) -> _Response:
    try:
        with sim._lock:
            status, body = drift_apply(
                name=name, data=data, projects=sim._projects, workspaces=sim._workspaces
            )
    except DriftControlError as exc:
        raise SimulatorConfigError(str(exc)) from None
    return _json(status, body)


def _project(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _drift(sim, params, data, f"projects/{params['id']}")


def _workspace(sim: ControlAPI, params: dict[str, str], data: Any) -> _Response:
    return _drift(sim, params, data, f"workspaces/{params['id']}")


ROUTES = [
    ControlRoute("projects/{id}", {"POST": _project}),
    ControlRoute("workspaces/{id}", {"POST": _workspace}),
]
