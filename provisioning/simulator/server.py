"""An in-memory fake of the Semrush enterprise write APIs ("User Manager" and "Project Engine").

Pure standard library, no Django, so that tests can embed it and ``manage.py semrush_simulator``
can serve it. SPEC §5.1 is the contract; upstream shapes follow Semrush's own contract as the
project describes it (``provisioning.semrush.contract``, SPEC §12.1; quirks observed live from
``shared/reference/semrush-upstream.md`` §2 and §7): field types as documented (``users`` and
``shared_with`` are integers), and a member with no value is left out, never ``null``.

Embedding::

    sim = SemrushSimulator(port=0, token="t", parents=["parent-1"]).start()
    ...  # talk to sim.base_url over HTTP
    sim.stop()

Upstream surface (``UM`` = ``/enterprise/users/api``, ``PE`` = ``/enterprise/projects/api``):

- ``POST UM/v2/workspaces/{parentId}/child`` ``{title, resources: {}}`` → 200 workspace object,
  ``status: "not ready"``; the parent must be a known workspace (a seeded parent or any workspace
  created here), else 403.
- ``GET UM/v1/workspaces/{id}/status`` → ``{status}``; ``GET UM/v1/workspaces/{id}/family`` → a
  bare array of workspace objects: the workspace itself followed by all of its descendants.
- ``DELETE UM/v1/workspaces/{id}`` → 200 ``{id}`` (cascades to projects; 422 while the workspace
  is not ``created`` or has children). There is no ``deleting`` window: later reads answer 403 at
  once. Not in SPEC §5; it lets tests delete a workspace "outside the service".
- ``GET|POST PE/v1/workspaces/{ws}/projects`` (list needs ``type=ai``, else 500),
  ``GET|PATCH|DELETE PE/v1/workspaces/{ws}/projects/{pid}`` (GET needs ``draft``, PATCH needs
  ``type``, else 400 text/plain), ``POST …/{pid}/publish`` → 202 with an empty body,
  ``POST PE/v3/workspaces/{ws}/projects/{pid}/aio/prompts/tagged``
  ``{prompts: [{name, tags: [tag names]}]}`` → 201 ``{items: [{id, name, is_new}],
  existing_count}`` (deduped by name within the project: a name held already answers its id
  with ``is_new: false``), ``GET PE/v1/languages`` → ``{items: [{id, name}]}``. The v1
  ``POST …/{pid}/prompts`` of revisions 1-5 does not exist upstream: 404
  ``{"message": "not found"}``, as the gateway answers.

Error shapes mirror upstream: missing or wrong bearer → 401 ``{"detail": "Not authenticated"}``;
unknown workspace → 403 ``{"message": "invalid access attempt"}`` on every route; unknown project
→ 404 ``{"message": "not found"}``; a Project Engine write (create, patch, publish, delete,
prompts) against a workspace whose status is not ``created`` → 500
``{"message": "internal server error"}`` (reference §7.1 rule 6, the "not-ready lock");
``language_id`` outside the catalogue → 500 likewise; validation errors from the Project Engine are
400 ``text/plain``; unrouted paths → 404 with a bare text body; a known path with another method →
405 JSON. A request body that breaks the contract description → 400 before the operation runs:
``text/plain`` on the Project Engine v1 routes, ``{"message": "invalid request body", "errors":
{"body": [problems]}}`` on User Manager and the v3 routes (the contract's error body).

Request pipeline for every non-control request, in this order: the request is logged (arrival
order) → concurrency limit (429, the token read at arrival) → ``latencyMs`` sleep → bearer
check (401) → rate limit (429 with ``Retry-After``; only
requests that pass it count toward the limit) → the first matching scripted fault, if any, is
consumed → ``errorRate5xx`` (503 ``{"message": "service unavailable"}``, drawn from a
``random.Random`` seeded by ``seed``; never applied to a ``commit`` fault's operation) → the
operation. A log entry's ``status`` is filled in before the response is written (``0`` for a
dropped connection; ``null`` only while the request is still in flight).

Control routes (``/__sim/…``, no token, never logged; ``control/``, one module per set of routes):

- ``POST /__sim/reset`` — forget all state, faults, the request log and the configuration, back to
  the startup seeds. ``{parentWorkspaces, token}`` in the body replace the seeds for this reset
  only; a later bare reset goes back to the startup seeds.
- ``POST /__sim/parents`` ``{id, title?}`` — add a parent workspace (status ``created``).
- ``POST /__sim/tokens`` ``{token}`` — accept one more bearer token until the next reset (an
  extension: two organizations with their own credentials; SPEC's reset still sets "the one
  token" of a fresh simulator). ``rateLimitPerSecond`` counts each accepted token on its own,
  as Semrush limits each credential (SPEC §10.6).
- ``GET|POST /__sim/config`` — read / merge the configuration (unknown keys or bad values → 400).
- ``GET|POST|DELETE /__sim/faults`` — list / add / clear scripted faults. Besides SPEC's fields a
  fault may carry ``headers``; a scripted 429 without ``Retry-After`` gets ``retryAfterSeconds``.
  A string ``body`` is sent as text/plain, anything else but null as JSON, null/absent as an
  empty body.
- ``GET /__sim/state`` — ``{workspaces, projects}`` as in SPEC §5.1. Choice: ``workspaces`` lists
  only workspaces created through the API (children), never the seeded parents, so "exactly one
  child was created" is ``len(state["workspaces"]) == 1``. Two extra top-level keys:
  ``parentWorkspaces`` (the parent ids) and ``prompts`` (``[{id, projectId, text, tags}]``,
  ``text`` being the prompt's ``name`` upstream).
- ``GET /__sim/requests`` — ``[{method, path, query, status, at, durationMs}]``, oldest first
  (``at`` the arrival, ``durationMs`` arrival to answer, null while in flight: calls in flight at
  any moment can be counted from the log).
- ``GET /__sim/exchanges`` — each API exchange since the reset, answered while the config's
  ``recordExchanges`` (an extension, default false) was on: ``[{method, path, query, status,
  scripted, request, answer}]``, oldest answer first, bodies decoded (JSON, else text, null when
  empty); ``scripted`` marks a fault's scripted answer. Tests validate them against the
  contract description.
- ``GET /__sim/health`` — ``{"status": "ok"}``.
- ``POST /__sim/projects/{id}``, ``POST /__sim/workspaces/{id}`` — drift
  (``simulator.control.drift``).

Times: workspaces take ``settleSeconds``/``settleOutcome`` from the configuration at their
creation and projects take ``publishSeconds`` at publish; statuses are computed from the monotonic
clock when read, so nothing runs in the background. ``rateLimitPerSecond`` null or 0 means no
limit. ``concurrencyLimit`` (per token, null or 0: none): a request arriving while that many of
its token's requests are in flight (arrival to answer, ``latencyMs`` included) → 429 with
``Retry-After: 1``; it is not counted in flight itself. ``retryAfterSeconds: null`` sends every
429 (rate, concurrency, scripted) without ``Retry-After``. ``retryAfterSeconds`` may be
fractional; the header then carries e.g. ``0.5`` (whole numbers are rendered without a decimal
point).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from provisioning.simulator import control, projects, prompts, workspaces
from provisioning.simulator.configuration import (
    DEFAULT_CONFIG,
    PUBLISH_FAILED_REASON,
    PUBLISH_OUTCOMES,
    SETTLE_OUTCOMES,
    validate_config,
)
from provisioning.simulator.control.api import ControlAPI
from provisioning.simulator.control.routing import handle_control
from provisioning.simulator.httpd import _Handler, _Server
from provisioning.simulator.languages import LANGUAGE_NAMESPACE, LANGUAGES, Language, language_id
from provisioning.simulator.pipeline import Pipeline
from provisioning.simulator.projects import ProjectOperations
from provisioning.simulator.prompts import PromptOperations
from provisioning.simulator.wire import (
    CONTROL_PREFIX,
    PE_PREFIX,
    UM_PREFIX,
    SimulatorConfigError,
    _json,
    _Response,
    _text,
)
from provisioning.simulator.workspaces import WorkspaceOperations

# The names this module held before it was split, for code that imports them from here.
__all__ = [
    "CONTROL_PREFIX",
    "DEFAULT_CONFIG",
    "LANGUAGES",
    "LANGUAGE_NAMESPACE",
    "PE_PREFIX",
    "PUBLISH_FAILED_REASON",
    "PUBLISH_OUTCOMES",
    "SETTLE_OUTCOMES",
    "UM_PREFIX",
    "Language",
    "SemrushSimulator",
    "SimulatorConfigError",
    "_Response",
    "_json",
    "_text",
    "language_id",
    "validate_config",
]


class SemrushSimulator(
    ControlAPI, Pipeline, WorkspaceOperations, ProjectOperations, PromptOperations
):
    """A faithful, scriptable fake of the Semrush endpoints the service uses.

    Thread-safe: one re-entrant lock guards all state; sleeps (latency, fault delays) happen
    outside it, so a delayed request never blocks the others.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        token: str = "dev-token",  # noqa: S107 - the well-known local default (SPEC §2)
        parents: list[str] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._startup_token = token
        self._startup_parents = list(parents or [])
        self._startup_config = {**DEFAULT_CONFIG, **validate_config(config or {})}
        self._lock = threading.RLock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._routes = [*workspaces.ROUTES, *projects.ROUTES, *prompts.ROUTES]
        self.reset()

    # ---- lifecycle ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _bind(self) -> _Server:
        if self._server is None:
            self._server = _Server((self.host, self.port), _Handler, self)
            self.port = self._server.server_address[1]
        return self._server

    def start(self) -> SemrushSimulator:
        """Bind (port 0 picks a free port) and serve from a daemon thread; returns self."""
        server = self._bind()
        if self._thread is None:
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"semrush-simulator-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Bind if needed and serve from the calling thread until interrupted or stopped."""
        self._bind().serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Stop serving and close every open connection (keep-alive ones included)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def handle_control(self, method: str, path: str, body: bytes) -> _Response:
        """Answer a control request (`/__sim/…`; called by the handler)."""
        return handle_control(self, control.ROUTES, method, path, body)
