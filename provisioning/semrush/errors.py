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

from typing import ClassVar

GENERIC_AUTH_MESSAGE = "Upstream authorization failed"
GENERIC_UPSTREAM_MESSAGE = "Upstream request failed"


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


__all__ = [
    "GENERIC_AUTH_MESSAGE",
    "GENERIC_UPSTREAM_MESSAGE",
    "SemrushAuthError",
    "SemrushConfigurationError",
    "SemrushConflictError",
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
]
