"""The request pipeline every API request goes through (see `server`'s docstring for the order):
log, concurrency limit, latency, bearer check, rate limit, scripted fault, random 5xx, the
contract's body check, then the room's operation."""

from __future__ import annotations

import hmac
import time
from collections import deque
from typing import Any
from urllib.parse import parse_qs

from provisioning.semrush import contract
from provisioning.simulator.faults import _Fault
from provisioning.simulator.state import SimulatorBase
from provisioning.simulator.wire import (
    _INTERNAL,
    _UNAUTHORIZED,
    _UNAVAILABLE,
    PE_PREFIX,
    _AbortError,
    _decoded,
    _format_seconds,
    _json,
    _now_iso,
    _Request,
    _Response,
    _sleep_ms,
    _text,
)


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


class Pipeline(SimulatorBase):
    """The HTTP entry point of the API routes, called by the handler."""

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
