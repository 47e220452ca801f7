"""The Semrush error family.

Every failure of a Semrush call surfaces as a subclass of :class:`SemrushError`. Callers catch
these classes only; they never see a ``requests`` exception.

Contract shared by the whole family:

- ``operation`` names the client method (``"create_project"``), ``method`` and ``path`` the HTTP
  request (the path has no host and no query string), ``status`` the HTTP status or ``None``
  when no response arrived.
- ``detail`` is a scrubbed, truncated (2000 characters) excerpt of the upstream body or of the
  transport failure. It never contains the bearer token, but it may contain upstream ids and
  text: it is for server-side logs only, never for API clients.
- ``str(error)`` names the operation and the status only (no ids, no body), and
  :meth:`SemrushError.safe_message` gives the generic text an API response may show.
- ``retryable`` says the condition is transient: running the same step later may succeed.
- ``ambiguous`` says a non-idempotent call (a POST) may or may not have taken effect upstream:
  the caller must reconcile (list the family or the projects) before creating again.

Classification follows ``shared/reference/semrush-upstream.md`` §4: on the status and the body
shape, never on message text.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC
from typing import Any, ClassVar

GENERIC_AUTH_MESSAGE = "Upstream authorization failed"
GENERIC_UPSTREAM_MESSAGE = "Upstream request failed"
EXCERPT_LIMIT = 2000

_REDACTED = "[REDACTED]"
_BEARER_RE = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*")
_SECRET_JSON_FIELD_RE = re.compile(
    r"""(?ix)
    (["']?(?:[a-z0-9_\-]*token|authorization|password|secret|api[_\-]?key|apikey)["']?
    \s*[:=]\s*)
    (?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|(?!\[REDACTED\])[^\s,;&}\]]+)
    """
)
_SECRET_HEADER_LINE_RE = re.compile(r"(?im)^(\s*authorization\s*:\s*).+$")


class SemrushError(Exception):
    """Base class of every Semrush client failure (see the module docstring for the contract)."""

    retryable: ClassVar[bool] = False
    default_message: ClassVar[str] = "Semrush request failed"

    def __init__(
        self,
        *,
        operation: str,
        status: int | None = None,
        method: str | None = None,
        path: str | None = None,
        detail: str = "",
        request_id: str | None = None,
        ambiguous: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.operation = operation
        self.status = status
        self.method = method
        self.path = path
        self.detail = detail
        self.request_id = request_id
        self.ambiguous = ambiguous
        self.retry_after = retry_after
        super().__init__(self._summary())

    def _summary(self) -> str:
        status = f"HTTP {self.status}" if self.status is not None else "no response"
        return f"{self.default_message}: {self.operation} ({status})"

    def safe_message(self) -> str:
        """The text an API response may show: generic, with no ids and no upstream body."""
        return GENERIC_UPSTREAM_MESSAGE

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(operation={self.operation!r}, status={self.status!r}, "
            f"ambiguous={self.ambiguous!r}, retry_after={self.retry_after!r})"
        )


class SemrushConfigurationError(SemrushError):
    """The client cannot be built: base URL or token missing or malformed. No call was made."""

    default_message = "Semrush client is not configured"


class SemrushValidationError(SemrushError):
    """400 or 422: the upstream rejected the request as invalid. Permanent for this input.

    422 also covers ``workspace not ready`` and ``insufficient available units``; ``detail``
    keeps the upstream text for the logs.
    """

    default_message = "Semrush rejected the request as invalid"


class SemrushAuthError(SemrushError):
    """401 or 403: permanent for this credential; needs re-auth or access, never a retry."""

    default_message = "Semrush refused the credential"

    def safe_message(self) -> str:
        return GENERIC_AUTH_MESSAGE


class SemrushUnauthorizedError(SemrushAuthError):
    """401: the token is missing, expired or not mapped to a Semrush user."""

    default_message = "Semrush did not accept the token"


class SemrushForbiddenError(SemrushAuthError):
    """403 on a workspace that is not the brand's own: unknown, not owned, or access lost.

    Semrush answers 403 (never 404) for unknown or deleted workspaces.
    """

    default_message = "Semrush refused access"


class SemrushGoneError(SemrushError):
    """403 on a workspace this service owns (the brand's pointer or candidate).

    Upstream answers 403 for deleted workspaces, so this means the workspace was deleted (or
    access to it lost) outside this service: drift that needs an operator's attention.
    """

    default_message = "Semrush workspace is gone"


class SemrushNotFoundError(SemrushError):
    """404: the project (or other object) does not exist."""

    default_message = "Semrush object not found"


class SemrushConflictError(SemrushError):
    """409: the upstream reports a conflicting object (e.g. a duplicate)."""

    default_message = "Semrush reported a conflict"


class SemrushQuotaError(SemrushError):
    """A metered write or publish was refused for quota. Permanent: alert, never retry.

    Upstream disguises it as a 405 whose body is an HTML/text page rather than JSON (a genuine
    method-not-allowed answers JSON); a 402 is treated the same way.
    """

    default_message = "Semrush quota exhausted"


class SemrushRateLimitedError(SemrushError):
    """429 after the client's retries, or with a ``Retry-After`` too long to wait in-process.

    ``retry_after`` (seconds, or ``None`` when the upstream gave none) is when a worker should
    re-schedule its step. Semrush rejects rate-limited requests before running them, so even a
    rate-limited POST had no effect (``ambiguous`` is False).
    """

    retryable = True
    default_message = "Semrush rate limit hit"


class SemrushBusyError(SemrushRateLimitedError):
    """No permit from the credential's shared bucket within the caller's patience: the request
    was never sent (SPEC §10.6). ``retry_after`` is when a permit is expected; ``status`` is
    None. A subclass of the rate-limited error: every caller that handles a 429 handles it."""

    default_message = "Semrush quota busy"


class SemrushCredentialRefusedError(SemrushError):
    """The credential is on hold (SPEC §13.2: Semrush answered 401 to a credential it had
    accepted before): the request was never sent, or the refused one did not run. A sync
    caller answers 503 `credentialRefused`; ``retry_after`` is when it is checked again. Not a
    rate-limited error: nothing re-schedules a sync request for it."""

    retryable = True
    default_message = "Semrush refused the credential; it is on hold"


class SemrushServerError(SemrushError):
    """5xx after the client's retries (idempotent calls) or at once (POST).

    On a POST the outcome is unknown (``ambiguous`` is True): a 500/504 can follow a commit.
    """

    retryable = True
    default_message = "Semrush server error"


class SemrushNetworkError(SemrushError):
    """No usable response: connection refused, reset, DNS or TLS failure.

    ``ambiguous`` is True for a POST unless the connection was never established.
    """

    retryable = True
    default_message = "Semrush could not be reached"


class SemrushTimeoutError(SemrushNetworkError):
    """The per-attempt deadline passed. ``ambiguous`` is True for a POST (a read timeout)."""

    default_message = "Semrush timed out"


class SemrushUnexpectedResponseError(SemrushError):
    """A success status with a body that is not the documented shape (e.g. not JSON)."""

    default_message = "Semrush answered with an unexpected shape"


def scrub_secrets(text: str, *, token: str | None = None) -> str:
    """Return ``text`` with bearer tokens, the given token and secret-looking fields redacted."""
    if token:
        text = text.replace(token, _REDACTED)
    text = _BEARER_RE.sub(f"Bearer {_REDACTED}", text)
    text = _SECRET_JSON_FIELD_RE.sub(rf'\g<1>"{_REDACTED}"', text)
    return _SECRET_HEADER_LINE_RE.sub(rf"\g<1>{_REDACTED}", text)


def excerpt(text: str, *, token: str | None) -> str:
    """``text`` fit for ``detail`` and the logs: scrubbed, then cut to 2000 characters.

    Scrubbing comes first so that a cut can never split a secret and leave a part of it.
    """
    return scrub_secrets(text, token=token)[:EXCERPT_LIMIT]


def error_for_response(
    *,
    status: int,
    headers: Mapping[str, str],
    text: str,
    operation: str,
    method: str,
    path: str,
    idempotent: bool,
    owned: bool,
    token: str,
    now: float,
) -> SemrushError:
    """The error for a non-2xx answer, chosen on its status and body shape only.

    ``idempotent`` False (a POST) makes a 5xx ``ambiguous``; ``owned`` (the workspace is the
    brand's own pointer or candidate) turns a 403 into :class:`SemrushGoneError`; ``now`` (wall
    clock, seconds since the epoch) reads an HTTP-date ``Retry-After``.
    """
    common: dict[str, Any] = {
        "operation": operation,
        "status": status,
        "method": method,
        "path": path,
        "detail": excerpt(text, token=token),
        "request_id": request_id_of(headers),
    }
    retry_after = parse_retry_after(headers.get("Retry-After"), now=now)
    if status == 429:
        return SemrushRateLimitedError(retry_after=retry_after, **common)
    if status >= 500:
        return SemrushServerError(ambiguous=not idempotent, retry_after=retry_after, **common)
    if status in (400, 422):
        return SemrushValidationError(**common)
    if status == 401:
        return SemrushUnauthorizedError(**common)
    if status == 403:
        return SemrushGoneError(**common) if owned else SemrushForbiddenError(**common)
    if status == 404:
        return SemrushNotFoundError(**common)
    if status == 409:
        return SemrushConflictError(**common)
    if status == 402 or (status == 405 and not _is_json(text)):
        # The disguised quota: an nginx text/html 405 on metered writes and publish. A genuine
        # method-not-allowed answers JSON and stays a plain SemrushError.
        return SemrushQuotaError(**common)
    return SemrushError(**common)


def error_for_failure(
    description: str,
    *,
    timed_out: bool,
    never_sent: bool,
    operation: str,
    method: str,
    path: str,
    idempotent: bool,
    token: str,
) -> SemrushNetworkError:
    """The error for a request that got no answer; a POST is ambiguous unless the connection
    was never established (nothing reached the server)."""
    error_class = SemrushTimeoutError if timed_out else SemrushNetworkError
    return error_class(
        operation=operation,
        method=method,
        path=path,
        detail=excerpt(description, token=token),
        ambiguous=not idempotent and not never_sent,
    )


def expect_object(body: Any, *, operation: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``body`` if it is a JSON object with the ``required`` keys, else the unexpected-shape
    error (``operation`` names the call)."""
    if not isinstance(body, dict) or any(key not in body for key in required):
        raise SemrushUnexpectedResponseError(
            operation=operation, status=None, detail=f"expected an object with {list(required)}"
        )
    return body


def expect_list_of_objects(body: Any, *, operation: str) -> list[dict[str, Any]]:
    """``body`` if it is a JSON array of objects, else the unexpected-shape error."""
    if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
        raise SemrushUnexpectedResponseError(
            operation=operation, status=None, detail="expected an array of objects"
        )
    return body


def parse_retry_after(raw: str | None, *, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now``: delta-seconds or an HTTP-date; None if absent or
    unreadable, never negative."""
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(seconds, 0.0)


def request_id_of(headers: Mapping[str, str]) -> str | None:
    """The upstream's request id header, for correlating a log line with Semrush support."""
    for header in ("X-Request-Id", "X-Request-ID", "X-Correlation-Id"):
        value = headers.get(header)
        if value:
            return value
    return None


def _is_json(text: str) -> bool:
    if not text.strip():
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


__all__ = [
    "EXCERPT_LIMIT",
    "GENERIC_AUTH_MESSAGE",
    "GENERIC_UPSTREAM_MESSAGE",
    "SemrushAuthError",
    "SemrushBusyError",
    "SemrushConfigurationError",
    "SemrushConflictError",
    "SemrushCredentialRefusedError",
    "SemrushError",
    "SemrushForbiddenError",
    "SemrushGoneError",
    "SemrushNetworkError",
    "SemrushNotFoundError",
    "SemrushQuotaError",
    "SemrushRateLimitedError",
    "SemrushServerError",
    "SemrushTimeoutError",
    "SemrushUnauthorizedError",
    "SemrushUnexpectedResponseError",
    "SemrushValidationError",
    "error_for_failure",
    "error_for_response",
    "excerpt",
    "expect_list_of_objects",
    "expect_object",
    "parse_retry_after",
    "request_id_of",
    "scrub_secrets",
]
