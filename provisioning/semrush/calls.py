"""One logical Semrush call: attempts, retry policy, waits, and the log line of each attempt.

:class:`SemrushCaller` is the base of :class:`provisioning.semrush.client.SemrushClient`: the
client builds URLs and bodies and checks answers, this module decides how often and when a
request is sent and what is logged about it. Sending one request is :mod:`.transport`'s job;
classifying a failed answer into the error family is :mod:`.errors`'.

Guarantees of every call (SPEC §5):

- Each HTTP attempt carries an explicit ``(connect, read)`` timeout (15 s by default).
- At most ``max_retries`` (2) retries, after a jittered exponential backoff from 200 ms or the
  ``Retry-After``, whichever is longer; each wait is at most 20 s. A longer ``Retry-After`` is
  not waited: :class:`SemrushRateLimitedError` is raised at once with its ``retry_after``, so
  a worker re-schedules its step instead of sleeping.
- 429 is retried for every method: Semrush rejects a rate-limited request at the edge, before
  it runs (reference §4). 5xx, timeouts and network errors are retried for idempotent methods
  only (our one PATCH sets a value); a POST is never replayed after a 5xx or a lost answer, it
  raises with ``ambiguous=True`` and the caller reconciles before creating again.
- Before every attempt (retries included) the call takes a permit from ``permits``, the shared
  bucket of its credential, and a slot of its concurrency limit (SPEC §10.6, §11.1,
  :mod:`provisioning.quota`), released as soon as the attempt has its answer; whatever
  ``acquire`` raises (a busy bucket, no free slot) leaves the call unsent. A 429 with
  ``Retry-After`` pauses that bucket for every process (``permits.pause``), so the retry waits
  for its permit rather than sleeping the ``Retry-After`` itself.
- Waits go through the injected ``sleep``, durations through the injected ``clock``.
- Every attempt carries its own correlation id as ``X-Request-Id`` (a UUID), on its log line
  as ``x_request_id``, and is handed to ``recorder`` (when given) once it has its answer or
  failed (:class:`SentAttempt`): the ledger of upstream writes (SPEC §13.4) is kept there, by
  the caller that knows the tenant, not by this module.
- One line per attempt on the ``serenity.semrush`` logger: operation, method, path (no host,
  no query), status, duration, attempt and the tenant ids of ``log_context``; error lines add
  a scrubbed excerpt of at most 2000 characters. The token is never logged, never put into an
  exception.
"""

from __future__ import annotations

import functools
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson
import requests

from provisioning.semrush.errors import (
    SemrushConfigurationError,
    SemrushError,
    SemrushRateLimitedError,
    SemrushServerError,
    SemrushUnexpectedResponseError,
    error_for_failure,
    error_for_response,
    excerpt,
    request_id_of,
)
from provisioning.semrush.transport import DEFAULT_TIMEOUT_SECONDS, Transport, TransportError

logger = logging.getLogger("serenity.semrush")

DEFAULT_MAX_RETRIES = 2
BACKOFF_BASE_SECONDS = 0.2
MAX_WAIT_SECONDS = 20.0

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})

# LogRecord attributes that `extra` must not overwrite (logging raises KeyError on them).
_RESERVED_LOG_ATTRS = frozenset(
    logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None).__dict__
) | {"message", "asctime"}


class Permits(Protocol):
    """The credential's shared bucket, as a call sees it (:mod:`provisioning.quota`)."""

    def acquire(self, operation: str) -> None:
        """Return once this attempt may be sent; raise to leave it unsent."""

    def release(self) -> None:
        """The attempt that ``acquire`` let through has its answer (or failed)."""

    def pause(self, seconds: float | None) -> None:
        """Upstream answered 429 (``Retry-After`` = ``seconds``): hold every permit until then."""

    def answered(self, operation: str, status: int) -> None:
        """Upstream answered the attempt ``status``; raise to refuse the call (a credential
        refused after it was accepted: SPEC §13.2)."""


@dataclass(frozen=True)
class SentAttempt:
    """One HTTP attempt as a :class:`CallRecorder` sees it: ``path`` is the URL's path (no host,
    no query: with the method, it names the contract's operation), ``started_at`` the wall clock
    when it was sent, ``status`` None when no answer arrived, ``response`` the answer (its body
    read)."""

    method: str
    path: str
    request_id: str
    started_at: float
    duration_ms: int
    status: int | None
    response: requests.Response | None


class CallRecorder(Protocol):
    """Told of every attempt (:class:`SentAttempt`), in the thread that sent it; what it raises
    is logged and swallowed: a record never fails the call it describes."""

    def record(self, attempt: SentAttempt) -> None:
        """Keep what it wants of the attempt."""


class SemrushCaller:
    """Sends logical calls to Semrush with the retry, wait and logging policy of SPEC §5.

    ``log_context`` holds tenant ids (``org_id``, ``brand_id``, ``attempt_id`` ...) copied onto
    every log line. ``on_call`` observes every attempt (operation, status or None, seconds), for
    metrics this module knows nothing about. ``clock``, ``sleep``, ``jitter`` and ``wall_clock`` are
    injectable so tests never wait for real.

    Raises :class:`SemrushConfigurationError` when ``token`` is empty or holds a line break,
    ``timeout`` is not positive or ``max_retries`` is negative.
    """

    def __init__(
        self,
        *,
        token: str,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = DEFAULT_MAX_RETRIES,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        session: requests.Session | None = None,
        log_context: Mapping[str, Any] | None = None,
        wall_clock: Callable[[], float] = time.time,
        on_call: Callable[[str, int | None, float], None] | None = None,
        permits: Permits | None = None,
        recorder: CallRecorder | None = None,
    ) -> None:
        if not token or not token.strip():
            raise SemrushConfigurationError(operation="configure", detail="token is empty")
        if "\r" in token or "\n" in token:
            # It would end the Authorization header and start another.
            raise SemrushConfigurationError(
                operation="configure", detail="token contains a line break"
            )
        if timeout <= 0:
            raise SemrushConfigurationError(operation="configure", detail="timeout must be > 0")
        if max_retries < 0:
            raise SemrushConfigurationError(operation="configure", detail="max_retries < 0")
        self._token = token
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._wall_clock = wall_clock
        self._transport = Transport(token=token, timeout=self.timeout, session=session)
        self.log_context: dict[str, Any] = dict(log_context or {})
        self._on_call = on_call
        self._permits = permits
        self._recorder = recorder

    @property
    def permits(self) -> Permits | None:
        """The quota every attempt asks first (None: unmetered)."""
        return self._permits

    def close(self) -> None:
        """Close the HTTP session if this caller created it."""
        self._transport.close()

    def _request_json(
        self,
        *,
        operation: str,
        method: str,
        url: str,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        owned: bool = False,
    ) -> Any:
        """Send with retries and return the parsed JSON body (``None`` for an empty body)."""
        response = self._request(
            operation=operation,
            method=method,
            url=url,
            params=params,
            json_body=json_body,
            owned=owned,
        )
        return self._decode(response, operation=operation, method=method)

    def _decode(self, response: requests.Response, *, operation: str, method: str) -> Any:
        """The parsed JSON body (``None`` for an empty body)."""
        if not response.content or not response.content.strip():
            return None
        try:
            # orjson: the family listing, read on every brand create, grows with the org.
            return orjson.loads(response.content)
        except ValueError as exc:  # orjson.JSONDecodeError is a ValueError
            raise SemrushUnexpectedResponseError(
                operation=operation,
                status=response.status_code,
                method=method,
                path=urlsplit(response.url).path,
                detail=excerpt(response.text, token=self._token),
                request_id=request_id_of(response.headers),
            ) from exc

    def _request(
        self,
        *,
        operation: str,
        method: str,
        url: str,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        owned: bool = False,
    ) -> requests.Response:
        """Send one logical call: attempts, classification, waits; returns a 2xx response.
        ``owned=True``: the workspace is the brand's own pointer or candidate, so a 403 on it
        raises :class:`SemrushGoneError` instead of :class:`SemrushForbiddenError`."""
        path = urlsplit(url).path
        idempotent = method in IDEMPOTENT_METHODS
        log = functools.partial(self._log, operation=operation, method=method, path=path)
        attempt = 0
        while True:
            attempt += 1
            if self._permits is not None:
                self._permits.acquire(operation)
            request_id = str(uuid.uuid4())
            logged = functools.partial(log, request_id=request_id)
            started = self._clock()
            failure: TransportError | None = None
            try:
                response = self._send_released(method, url, params, json_body, request_id)
            except TransportError as exc:
                failure = exc
                error = self._failure_error(exc, operation=operation, method=method, path=path)
                retry = idempotent and attempt <= self.max_retries
                wait = self._backoff(attempt) if retry else None
            else:
                duration_ms = _elapsed_ms(started, self._clock())
                if response.status_code < 300:
                    logged(logging.INFO, response.status_code, duration_ms, attempt)
                    self._answered(operation, response.status_code)
                    return response
                error = self._answer_error(
                    response, operation=operation, method=method, path=path, owned=owned
                )
                if isinstance(error, SemrushRateLimitedError) and self._permits is not None:
                    self._permits.pause(error.retry_after)
                wait = self._wait_before_retry(error, attempt=attempt, idempotent=idempotent)
            duration_ms = _elapsed_ms(started, self._clock())
            logged(logging.WARNING, error.status, duration_ms, attempt, error=error, wait=wait)
            self._answered(operation, error.status)
            if wait is None:
                raise error from failure
            self._sleep(wait)

    def _answered(self, operation: str, status: int | None) -> None:
        """Tell the permits what upstream answered (they may refuse the call: SPEC §13.2)."""
        if self._permits is not None and status is not None:
            self._permits.answered(operation, status)

    def _failure_error(
        self, failure: TransportError, *, operation: str, method: str, path: str
    ) -> SemrushError:
        """The error family member a request that got no answer is."""
        return error_for_failure(
            failure.description,
            timed_out=failure.timed_out,
            never_sent=failure.never_sent,
            operation=operation,
            method=method,
            path=path,
            idempotent=method in IDEMPOTENT_METHODS,
            token=self._token,
        )

    def _answer_error(
        self, response: requests.Response, *, operation: str, method: str, path: str, owned: bool
    ) -> SemrushError:
        """The error family member a non-2xx answer is."""
        return error_for_response(
            status=response.status_code,
            headers=response.headers,
            text=response.text,
            operation=operation,
            method=method,
            path=path,
            idempotent=method in IDEMPOTENT_METHODS,
            owned=owned,
            token=self._token,
            now=self._wall_clock(),
        )

    def _send_released(
        self,
        method: str,
        url: str,
        params: Mapping[str, str] | None,
        json_body: Any,
        request_id: str,
    ) -> requests.Response:
        """One attempt, with its ``X-Request-Id``, handed to the recorder once it has its answer
        (or failed); the concurrency slot its permit holds is given back then."""
        sent_at, started = self._wall_clock(), self._clock()
        response: requests.Response | None = None
        try:
            response = self._transport.send(
                method,
                url,
                params=params,
                json_body=json_body,
                headers={"X-Request-Id": request_id},
            )
            return response
        finally:
            if self._permits is not None:
                self._permits.release()
            if self._recorder is not None:
                duration_ms = _elapsed_ms(started, self._clock())
                self._record(method, url, request_id, sent_at, duration_ms, response)

    def _record(
        self,
        method: str,
        url: str,
        request_id: str,
        sent_at: float,
        duration_ms: int,
        response: requests.Response | None,
    ) -> None:
        """Hand the attempt to the recorder; a recorder's failure is logged, never raised."""
        if self._recorder is None:
            return
        attempt = SentAttempt(
            method=method,
            path=urlsplit(url).path,
            request_id=request_id,
            started_at=sent_at,
            duration_ms=duration_ms,
            status=response.status_code if response is not None else None,
            response=response,
        )
        try:
            self._recorder.record(attempt)
        except Exception:
            logger.exception(
                "the upstream call was not recorded",
                extra={"upstream_method": method, "x_request_id": request_id},
            )

    def _wait_before_retry(
        self, error: SemrushError, *, attempt: int, idempotent: bool
    ) -> float | None:
        """Seconds to wait before the next attempt, or None when the error must be raised now."""
        if attempt > self.max_retries:
            return None
        if isinstance(error, SemrushRateLimitedError):
            pass  # rejected at the edge before it ran: safe to replay for every method
        elif isinstance(error, SemrushServerError):
            if not idempotent:
                return None  # a POST may have committed before the 5xx: never replay it blind
        else:
            return None
        backoff = self._backoff(attempt)
        if error.retry_after is None:
            return backoff
        if error.retry_after > MAX_WAIT_SECONDS:
            # Too long to hold a worker: raise with retry_after so the step is re-scheduled.
            return None
        if self._permits is not None:
            # The bucket is paused until then: the retry's permit does the waiting (or refuses).
            return backoff
        return max(backoff, error.retry_after)

    def _backoff(self, attempt: int) -> float:
        """Equal-jitter exponential backoff: 0.2 s * 2**(attempt-1) * [0.5, 1.0], capped."""
        factor = 0.5 + 0.5 * min(max(self._jitter(), 0.0), 1.0)
        return float(min(BACKOFF_BASE_SECONDS * (2 ** (attempt - 1)) * factor, MAX_WAIT_SECONDS))

    def _log(
        self,
        level: int,
        status: int | None,
        duration_ms: int,
        attempt: int,
        request_id: str,
        *,
        operation: str,
        method: str,
        path: str,
        error: SemrushError | None = None,
        wait: float | None = None,
    ) -> None:
        """One line per attempt (see the module docstring), then the ``on_call`` observer."""
        # Prefixed names: `path`, `status` and `request_id` belong to the inbound request's
        # context on the same JSON line.
        fields: dict[str, Any] = {
            "upstream_operation": operation,
            "upstream_method": method,
            "upstream_path": path,
            "upstream_status": status,
            "duration_ms": duration_ms,
            "attempt": attempt,
            "x_request_id": request_id,
        }
        for key, value in self.log_context.items():
            if key not in _RESERVED_LOG_ATTRS and key not in fields:
                fields[key] = value
        message = "semrush %s %s %s status=%s duration_ms=%d attempt=%d x_request_id=%s"
        args: list[Any] = [operation, method, path, status, duration_ms, attempt, request_id]
        for key, value in self.log_context.items():
            message += f" {str(key).replace('%', '%%')}=%s"
            args.append(value)
        if error is not None:
            fields["upstream_error"] = type(error).__name__
            fields["upstream_request_id"] = error.request_id
            fields["ambiguous"] = error.ambiguous
            fields["retry_after"] = error.retry_after
            fields["retry_in_s"] = wait
            fields["upstream_body"] = error.detail
            # The excerpt travels as the `upstream_body` field of the JSON line, not in the text.
            message += " error=%s retry_in_s=%s"
            args.extend([type(error).__name__, wait])
        logger.log(level, message, *args, extra=fields)
        if self._on_call is not None:
            self._on_call(operation, status, duration_ms / 1000)


def _elapsed_ms(started: float, finished: float) -> int:
    return max(round((finished - started) * 1000), 0)
