"""Project Engine's projects: list, create, read, patch, publish and delete them; the language
catalogue."""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from provisioning.simulator.configuration import PUBLISH_FAILED_REASON
from provisioning.simulator.languages import _LANGUAGES_BY_ID, LANGUAGES
from provisioning.simulator.state import SimulatorBase, _Project, compile_routes
from provisioning.simulator.wire import (
    _INTERNAL,
    _PID,
    _WS,
    PE_PREFIX,
    _empty,
    _json,
    _now_iso,
    _Request,
    _Response,
    _text,
    _without_nulls,
)


class ProjectOperations(SimulatorBase):
    """The Project Engine's project operations (lock held)."""

    @staticmethod
    def _project_payload(project: _Project, now: float) -> dict[str, Any]:
        publish_status = project.publish_status(now)
        published_at = None
        if publish_status.startswith("live") and project.publish_started_wall is not None:
            stamp = project.publish_started_wall + timedelta(seconds=project.publish_seconds)
            published_at = stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        payload = {
            "id": project.id,
            "name": project.name,
            "domain": project.domain,
            "type": "ai",
            "color": project.color,
            "favourite": False,
            "draft_id": project.draft_id,
            "live_id": project.live_id,
            "is_draft": publish_status == "draft",
            "role": "owner",
            "shared_with": 0,
            "updated_at": project.updated_at,
            "publish_status": publish_status,
            "published_at": published_at,
            "publishing_failed_reason": (
                PUBLISH_FAILED_REASON if publish_status == "initial_publish_failed" else None
            ),
            "settings": {
                "ai": {
                    "location": {"id": project.location_id, "name": project.location_name},
                    "language": {"id": project.language.id, "name": project.language.code},
                    "country": {"code": project.country_code, "name": project.location_name},
                    "primary_url": project.primary_url,
                    "brand_name_display": project.brand_name_display,
                    "brand_names": project.brand_names,
                    "prompts_count": project.prompts_count,
                    "models_stats": {"models_count": 0},
                    "benchmarks_count": 0,
                }
            },
        }
        return _without_nulls(payload)

    def _op_list_projects(self, request: _Request) -> _Response:
        workspace = self._workspace(request.params["ws"])
        if request.query.get("type") != "ai":
            return _json(500, _INTERNAL)
        try:
            page = int(request.query.get("page", "1"))
            limit = int(request.query.get("limit", "100"))
        except ValueError:
            return _text(400, "page and limit must be integers")
        if page < 1 or limit < 1:
            return _text(400, "page and limit must be positive")
        projects = [p for p in self._projects.values() if p.workspace_id == workspace.id]
        now = time.monotonic()
        items = [self._project_payload(p, now) for p in projects[(page - 1) * limit : page * limit]]
        return _json(200, {"page": page, "total": len(projects), "items": items})

    def _op_create_project(self, request: _Request) -> _Response:
        workspace = self._ready_workspace(request.params["ws"])
        data = self._body(request, text_errors=True)
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            return _text(400, "name is required")
        if data.get("type") != "ai":
            return _text(400, "type must be ai")
        domain = data.get("domain")
        if domain is not None and (not isinstance(domain, str) or "/" in domain):
            return _text(400, "domain must be a bare host name")
        location_id = data.get("location_id")
        if not isinstance(location_id, int) or isinstance(location_id, bool):
            return _text(400, "location_id must be an integer")
        optional_strings = ("country_code", "location_name", "brand_name_display", "color")
        for key in optional_strings:
            if data.get(key) is not None and not isinstance(data[key], str):
                return _text(400, f"{key} must be a string")
        brand_names = data.get("brand_names")
        if brand_names is not None and (
            not isinstance(brand_names, list) or not all(isinstance(b, str) for b in brand_names)
        ):
            return _text(400, "brand_names must be a list of strings")
        language_id_ = data.get("language_id")
        language = _LANGUAGES_BY_ID.get(language_id_) if isinstance(language_id_, str) else None
        if language is None:
            return _json(500, _INTERNAL)
        project = _Project(
            id=str(uuid.uuid4()),
            workspace_id=workspace.id,
            name=name,
            domain=domain.lower() if domain else None,
            country_code=data.get("country_code"),
            location_id=location_id,
            location_name=data.get("location_name"),
            language=language,
            brand_name_display=data.get("brand_name_display"),
            brand_names=list(brand_names) if brand_names is not None else None,
            color=data.get("color"),
            draft_id=str(uuid.uuid4()),
            updated_at=_now_iso(),
        )
        # primary_url is accepted at create but ignored upstream; only PATCH sets it.
        self._projects[project.id] = project
        return _json(201, self._project_payload(project, time.monotonic()))

    def _op_get_project(self, request: _Request) -> _Response:
        self._workspace(request.params["ws"])
        if "draft" not in request.query:
            return _text(400, "draft query parameter is required")
        project = self._project(request.params["ws"], request.params["pid"])
        return _json(200, self._project_payload(project, time.monotonic()))

    def _op_patch_project(self, request: _Request) -> _Response:
        self._ready_workspace(request.params["ws"])
        project = self._project(request.params["ws"], request.params["pid"])
        data = self._body(request, text_errors=True)
        if data.get("type") != "ai":
            return _text(400, "type is required and must be ai")
        if "primary_url" in data:
            if data["primary_url"] is not None and not isinstance(data["primary_url"], str):
                return _text(400, "primary_url must be a string")
            project.primary_url = data["primary_url"]
        if "name" in data:
            if not isinstance(data["name"], str) or not data["name"].strip():
                return _text(400, "name must be a non-empty string")
            project.name = data["name"]
        # A nested settings.ai.primary_url is accepted and silently ignored, as upstream does.
        project.touch()
        return _json(200, self._project_payload(project, time.monotonic()))

    def _op_publish_project(self, request: _Request) -> _Response:
        self._ready_workspace(request.params["ws"])
        project = self._project(request.params["ws"], request.params["pid"])
        project.forced_publish_status = None
        project.publish_started_mono = time.monotonic()
        project.publish_started_wall = datetime.now(UTC)
        project.publish_seconds = float(self._config["publishSeconds"])
        project.updated_since_publish = False
        project.publish_fails = self._config["publishOutcome"] == "failed"
        project.live_id = project.live_id or str(uuid.uuid4())
        return _empty(202)

    def _op_delete_project(self, request: _Request) -> _Response:
        self._ready_workspace(request.params["ws"])
        project = self._project(request.params["ws"], request.params["pid"])
        del self._projects[project.id]
        self._prompts = [p for p in self._prompts if p["projectId"] != project.id]
        return _empty(204)

    def _op_languages(self, request: _Request) -> _Response:
        return _json(200, {"items": [{"id": lang.id, "name": lang.name} for lang in LANGUAGES]})


_PROJECTS = f"{re.escape(PE_PREFIX)}/v1/workspaces/{_WS}/projects"
ROUTES = compile_routes(
    [
        (
            _PROJECTS,
            {
                "GET": ProjectOperations._op_list_projects,
                "POST": ProjectOperations._op_create_project,
            },
        ),
        (
            f"{_PROJECTS}/{_PID}",
            {
                "GET": ProjectOperations._op_get_project,
                "PATCH": ProjectOperations._op_patch_project,
                "DELETE": ProjectOperations._op_delete_project,
            },
        ),
        (f"{_PROJECTS}/{_PID}/publish", {"POST": ProjectOperations._op_publish_project}),
        (f"{re.escape(PE_PREFIX)}/v1/languages", {"GET": ProjectOperations._op_languages}),
    ]
)
