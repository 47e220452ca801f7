"""How a control request (`/__sim/…`) finds its handler: a table of `ControlRoute`s, each a path
below `/__sim/` (a `{name}` segment matches one path segment and reaches the handler in
`params`) with a handler per method."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provisioning.simulator.wire import CONTROL_PREFIX, SimulatorConfigError, _json, _Response

if TYPE_CHECKING:
    from provisioning.simulator.control.api import ControlAPI

# (simulator, the path's `{name}` segments, the JSON body or None) -> the answer. Raising
# SimulatorConfigError answers 400 with its message.
ControlHandler = Callable[["ControlAPI", dict[str, str], Any], _Response]

_PARAM = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class ControlRoute:
    path: str  # below /__sim/, e.g. "faults" or "projects/{id}"
    methods: Mapping[str, ControlHandler]
    pattern: re.Pattern[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        parts = _PARAM.split(self.path)
        # split() alternates literal text and parameter names.
        regex = "".join(
            f"(?P<{part}>[^/]+)" if index % 2 else re.escape(part)
            for index, part in enumerate(parts)
        )
        object.__setattr__(self, "pattern", re.compile(regex))


def handle_control(
    simulator: ControlAPI, routes: Iterable[ControlRoute], method: str, path: str, body: bytes
) -> _Response:
    """The answer to a control request: 400 for a body that is not JSON, 404 for an unknown
    route, 405 for a known route with another method, 400 for a refused request."""
    try:
        data = json.loads(body) if body.strip() else None
    except ValueError:
        return _json(400, {"message": "body is not valid JSON"})
    name = path[len(CONTROL_PREFIX) :].rstrip("/")
    for route in routes:
        match = route.pattern.fullmatch(name)
        if match is None:
            continue
        handler = route.methods.get(method)
        if handler is None:
            return _json(405, {"message": "method not allowed"})
        try:
            return handler(simulator, match.groupdict(), data)
        except SimulatorConfigError as exc:
            return _json(400, {"message": str(exc)})
    return _json(404, {"message": f"unknown control route {path}"})
