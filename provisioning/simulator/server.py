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

Control routes (``/__sim/…``, no token, never logged):

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
- ``POST /__sim/projects/{id}``, ``POST /__sim/workspaces/{id}`` — drift (``simulator.drift``).

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

import contextlib
import hmac
import json
import math
import random
import re
import socket
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from provisioning.semrush import contract
from provisioning.simulator.drift import DriftControlError, drift_apply, drift_route

UM_PREFIX = "/enterprise/users/api"
PE_PREFIX = "/enterprise/projects/api"
CONTROL_PREFIX = "/__sim/"

SETTLE_OUTCOMES = ("created", "failed", "stuck")

DEFAULT_CONFIG: dict[str, Any] = {
    # About 3 s is what was observed live (reference §5); tests shrink it through /__sim/config.
    "settleSeconds": 3.0,
    "settleOutcome": "created",
    "latencyMs": 0,
    "errorRate5xx": 0.0,
    "seed": 0,
    "rateLimitPerSecond": None,
    # Calls of one token in flight at once (SPEC §11.1); null: no limit.
    "concurrencyLimit": None,
    # null: every 429 (rate, concurrency or scripted) carries no Retry-After.
    "retryAfterSeconds": 1,
    "publishSeconds": 0.0,
    # How a publish ends once `publishSeconds` have passed: `live`, or `failed`
    # (`initial_publish_failed` with a `publishing_failed_reason`), fixed at the publish.
    "publishOutcome": "live",
    # Keep each API exchange's request and answer bodies for `GET /__sim/exchanges` (tests
    # check them against the contract description); off by default: a long run's listings
    # would pile up in memory.
    "recordExchanges": False,
}

PUBLISH_OUTCOMES = ("live", "failed")
PUBLISH_FAILED_REASON = "simulated publish failure"

# Upstream's catalogue has 38 entries with English display names. These names are exactly the
# ISO 639 names pycountry uses, so that the service can map an ISO code to a catalogue id.
LANGUAGE_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://semrush-simulator.invalid/languages")
_LANGUAGE_CODES = (
    ("English", "en"),
    ("German", "de"),
    ("French", "fr"),
    ("Spanish", "es"),
    ("Italian", "it"),
    ("Portuguese", "pt"),
    ("Dutch", "nl"),
    ("Japanese", "ja"),
    ("Polish", "pl"),
    ("Swedish", "sv"),
    ("Danish", "da"),
    ("Finnish", "fi"),
    ("Norwegian", "no"),
    ("Czech", "cs"),
    ("Turkish", "tr"),
    ("Korean", "ko"),
    ("Chinese", "zh"),
    ("Arabic", "ar"),
    ("Hindi", "hi"),
    ("Russian", "ru"),
)


def language_id(name: str) -> str:
    """The stable catalogue id of a language: uuid5 of its English name."""
    return str(uuid.uuid5(LANGUAGE_NAMESPACE, name))


@dataclass(frozen=True)
class Language:
    id: str
    name: str
    code: str


LANGUAGES: tuple[Language, ...] = tuple(
    Language(id=language_id(name), name=name, code=code) for name, code in _LANGUAGE_CODES
)
_LANGUAGES_BY_ID = {language.id: language for language in LANGUAGES}

_UNAUTHORIZED = {"detail": "Not authenticated"}
_FORBIDDEN = {"message": "invalid access attempt"}
_NOT_FOUND = {"message": "not found"}
_INTERNAL = {"message": "internal server error"}
_UNAVAILABLE = {"message": "service unavailable"}


class SimulatorConfigError(ValueError):
    """A control request or constructor argument that the simulator refuses (HTTP 400)."""


# --------------------------------------------------------------------------------------------
# Responses


@dataclass
class _Response:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    # A scripted fault's answer (the test's choice, not the simulator's).
    scripted: bool = False


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> _Response:
    body = json.dumps(payload).encode()
    return _Response(status, body, "application/json", dict(headers or {}))


def _decoded(body: bytes) -> Any:
    """A body as JSON, else as text; None when empty."""
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


def _contract_refusal(method: str, path: str, body: bytes) -> _Response | None:
    """The 400 the real API sends for a body that breaks the contract (the project's
    description, `provisioning.semrush.contract`), or None: Project Engine v1 validation
    errors are text/plain (reference §7), the v3 routes and User Manager answer the
    contract's `{message, errors}`."""
    operation = contract.operation_for(method, path)
    if operation is None or operation.request is None:
        return None
    problems = contract.schema_problems(operation.request, _decoded(body), where="body")
    if not problems:
        return None
    if path.startswith(f"{PE_PREFIX}/v1/"):
        return _text(400, "; ".join(problems))
    return _json(400, {"message": "invalid request body", "errors": {"body": problems}})


def _without_nulls(value: Any) -> Any:
    """`value` with every null member of its objects left out, at any depth: no member the
    contract describes is nullable, so upstream omits what it has no value for."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _text(status: int, text: str) -> _Response:
    return _Response(status, text.encode(), "text/plain; charset=utf-8")


def _empty(status: int) -> _Response:
    return _Response(status)


class _AbortError(Exception):
    """Raised inside an operation to answer with ``response`` at once."""

    def __init__(self, response: _Response) -> None:
        super().__init__(response.status)
        self.response = response


# --------------------------------------------------------------------------------------------
# Validation helpers


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_config(updates: Mapping[str, Any]) -> dict[str, Any]:
    """Check a partial configuration; return it normalised or raise SimulatorConfigError."""
    if not isinstance(updates, Mapping):
        raise SimulatorConfigError("config must be a JSON object")
    clean: dict[str, Any] = {}
    for key, value in updates.items():
        if key not in DEFAULT_CONFIG:
            raise SimulatorConfigError(f"unknown config key {key!r}")
        if key == "retryAfterSeconds" and value is None:
            pass
        elif key in ("settleSeconds", "latencyMs", "retryAfterSeconds", "publishSeconds"):
            if not _is_number(value) or value < 0:
                raise SimulatorConfigError(f"{key} must be a number >= 0")
        elif key == "errorRate5xx":
            if not _is_number(value) or not 0 <= value <= 1:
                raise SimulatorConfigError("errorRate5xx must be a number between 0 and 1")
        elif key == "recordExchanges":
            if not isinstance(value, bool):
                raise SimulatorConfigError("recordExchanges must be a boolean")
        elif key == "publishOutcome":
            if value not in PUBLISH_OUTCOMES:
                raise SimulatorConfigError(f"publishOutcome must be one of {PUBLISH_OUTCOMES}")
        elif key == "settleOutcome":
            if value not in SETTLE_OUTCOMES:
                raise SimulatorConfigError(f"settleOutcome must be one of {SETTLE_OUTCOMES}")
        elif key == "seed":
            if value is not None and not _is_int(value):
                raise SimulatorConfigError("seed must be an integer or null")
        elif (
            key in ("rateLimitPerSecond", "concurrencyLimit")
            and value is not None
            and (not _is_int(value) or value < 0)
        ):
            raise SimulatorConfigError(f"{key} must be an integer >= 0 or null")
        clean[key] = value
    return clean


def _format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(float(value))


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sleep_ms(milliseconds: float) -> None:
    if milliseconds > 0:
        time.sleep(milliseconds / 1000)


# --------------------------------------------------------------------------------------------
# State


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
    # Set by the drift control route (`simulator.drift`): the status from then on.
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
    # Set by the drift control route (`simulator.drift`) until the next publish.
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


@dataclass
class _Fault:
    id: str
    method: str | None
    path_regex: str
    pattern: re.Pattern[str]
    remaining: int
    status: int | None
    body: Any
    headers: dict[str, str]
    delay_ms: float
    commit: bool

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and bool(self.pattern.search(path))

    def response(self, retry_after: float | None) -> _Response:
        return replace(self._response(retry_after), scripted=True)

    def _response(self, retry_after: float | None) -> _Response:
        if self.status == 0:
            return _Response(0, drop=True)
        assert self.status is not None
        headers = dict(self.headers)
        if (
            self.status == 429
            and retry_after is not None
            and not any(k.lower() == "retry-after" for k in headers)
        ):
            headers["Retry-After"] = _format_seconds(retry_after)
        if self.body is None:
            return _Response(self.status, headers=headers)
        if isinstance(self.body, str):
            return _Response(self.status, self.body.encode(), "text/plain; charset=utf-8", headers)
        return _json(self.status, self.body, headers)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "method": self.method,
            "pathRegex": self.path_regex,
            "times": self.remaining,
            "status": self.status,
            "body": self.body,
            "headers": self.headers,
            "delayMs": self.delay_ms,
            "commit": self.commit,
        }


_FAULT_KEYS = {"method", "pathRegex", "times", "status", "body", "headers", "delayMs", "commit"}


def _parse_fault(data: Any) -> _Fault:
    if not isinstance(data, Mapping):
        raise SimulatorConfigError("fault must be a JSON object")
    unknown = set(data) - _FAULT_KEYS
    if unknown:
        raise SimulatorConfigError(f"unknown fault keys {sorted(unknown)}")
    method = data.get("method")
    if method is not None and (not isinstance(method, str) or not method):
        raise SimulatorConfigError("method must be a non-empty string")
    path_regex = data.get("pathRegex", "")
    if not isinstance(path_regex, str):
        raise SimulatorConfigError("pathRegex must be a string")
    try:
        pattern = re.compile(path_regex)
    except re.error as exc:
        raise SimulatorConfigError(f"pathRegex does not compile: {exc}") from exc
    times = data.get("times", 1)
    if not _is_int(times) or times < 1:
        raise SimulatorConfigError("times must be an integer >= 1")
    status = data.get("status")
    if status is not None and (not _is_int(status) or not (status == 0 or 200 <= status <= 599)):
        raise SimulatorConfigError("status must be 0 or an HTTP status between 200 and 599")
    delay_ms = data.get("delayMs", 0)
    if not _is_number(delay_ms) or delay_ms < 0:
        raise SimulatorConfigError("delayMs must be a number >= 0")
    commit = data.get("commit", False)
    if not isinstance(commit, bool):
        raise SimulatorConfigError("commit must be a boolean")
    headers = data.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise SimulatorConfigError("headers must map strings to strings")
    return _Fault(
        id=str(uuid.uuid4()),
        method=method.upper() if method else None,
        path_regex=path_regex,
        pattern=pattern,
        remaining=times,
        status=status,
        body=data.get("body"),
        headers=dict(headers),
        delay_ms=delay_ms,
        commit=commit,
    )


@dataclass
class _Request:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: bytes


_Operation = Callable[["SemrushSimulator", _Request], _Response]

_SEGMENT = r"(?P<{}>[^/]+)"
_WS = _SEGMENT.format("ws")
_PID = _SEGMENT.format("pid")


def _route_table() -> list[tuple[re.Pattern[str], dict[str, _Operation]]]:
    sim = SemrushSimulator
    um, pe = re.escape(UM_PREFIX), re.escape(PE_PREFIX)
    projects = f"{pe}/v1/workspaces/{_WS}/projects"
    table: list[tuple[str, dict[str, _Operation]]] = [
        (f"{um}/v2/workspaces/{_WS}/child", {"POST": sim._op_create_child}),
        (f"{um}/v1/workspaces/{_WS}/status", {"GET": sim._op_workspace_status}),
        (f"{um}/v1/workspaces/{_WS}/family", {"GET": sim._op_family}),
        (f"{um}/v1/workspaces/{_WS}", {"DELETE": sim._op_delete_workspace}),
        (projects, {"GET": sim._op_list_projects, "POST": sim._op_create_project}),
        (
            f"{projects}/{_PID}",
            {
                "GET": sim._op_get_project,
                "PATCH": sim._op_patch_project,
                "DELETE": sim._op_delete_project,
            },
        ),
        (f"{projects}/{_PID}/publish", {"POST": sim._op_publish_project}),
        # Revisions 1-5 pushed prompts here; upstream has no such route (SPEC §12.1).
        (f"{projects}/{_PID}/prompts", {"GET": sim._op_gateway_404, "POST": sim._op_gateway_404}),
        (
            f"{pe}/v3/workspaces/{_WS}/projects/{_PID}/aio/prompts/tagged",
            {"POST": sim._op_create_tagged_prompts},
        ),
        (f"{pe}/v1/languages", {"GET": sim._op_languages}),
    ]
    return [(re.compile(f"^{regex}$"), operations) for regex, operations in table]


# --------------------------------------------------------------------------------------------
# The simulator


class SemrushSimulator:
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
        self._routes = _route_table()
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

    # ---- control API (also callable in-process) ------------------------------------------

    def reset(self, *, parents: list[str] | None = None, token: str | None = None) -> None:
        """Forget state, faults, the log and the configuration; seed parents and token."""
        with self._lock:
            self._tokens = [self._startup_token if token is None else token]
            self._config = dict(self._startup_config)
            self._rng = random.Random(self._config["seed"])
            self._workspaces: dict[str, _Workspace] = {}
            # A family listing's entries, encoded, by workspace id: (status, live projects, bytes).
            self._family_entries: dict[str, tuple[str, int, bytes]] = {}
            self._projects: dict[str, _Project] = {}
            self._prompts: list[dict[str, Any]] = []
            self._faults: list[_Fault] = []
            # A new list, so that requests in flight across the reset land in the old one.
            self._requests: list[dict[str, Any]] = []
            self._exchanges: list[dict[str, Any]] = []
            # Per accepted token: the passing requests of the last second.
            self._rate_windows: dict[str, deque[float]] = {}
            # Per accepted token: its requests in flight now.
            self._in_flight: Counter[str] = Counter()
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

    # ---- HTTP entry points (called by the handler) ---------------------------------------

    def handle_control(self, method: str, path: str, body: bytes) -> _Response:
        try:
            data = json.loads(body) if body.strip() else None
        except ValueError:
            return _json(400, {"message": "body is not valid JSON"})
        try:
            return self._control(method, path, data)
        except SimulatorConfigError as exc:
            return _json(400, {"message": str(exc)})

    def _control(self, method: str, path: str, data: Any) -> _Response:
        name = path[len(CONTROL_PREFIX) :].rstrip("/")
        if drift_route(name):
            if method != "POST":
                return _json(405, {"message": "method not allowed"})
            return self._control_drift(name, data)
        allowed = {
            "reset": ("POST",),
            "parents": ("POST",),
            "tokens": ("POST",),
            "config": ("GET", "POST"),
            "faults": ("GET", "POST", "DELETE"),
            "state": ("GET",),
            "requests": ("GET",),
            "exchanges": ("GET",),
            "health": ("GET",),
        }
        if name not in allowed:
            return _json(404, {"message": f"unknown control route {path}"})
        if method not in allowed[name]:
            return _json(405, {"message": "method not allowed"})
        if name == "reset":
            return self._control_reset(data)
        if name == "parents":
            return self._control_parent(data)
        if name == "tokens":
            return self._control_token(data)
        if name == "config":
            if method == "GET":
                return _json(200, self.config())
            return _json(200, self.configure(data if data is not None else {}))
        if name == "faults":
            if method == "GET":
                return _json(200, self.faults())
            if method == "DELETE":
                self.clear_faults()
                return _json(200, [])
            return _json(201, self.add_fault(data if data is not None else {}))
        if name == "state":
            return _json(200, self.state())
        if name == "requests":
            return _json(200, self.requests_log())
        if name == "exchanges":
            return _json(200, self.exchanges())
        return _json(200, {"status": "ok"})

    def _control_drift(self, name: str, data: Any) -> _Response:
        try:
            with self._lock:
                status, body = drift_apply(
                    name=name, data=data, projects=self._projects, workspaces=self._workspaces
                )
        except DriftControlError as exc:
            raise SimulatorConfigError(str(exc)) from None
        return _json(status, body)

    def _control_parent(self, data: Any) -> _Response:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
            raise SimulatorConfigError("body must be {id: <non-empty string>}")
        title = data.get("title")
        if title is not None and not isinstance(title, str):
            raise SimulatorConfigError("title must be a string")
        self.add_parent(data["id"], title)
        return _json(200, {"id": data["id"]})

    def _control_token(self, data: Any) -> _Response:
        if not isinstance(data, dict) or not isinstance(data.get("token"), str):
            raise SimulatorConfigError("body must be {token: <non-empty string>}")
        if not data["token"] or data["token"] != data["token"].strip():
            raise SimulatorConfigError("body must be {token: <non-empty string>}")
        self.add_token(data["token"])
        return _json(200, {"token": data["token"]})

    def _control_reset(self, data: Any) -> _Response:
        data = {} if data is None else data
        if not isinstance(data, dict):
            raise SimulatorConfigError("reset body must be a JSON object")
        parents = data.get("parentWorkspaces")
        if parents is not None and (
            not isinstance(parents, list)
            or not all(isinstance(item, str) and item for item in parents)
        ):
            raise SimulatorConfigError("parentWorkspaces must be a list of non-empty strings")
        token = data.get("token")
        if token is not None and (not isinstance(token, str) or not token):
            raise SimulatorConfigError("token must be a non-empty string")
        self.reset(parents=parents, token=token)
        return _json(200, {"parentWorkspaces": self.state()["parentWorkspaces"]})

    def handle_api(
        self, method: str, path: str, query: str, authorization: str | None, body: bytes
    ) -> _Response:
        arrived = time.monotonic()
        with self._lock:
            entry: dict[str, Any] = {
                "method": method,
                "path": path,
                "query": query,
                "status": None,
                "at": _now_iso(),
                "durationMs": None,
            }
            self._requests.append(entry)
            latency_ms = self._config["latencyMs"]
            # In flight from arrival to answer, the latency included (SPEC §11.1).
            token = self._authorized(authorization)
            busy = self._concurrency_limit(token)
            if token is not None and busy is None:
                self._in_flight[token] += 1
        try:
            if busy is not None:
                response = busy
            else:
                _sleep_ms(latency_ms)
                try:
                    response = self._answer(method, path, query, token, body)
                except Exception:
                    # A simulator bug must still answer (and be logged), not hang the client.
                    response = _json(500, _INTERNAL)
        finally:
            with self._lock:
                if token is not None and busy is None:
                    self._in_flight[token] -= 1
        with self._lock:
            entry["status"] = 0 if response.drop else response.status
            entry["durationMs"] = round((time.monotonic() - arrived) * 1000, 1)
            if self._config["recordExchanges"]:
                self._exchanges.append(
                    {
                        "entry": entry,
                        "request": body,
                        "answer": response.body,
                        "scripted": response.scripted,
                    }
                )
        return response

    def _answer(
        self, method: str, path: str, query: str, token: str | None, body: bytes
    ) -> _Response:
        with self._lock:
            if token is None:
                return _json(401, _UNAUTHORIZED)
            limited = self._rate_limit(token)
            if limited is not None:
                return limited
            fault = self._take_fault(method, path)
            retry_after = self._config["retryAfterSeconds"]
        if fault is not None:
            if fault.status is not None and not fault.commit:
                _sleep_ms(fault.delay_ms)
                return fault.response(retry_after)
            if fault.status is not None:
                # An ambiguous write: the operation happens, the client sees the scripted answer.
                with self._lock:
                    self._route(method, path, query, body)
                _sleep_ms(fault.delay_ms)
                return fault.response(retry_after)
            _sleep_ms(fault.delay_ms)
        with self._lock:
            rate = self._config["errorRate5xx"]
            if rate and self._rng.random() < rate:
                return _json(503, _UNAVAILABLE)
            return self._route(method, path, query, body)

    def _too_many(self, message: str, retry_after: float | None) -> _Response:
        headers = {} if retry_after is None else {"Retry-After": _format_seconds(retry_after)}
        return _json(429, {"message": message}, headers)

    def _concurrency_limit(self, token: str | None) -> _Response | None:
        """A request arriving while `concurrencyLimit` requests of its token are in flight →
        429 with `Retry-After: 1` (none when `retryAfterSeconds` is null)."""
        limit = self._config["concurrencyLimit"]
        if token is None or not limit or self._in_flight[token] < limit:
            return None
        retry_after = None if self._config["retryAfterSeconds"] is None else 1
        return self._too_many("too many concurrent requests", retry_after)

    def _authorized(self, authorization: str | None) -> str | None:
        """The accepted token the request carries, or None (→ 401)."""
        scheme, _, credential = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            return None
        given = credential.strip().encode()
        matched = None
        for token in self._tokens:
            # Every token compared, in constant time each: no early exit on a match.
            if hmac.compare_digest(given, token.encode()):
                matched = token
        return matched

    def _rate_limit(self, token: str) -> _Response | None:
        """More than `rateLimitPerSecond` passing requests of this token within the last
        second → 429 with `Retry-After`; only requests that pass count."""
        limit = self._config["rateLimitPerSecond"]
        if not limit:
            return None
        window = self._rate_windows.setdefault(token, deque())
        now = time.monotonic()
        while window and window[0] <= now - 1.0:
            window.popleft()
        if len(window) >= limit:
            return self._too_many("rate limit exceeded", self._config["retryAfterSeconds"])
        window.append(now)
        return None

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.matches(method, path):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _route(self, method: str, path: str, query: str, body: bytes) -> _Response:
        for pattern, operations in self._routes:
            match = pattern.match(path)
            if match is None:
                continue
            operation = operations.get(method)
            if operation is None:
                return _json(405, {"message": "method not allowed"})
            refused = _contract_refusal(method, path, body)
            if refused is not None:
                return refused
            request = _Request(
                method=method,
                path=path,
                params=match.groupdict(),
                query={k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()},
                body=body,
            )
            try:
                return operation(self, request)
            except _AbortError as abort:
                return abort.response
        return _text(404, "404 page not found")

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

    # ---- User Manager operations ---------------------------------------------------------

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

    # ---- Project Engine operations -------------------------------------------------------

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

    def _op_languages(self, request: _Request) -> _Response:
        return _json(200, {"items": [{"id": lang.id, "name": lang.name} for lang in LANGUAGES]})


# --------------------------------------------------------------------------------------------
# HTTP plumbing


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        simulator: SemrushSimulator,
    ) -> None:
        self.simulator = simulator
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keep-alive: every response carries Content-Length (204 excepted, it has no body).
    protocol_version = "HTTP/1.1"
    # The headers and the body leave in two writes: with Nagle on, the body of every answer on
    # a kept-alive connection waits for the client's delayed ACK of the headers (~40 ms).
    disable_nagle_algorithm = True
    server_version = "SemrushSimulator/1.0"
    timeout = 120  # an idle keep-alive connection is closed after this many seconds
    server: _Server

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: GET /__sim/requests is the access log."""

    def _handle(self, method: str) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            self._send(_json(411, {"message": "Content-Length required"}))
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._send(_json(400, {"message": "bad Content-Length"}))
            return
        # Always consume the body, so the connection stays usable whatever the answer.
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        simulator = self.server.simulator
        if split.path.startswith(CONTROL_PREFIX):
            response = simulator.handle_control(method, split.path, body)
        else:
            response = simulator.handle_api(
                method, split.path, split.query, self.headers.get("Authorization"), body
            )
        self._send(response)

    def _send(self, response: _Response) -> None:
        if response.drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            if response.content_type is not None:
                self.send_header("Content-Type", response.content_type)
            if response.status != 204:
                self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            if response.body and response.status != 204:
                self.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (its timeout fired during a scripted delay): nothing to do.
            self.close_connection = True
