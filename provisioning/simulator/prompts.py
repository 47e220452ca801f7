"""Project Engine's prompts: the v3 tagged create (deduped by name within a project), and the v1
route of revisions 1-5 that upstream does not have."""

from __future__ import annotations

import re
import uuid
from typing import Any

from provisioning.simulator.state import SimulatorBase, compile_routes
from provisioning.simulator.wire import (
    _NOT_FOUND,
    _PID,
    _WS,
    PE_PREFIX,
    _json,
    _Request,
    _Response,
)


class PromptOperations(SimulatorBase):
    """The Project Engine's prompt operations (lock held)."""

    def _op_gateway_404(self, request: _Request) -> _Response:
        return _json(404, _NOT_FOUND)

    def _op_create_tagged_prompts(self, request: _Request) -> _Response:
        """Add each prompt (its text is `name`) with its tag names; Semrush dedupes by name
        within the project: a name it holds already (or met earlier in the same request)
        answers that prompt's id with `is_new: false` and adds no prompt, but it still attaches
        the tags it is given to the prompt it holds (tags stack on a re-push: SPEC §13.1)."""
        self._ready_workspace(request.params["ws"])
        project = self._project(request.params["ws"], request.params["pid"])
        data = self._body(request, text_errors=False)
        held = {p["text"]: p["id"] for p in self._prompts if p["projectId"] == project.id}
        items: list[dict[str, Any]] = []
        for prompt in data["prompts"]:
            name = prompt["name"]
            if name in held:
                stacked = next(p for p in self._prompts if p["id"] == held[name])
                stacked["tags"] += [t for t in prompt.get("tags") or [] if t not in stacked["tags"]]
                items.append({"id": held[name], "name": name, "is_new": False})
                continue
            held[name] = str(uuid.uuid4())
            tags = list(prompt.get("tags") or [])
            self._prompts.append(
                {"id": held[name], "projectId": project.id, "text": name, "tags": tags}
            )
            items.append({"id": held[name], "name": name, "is_new": True})
        existing = sum(1 for item in items if not item["is_new"])
        if existing < len(items):
            project.prompts_count += len(items) - existing
            project.touch()
        return _json(201, {"items": items, "existing_count": existing})


_PE = re.escape(PE_PREFIX)
ROUTES = compile_routes(
    [
        # Revisions 1-5 pushed prompts here; upstream has no such route (SPEC §12.1).
        (
            f"{_PE}/v1/workspaces/{_WS}/projects/{_PID}/prompts",
            {"GET": PromptOperations._op_gateway_404, "POST": PromptOperations._op_gateway_404},
        ),
        (
            f"{_PE}/v3/workspaces/{_WS}/projects/{_PID}/aio/prompts/tagged",
            {"POST": PromptOperations._op_create_tagged_prompts},
        ),
    ]
)
