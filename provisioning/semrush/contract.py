"""The project's own description of the Semrush operations it uses (SPEC §12.1).

Written in our words from the facts of Semrush's published contract (the OpenAPI documents of
User Manager and Project Engine, with the corrections verified live; see
``shared/reference/semrush-contract/``): for each of the 11 operations the service calls, its
method, path template, query parameters, the members of the request body we send or the
contract requires, the status that means success, and the answer's shape for it. Nothing here
needs the reference folder: the description *is* the project's copy of the facts.

It is the yardstick both sides are checked against: the client's requests
(``tests/provisioning/test_semrush_client.py``), the simulator's answers (it also refuses a
request body that breaks it, with the 400 the real API sends) and the preflight
``manage.py semrush_check``.

Reading the schemas:

- A member listed in ``required`` is one the contract marks required; any other may be absent.
- No member described here is nullable in the contract: a string member is never ``null``
  (an answer omits it, or sends ``""``).
- Members are typed as the contract types them (``users`` and ``shared_with`` are integers).
- Value sets that may grow (a workspace ``status``, a project ``publish_status``) are strings
  here; :data:`WORKSPACE_STATUSES` and :data:`PUBLISH_STATUSES` list the values known today,
  which the preflight reports on (an unknown value is a difference, not a broken answer).
- Path parameters are not checked (the contract types the v3 ids as UUIDs; a flat-mode parent
  id need not be one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

UM = "/enterprise/users/api"
PE = "/enterprise/projects/api"

# The workspace statuses the contract names ("not ready", "created", "error") and those seen
# live (SPEC §5: ready and terminal spellings).
WORKSPACE_STATUSES = frozenset(
    {
        "not ready",
        "created",
        "active",
        "ready",
        "error",
        "creation failed",
        "creation_failed",
        "failed",
        "invalid subscription",
    }
)
PUBLISH_STATUSES = frozenset(
    {"draft", "publishing", "initial_publish_failed", "live", "live_with_unpublished_updates"}
)

Schema = dict[str, Any]

_STRING: Schema = {"type": "string"}
_INTEGER: Schema = {"type": "integer"}
_BOOLEAN: Schema = {"type": "boolean"}
_STRINGS: Schema = {"type": "array", "items": _STRING}


def _object(required: tuple[str, ...] = (), **members: Schema) -> Schema:
    """An object schema: its members' schemas; `required` those the contract marks required."""
    schema: Schema = {"type": "object", "properties": members}
    if required:
        schema["required"] = list(required)
    return schema


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


# ---------------------------------------------------------------------- answers' shapes

WORKSPACE = _object(
    ("id", "title", "status"),
    id=_STRING,
    title=_STRING,
    status=_STRING,
    parent_id=_STRING,
    parent=_object(id=_STRING, title=_STRING),
    owner=_STRING,
    role=_STRING,
    icon=_STRING,
    created_at=_STRING,
    last_updated_at=_STRING,
    expires_at=_STRING,
    is_master=_BOOLEAN,
    is_admin=_BOOLEAN,
    partnership_enabled=_BOOLEAN,
    users=_INTEGER,
    keywords_count=_INTEGER,
    pagespeed_urls_count=_INTEGER,
    published_projects_count=_INTEGER,
    products=_STRINGS,
)

_NAMED_BY_ID = _object(id=_STRING, name=_STRING)

PROJECT_AI_SETTINGS = _object(
    location=_object(id=_INTEGER, name=_STRING),
    language=_NAMED_BY_ID,
    country=_object(code=_STRING, name=_STRING),
    primary_url=_STRING,
    brand_name_display=_STRING,
    brand_names=_STRINGS,
    prompts_count=_INTEGER,
    benchmarks_count=_INTEGER,
    products_count=_INTEGER,
    segments_count=_INTEGER,
    models_stats=_object(
        models_count=_INTEGER,
        models=_array(_object(("id", "model", "prompts_count"), id=_STRING)),
    ),
)

PROJECT = _object(
    ("id", "name"),
    id=_STRING,
    name=_STRING,
    type=_STRING,
    domain=_STRING,
    color=_STRING,
    role=_STRING,
    favourite=_BOOLEAN,
    is_draft=_BOOLEAN,
    draft_id=_STRING,
    live_id=_STRING,
    shared_with=_INTEGER,
    updated_at=_STRING,
    published_at=_STRING,
    publish_status=_STRING,
    publishing_failed_reason=_STRING,
    settings=_object(ai=PROJECT_AI_SETTINGS),
)

# The error body of every documented 4xx/5xx (`http_server.BasicResponse`).
ERROR_BODY = _object(message=_STRING, errors={"type": "object"})

# ---------------------------------------------------------------------- requests' shapes

_PROJECT_MEMBERS: dict[str, Schema] = {
    "name": _STRING,
    "type": {"enum": ["ai", "AI", "seo", "SEO", "mfour", "MFOUR", "si", "SI", "ci", "CI"]},
    "domain": _STRING,
    "location_id": _INTEGER,
    "location_name": _STRING,
    "country_code": _STRING,
    "language_id": _STRING,
    "brand_name_display": _STRING,
    "brand_names": _STRINGS,
    "primary_url": _STRING,
    "color": _STRING,
}

CHILD_CREATE = _object(
    ("title", "resources"),
    title=_STRING,
    resources=_object(ai=_object(projects=_INTEGER, prompts=_INTEGER)),
)
PROJECT_CREATE = _object(("name", "type"), **_PROJECT_MEMBERS)
PROJECT_UPDATE = _object(("type",), **_PROJECT_MEMBERS)
TAGGED_PROMPTS_CREATE: Schema = _object(
    ("prompts",),
    prompts={
        "type": "array",
        "minItems": 1,
        "items": _object(("name",), name=_STRING, tags=_STRINGS),
    },
)
TAGGED_PROMPTS_CREATED = _object(
    existing_count=_INTEGER,
    items=_array(_object(("id", "name", "is_new"), id=_STRING, name=_STRING, is_new=_BOOLEAN)),
)


# ---------------------------------------------------------------------- the operations


@dataclass(frozen=True)
class QueryParameter:
    """A query parameter: its type (``string``, ``integer`` or ``boolean``), required or not."""

    type: str = "string"
    required: bool = False


@dataclass(frozen=True)
class Operation:
    """One upstream operation: where it lives, what it takes and what it answers on success.

    ``request`` None: no body is sent. ``answer`` None: the success answer has no body."""

    name: str
    method: str
    path: str
    success: int
    answer: Schema | None = None
    request: Schema | None = None
    query: dict[str, QueryParameter] = field(default_factory=dict)

    @property
    def pattern(self) -> re.Pattern[str]:
        return _path_pattern(self.path)


_WS = "/v1/workspaces/{id}"
_PROJECT = f"{PE}{_WS}/projects/{{project_id}}"

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "workspace-child-create-v2",
        "POST",
        f"{UM}/v2/workspaces/{{id}}/child",
        200,
        WORKSPACE,
        CHILD_CREATE,
    ),
    Operation(
        "workspaces-status-get",
        "GET",
        f"{UM}{_WS}/status",
        200,
        _object(("status",), status=_STRING),
    ),
    Operation("workspaces-family", "GET", f"{UM}{_WS}/family", 200, _array(WORKSPACE)),
    Operation(
        "projects-list-projects",
        "GET",
        f"{PE}{_WS}/projects",
        200,
        _object(page=_INTEGER, total=_INTEGER, items=_array(PROJECT)),
        query={
            "page": QueryParameter("integer"),
            "limit": QueryParameter("integer"),
            "type": QueryParameter(),
            "live": QueryParameter("boolean"),
        },
    ),
    Operation(
        "projects-get-project",
        "GET",
        _PROJECT,
        200,
        PROJECT,
        query={"draft": QueryParameter(required=True), "type": QueryParameter()},
    ),
    Operation("projects-post-project", "POST", f"{PE}{_WS}/projects", 201, PROJECT, PROJECT_CREATE),
    Operation("projects-patch-project", "PATCH", _PROJECT, 200, PROJECT, PROJECT_UPDATE),
    Operation("projects-publish-project", "POST", f"{_PROJECT}/publish", 202),
    Operation("projects-delete-project", "DELETE", _PROJECT, 204),
    Operation(
        "projects-admin-list-languages",
        "GET",
        f"{PE}/v1/languages",
        200,
        _object(page=_INTEGER, total=_INTEGER, items=_array(_NAMED_BY_ID)),
    ),
    Operation(
        "aio-create-tagged-prompts",
        "POST",
        f"{PE}/v3/workspaces/{{id}}/projects/{{project_id}}/aio/prompts/tagged",
        201,
        TAGGED_PROMPTS_CREATED,
        TAGGED_PROMPTS_CREATE,
    ),
)


def _path_pattern(template: str) -> re.Pattern[str]:
    """`/a/{id}/b` → `^/a/[^/]+/b$`."""
    parts = re.split(r"\{[a-z_]+\}", template)
    return re.compile("^" + "[^/]+".join(re.escape(part) for part in parts) + "$")


def operation_for(method: str, path: str) -> Operation | None:
    """The operation `method` `path` (without the query string, prefix included) is, or None."""
    for operation in OPERATIONS:
        if operation.method == method.upper() and operation.pattern.match(path):
            return operation
    return None


# ---------------------------------------------------------------------- checks


def schema_problems(schema: Schema, value: Any, *, where: str) -> list[str]:
    """Every way `value` breaks `schema`, each as `<where><pointer>: <message>`, in a stable
    order."""
    errors = Draft202012Validator(schema).iter_errors(value)
    problems = []
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        pointer = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        problems.append(f"{where}{pointer}: {error.message}")
    return problems


def _query_problems(operation: Operation, query: dict[str, str]) -> list[str]:
    """A required parameter missing, an unknown one, a value of the wrong type."""
    problems = []
    for name, parameter in operation.query.items():
        if parameter.required and name not in query:
            problems.append(f"query: {name!r} is required")
    for name, value in query.items():
        known = operation.query.get(name)
        if known is None:
            problems.append(f"query: {name!r} is not a parameter of {operation.name}")
        elif known.type == "integer" and not re.fullmatch(r"-?\d+", value):
            problems.append(f"query: {name!r} must be an integer, got {value!r}")
        elif known.type == "boolean" and value not in ("true", "false"):
            problems.append(f"query: {name!r} must be true or false, got {value!r}")
    return problems


def request_problems(method: str, path: str, query: dict[str, str], body: Any) -> list[str]:
    """How a request breaks the description: an unknown operation, a query parameter missing,
    unknown or of the wrong type, a body where none is taken, a body that breaks the
    operation's request schema. `body` is the decoded JSON (None: no body). [] when it keeps
    it."""
    operation = operation_for(method, path)
    if operation is None:
        return [f"{method} {path} is not an operation of the contract"]
    problems = _query_problems(operation, query)
    if operation.request is None:
        if body is not None:
            problems.append(f"body: {operation.name} takes no body")
        return problems
    return problems + schema_problems(operation.request, body, where="body")


def answer_problems(method: str, path: str, status: int, body: Any) -> list[str]:
    """How an answer breaks the description. A success (2xx) must carry the operation's success
    status and, decoded (`body`, None for an empty body), its answer schema; an error status is
    not judged here (its bodies are free text or `{message}` upstream). [] when it keeps it."""
    operation = operation_for(method, path)
    if operation is None:
        return [f"{method} {path} is not an operation of the contract"]
    if not 200 <= status < 300:
        return []
    if status != operation.success:
        return [f"status: {status}, the contract says {operation.success}"]
    if operation.answer is None:
        return [] if body is None else [f"body: {operation.name} answers no body"]
    return schema_problems(operation.answer, body, where="answer")
