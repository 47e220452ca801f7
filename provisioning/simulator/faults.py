"""Scripted faults (`/__sim/faults`): what a fault matches and the answer it scripts."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from provisioning.simulator.wire import (
    SimulatorConfigError,
    _format_seconds,
    _is_int,
    _is_number,
    _json,
    _Response,
)


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
