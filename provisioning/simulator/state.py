"""The simulator's state: workspaces and projects as upstream keeps them, and the base every room
of the simulator shares (the attributes under the lock, the lookups operations make)."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from provisioning.simulator.faults import _Fault
from provisioning.simulator.languages import Language
from provisioning.simulator.wire import (
    _FORBIDDEN,
    _INTERNAL,
    _NOT_FOUND,
    _AbortError,
    _json,
    _now_iso,
    _Request,
    _text,
)


@dataclass
class _Workspace:
    id: str
    title: str
    parent_id: str | None
    is_seed_parent: bool
    created_at: str
    created_mono: float
    settle_seconds: float
    outcome: str
    # Set by the drift control route (`simulator.control.drift`): the status from then on.
    forced_status: str | None = None

    def status(self, now: float) -> str:
        if self.forced_status is not None:
            return self.forced_status
        if self.is_seed_parent:
            return "created"
        if self.outcome == "stuck" or now - self.created_mono < self.settle_seconds:
            return "not ready"
        return "created" if self.outcome == "created" else "creation failed"


@dataclass
class _Project:
    id: str
    workspace_id: str
    name: str
    domain: str | None
    country_code: str | None
    location_id: int
    location_name: str | None
    language: Language
    brand_name_display: str | None
    brand_names: list[str] | None
    color: str | None
    draft_id: str
    updated_at: str
    primary_url: str | None = None
    live_id: str | None = None
    publish_started_mono: float | None = None
    publish_started_wall: datetime | None = None
    publish_seconds: float = 0.0
    updated_since_publish: bool = False
    publish_fails: bool = False
    prompts_count: int = 0
    # Set by the drift control route (`simulator.control.drift`) until the next publish.
    forced_publish_status: str | None = None

    def publish_status(self, now: float) -> str:
        if self.forced_publish_status is not None:
            return self.forced_publish_status
        if self.publish_started_mono is None:
            return "draft"
        if now - self.publish_started_mono < self.publish_seconds:
            return "publishing"
        if self.publish_fails:
            return "initial_publish_failed"
        return "live_with_unpublished_updates" if self.updated_since_publish else "live"

    def touch(self) -> None:
        self.updated_at = _now_iso()
        if self.publish_started_mono is not None:
            self.updated_since_publish = True


_Operation = Any  # an unbound operation of one of the rooms: (simulator, request) -> response
Routes = list[tuple[re.Pattern[str], dict[str, _Operation]]]


def compile_routes(table: list[tuple[str, dict[str, _Operation]]]) -> Routes:
    """Anchored patterns for a room's `(regex, {method: operation})` table."""
    return [(re.compile(f"^{regex}$"), operations) for regex, operations in table]


class SimulatorBase:
    """What every room of the simulator holds (set by `SemrushSimulator.reset`) and the lookups
    its operations make. Thread-safe: one re-entrant lock guards all state."""

    _lock: threading.RLock
    _tokens: list[str]
    _config: dict[str, Any]
    _rng: random.Random
    _workspaces: dict[str, _Workspace]
    # A family listing's entries, encoded, by workspace id: (status, live projects, bytes).
    _family_entries: dict[str, tuple[str, int, bytes]]
    _projects: dict[str, _Project]
    _prompts: list[dict[str, Any]]
    _faults: list[_Fault]
    _requests: list[dict[str, Any]]
    _exchanges: list[dict[str, Any]]
    # Per accepted token: the passing requests of the last second.
    _rate_windows: dict[str, deque[float]]
    # Per accepted token: its requests in flight now.
    _in_flight: Counter[str]
    _routes: Routes

    # ---- helpers used by operations (lock held) ------------------------------------------

    def _workspace(self, workspace_id: str) -> _Workspace:
        workspace = self._workspaces.get(workspace_id)
        if workspace is None:
            raise _AbortError(_json(403, _FORBIDDEN))
        return workspace

    def _ready_workspace(self, workspace_id: str) -> _Workspace:
        """A Project Engine write needs a settled workspace; upstream answers 500 otherwise."""
        workspace = self._workspace(workspace_id)
        if workspace.status(time.monotonic()) != "created":
            raise _AbortError(_json(500, _INTERNAL))
        return workspace

    def _project(self, workspace_id: str, project_id: str) -> _Project:
        project = self._projects.get(project_id)
        if project is None or project.workspace_id != workspace_id:
            raise _AbortError(_json(404, _NOT_FOUND))
        return project

    @staticmethod
    def _body(request: _Request, *, text_errors: bool) -> dict[str, Any]:
        try:
            data = json.loads(request.body) if request.body.strip() else None
        except ValueError:
            data = None
        if not isinstance(data, dict):
            message = "request body must be a JSON object"
            raise _AbortError(
                _text(400, message) if text_errors else _json(400, {"message": message})
            )
        return data
