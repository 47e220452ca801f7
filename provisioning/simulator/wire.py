"""The simulator's wire: the answers it sends, the request an operation reads, upstream's error
bodies and the small helpers every room of the simulator shares."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

UM_PREFIX = "/enterprise/users/api"
PE_PREFIX = "/enterprise/projects/api"
CONTROL_PREFIX = "/__sim/"

_UNAUTHORIZED = {"detail": "Not authenticated"}
_FORBIDDEN = {"message": "invalid access attempt"}
_NOT_FOUND = {"message": "not found"}
_INTERNAL = {"message": "internal server error"}
_UNAVAILABLE = {"message": "service unavailable"}


class SimulatorConfigError(ValueError):
    """A control request or constructor argument that the simulator refuses (HTTP 400)."""


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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(float(value))


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sleep_ms(milliseconds: float) -> None:
    if milliseconds > 0:
        time.sleep(milliseconds / 1000)


@dataclass
class _Request:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: bytes


_SEGMENT = r"(?P<{}>[^/]+)"
_WS = _SEGMENT.format("ws")
_PID = _SEGMENT.format("pid")
