"""User Manager's workspaces: create a child, read its status and its family, delete it."""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from typing import Any

import orjson

from provisioning.simulator.state import SimulatorBase, _Workspace, compile_routes
from provisioning.simulator.wire import (
    _WS,
    UM_PREFIX,
    _json,
    _now_iso,
    _Request,
    _Response,
    _without_nulls,
)


class WorkspaceOperations(SimulatorBase):
    """The User Manager operations (lock held)."""

    def _live_project_counts(self, now: float) -> Counter[str]:
        """Live (published) projects per workspace, in one pass over the projects."""
        return Counter(
            project.workspace_id
            for project in self._projects.values()
            if project.publish_status(now).startswith("live")
        )

    def _workspace_payload(
        self, workspace: _Workspace, now: float, live_counts: Counter[str] | None = None
    ) -> dict[str, Any]:
        # A family listing passes the counts it computed once: counting here for each workspace
        # made a listing cost workspaces x projects.
        counts = live_counts if live_counts is not None else self._live_project_counts(now)
        published = counts.get(workspace.id, 0)
        payload = {
            "id": workspace.id,
            "title": workspace.title,
            "status": workspace.status(now),
            "parent_id": workspace.parent_id,
            "created_at": workspace.created_at,
            "last_updated_at": workspace.created_at,
            "is_master": workspace.parent_id is None,
            "is_admin": True,
            "users": 1,
            "keywords_count": 0,
            "published_projects_count": published,
            "pagespeed_urls_count": 0,
            "partnership_enabled": False,
        }
        return _without_nulls(payload)

    def _op_create_child(self, request: _Request) -> _Response:
        parent = self._workspace(request.params["ws"])
        data = self._body(request, text_errors=False)
        title = data.get("title")
        if not isinstance(title, str) or not title.strip():
            return _json(400, {"message": "title is required"})
        if not isinstance(data.get("resources"), dict):
            return _json(400, {"message": "resources is required"})
        workspace = _Workspace(
            id=str(uuid.uuid4()),
            title=title,
            parent_id=parent.id,
            is_seed_parent=False,
            created_at=_now_iso(),
            created_mono=time.monotonic(),
            settle_seconds=float(self._config["settleSeconds"]),
            outcome=self._config["settleOutcome"],
        )
        self._workspaces[workspace.id] = workspace
        # A new workspace has no projects: no need to count them over every project.
        return _json(200, self._workspace_payload(workspace, time.monotonic(), Counter()))

    def _op_workspace_status(self, request: _Request) -> _Response:
        workspace = self._workspace(request.params["ws"])
        return _json(200, {"status": workspace.status(time.monotonic())})

    def _op_family(self, request: _Request) -> _Response:
        root = self._workspace(request.params["ws"])
        # One pass over the workspaces per level, with a set of the level's ids (a list made
        # each listing cost workspaces x children).
        family, frontier = [root], {root.id}
        while frontier:
            children = [ws for ws in self._workspaces.values() if ws.parent_id in frontier]
            family.extend(children)
            frontier = {ws.id for ws in children}
        now = time.monotonic()
        counts = self._live_project_counts(now)
        # The listing grows with every brand (a fan-out of 1000 lists ~300 KB per create): each
        # entry is encoded (orjson, compact) once per state it shows, status and live projects
        # being all that changes in a workspace; a listing joins them.
        entries = self._family_entries
        parts = []
        for ws in family:
            status, published = ws.status(now), counts.get(ws.id, 0)
            entry = entries.get(ws.id)
            if entry is None or entry[0] != status or entry[1] != published:
                encoded = orjson.dumps(self._workspace_payload(ws, now, counts))
                entry = entries[ws.id] = (status, published, encoded)
            parts.append(entry[2])
        return _Response(200, b"[" + b",".join(parts) + b"]", "application/json")

    def _op_delete_workspace(self, request: _Request) -> _Response:
        workspace = self._workspace(request.params["ws"])
        if workspace.status(time.monotonic()) != "created":
            return _json(422, {"message": "workspace not ready"})
        if any(ws.parent_id == workspace.id for ws in self._workspaces.values()):
            return _json(422, {"message": "workspace has children"})
        doomed = {pid for pid, p in self._projects.items() if p.workspace_id == workspace.id}
        for project_id in doomed:
            del self._projects[project_id]
        self._prompts = [p for p in self._prompts if p["projectId"] not in doomed]
        del self._workspaces[workspace.id]
        return _json(200, {"id": workspace.id})


_UM = re.escape(UM_PREFIX)
ROUTES = compile_routes(
    [
        (f"{_UM}/v2/workspaces/{_WS}/child", {"POST": WorkspaceOperations._op_create_child}),
        (f"{_UM}/v1/workspaces/{_WS}/status", {"GET": WorkspaceOperations._op_workspace_status}),
        (f"{_UM}/v1/workspaces/{_WS}/family", {"GET": WorkspaceOperations._op_family}),
        (f"{_UM}/v1/workspaces/{_WS}", {"DELETE": WorkspaceOperations._op_delete_workspace}),
    ]
)
