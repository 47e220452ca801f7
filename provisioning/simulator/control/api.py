"""The control API in-process: what the control routes do, callable by an embedding test too."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from provisioning.simulator.configuration import validate_config
from provisioning.simulator.faults import _parse_fault
from provisioning.simulator.languages import _LANGUAGES_BY_ID
from provisioning.simulator.state import SimulatorBase, _Project, _Workspace
from provisioning.simulator.wire import _decoded, _now_iso


class ControlAPI(SimulatorBase):
    """Reset, seed, configure, script faults and read the state and the logs."""

    _startup_token: str
    _startup_parents: list[str]
    _startup_config: dict[str, Any]

    def reset(self, *, parents: list[str] | None = None, token: str | None = None) -> None:
        """Forget state, faults, the log and the configuration; seed parents and token."""
        with self._lock:
            self._tokens = [self._startup_token if token is None else token]
            self._config = dict(self._startup_config)
            self._rng = random.Random(self._config["seed"])
            self._workspaces = {}
            self._family_entries = {}
            self._projects = {}
            self._prompts = []
            self._faults = []
            # A new list, so that requests in flight across the reset land in the old one.
            self._requests = []
            self._exchanges = []
            self._rate_windows = {}
            self._in_flight = Counter()
            for parent_id in self._startup_parents if parents is None else parents:
                self.add_parent(parent_id)

    def add_token(self, token: str) -> None:
        """Accept `token` too, until the next reset (each token has its own rate limit)."""
        with self._lock:
            if token not in self._tokens:
                self._tokens.append(token)

    def add_parent(self, workspace_id: str, title: str | None = None) -> None:
        with self._lock:
            if workspace_id in self._workspaces:
                return
            self._workspaces[workspace_id] = _Workspace(
                id=workspace_id,
                title=title or f"Parent {workspace_id}",
                parent_id=None,
                is_seed_parent=True,
                created_at=_now_iso(),
                created_mono=time.monotonic(),
                settle_seconds=0.0,
                outcome="created",
            )

    def configure(self, updates: Mapping[str, Any]) -> dict[str, Any]:
        clean = validate_config(updates)
        with self._lock:
            self._config.update(clean)
            if "seed" in clean:
                self._rng = random.Random(clean["seed"])
            return dict(self._config)

    def config(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._config)

    def add_fault(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        fault = _parse_fault(spec)
        with self._lock:
            self._faults.append(fault)
            return fault.as_dict()

    def faults(self) -> list[dict[str, Any]]:
        with self._lock:
            return [fault.as_dict() for fault in self._faults]

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def state(self) -> dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            return {
                "workspaces": [
                    {
                        "id": ws.id,
                        "title": ws.title,
                        "status": ws.status(now),
                        "parentId": ws.parent_id,
                    }
                    for ws in self._workspaces.values()
                    if not ws.is_seed_parent
                ],
                "projects": [
                    {
                        "id": project.id,
                        "workspaceId": project.workspace_id,
                        "name": project.name,
                        "locationId": project.location_id,
                        "language": project.language.code,
                        "publishStatus": project.publish_status(now),
                        "primaryUrl": project.primary_url,
                    }
                    for project in self._projects.values()
                ],
                "parentWorkspaces": [
                    ws.id for ws in self._workspaces.values() if ws.is_seed_parent
                ],
                "prompts": [dict(prompt) for prompt in self._prompts],
            }

    def snapshot(self) -> dict[str, Any]:
        """What `restore` needs to bring the API state (workspaces, projects, prompts) back in
        another process: JSON-ready, with each clock reading as a wall-clock time (a restart
        does not rewind a settle or a publish). Faults, the logs, the config and extra tokens
        are not kept."""
        offset = time.time() - time.monotonic()
        with self._lock:
            workspaces = [
                {**vars(ws), "created_mono": ws.created_mono + offset}
                for ws in self._workspaces.values()
            ]
            projects = []
            for project in self._projects.values():
                started, wall = project.publish_started_mono, project.publish_started_wall
                projects.append(
                    {
                        **vars(project),
                        "language": project.language.id,
                        "publish_started_mono": None if started is None else started + offset,
                        "publish_started_wall": wall and wall.isoformat(),
                    }
                )
            prompts = [dict(prompt) for prompt in self._prompts]
        return {"workspaces": workspaces, "projects": projects, "prompts": prompts}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Replace the API state with a `snapshot`'s (the seeded parents are kept)."""
        offset = time.time() - time.monotonic()
        with self._lock:
            for item in snapshot["workspaces"]:
                ws = _Workspace(**{**item, "created_mono": item["created_mono"] - offset})
                self._workspaces[ws.id] = ws
            for item in snapshot["projects"]:
                started, wall = item["publish_started_mono"], item["publish_started_wall"]
                project = _Project(
                    **{
                        **item,
                        "language": _LANGUAGES_BY_ID[item["language"]],
                        "publish_started_mono": None if started is None else started - offset,
                        "publish_started_wall": wall and datetime.fromisoformat(wall),
                    }
                )
                self._projects[project.id] = project
            self._prompts = [dict(prompt) for prompt in snapshot["prompts"]]
            self._family_entries.clear()

    def requests_log(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(entry) for entry in self._requests]

    def exchanges(self) -> list[dict[str, Any]]:
        """The API exchanges answered since the last reset while `recordExchanges` was on,
        oldest answer first: `{method, path, query, status, scripted, request, answer}` with
        each body decoded (JSON; text when it is not JSON; null when empty)."""
        with self._lock:
            recorded = list(self._exchanges)
        return [
            {
                "method": item["entry"]["method"],
                "path": item["entry"]["path"],
                "query": item["entry"]["query"],
                "status": item["entry"]["status"],
                "scripted": item["scripted"],
                "request": _decoded(item["request"]),
                "answer": _decoded(item["answer"]),
            }
            for item in recorded
        ]
