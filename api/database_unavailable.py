"""A database that refuses connections is a 503, never a traceback (SPEC §13.6).

Seen from outside with several stacks on one PostgreSQL: job polls answered 500 on "too many
clients". A request whose database connection cannot be made (refused, the server full, shutting
down) or is lost answers 503 `databaseUnavailable` with `Retry-After`, and leaves one WARNING
line without a traceback. The DRF views get it from the one exception handler (`api.errors`),
the other views (the admin, /metrics) from `DatabaseUnavailableMiddleware`. Errors the database
answers to a statement (a deadlock, a constraint) are not this: they stay what they were.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

from kernel.errors import DomainError

logger = logging.getLogger("api")

# Seconds a client is told to wait: long enough for a pool or a restart to free connections.
RETRY_AFTER_SECONDS = 5

# SQLSTATE classes of a connection that cannot be had: 08 connection exception, 53 insufficient
# resources (53300 too many connections), and the server shutting down or starting (57P01-03).
_UNAVAILABLE_STATES = ("08", "53", "57P01", "57P02", "57P03")


class DatabaseUnavailableError(DomainError):
    code = "databaseUnavailable"
    http_status = 503
    default_message = "The database is not accepting connections; retry later."
    retry_after = RETRY_AFTER_SECONDS


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether `exc` is Django's error for a PostgreSQL connection that could not be made or
    was lost: psycopg's error without a SQLSTATE (libpq's own, at connect or on a lost
    connection), or one of the states above."""
    if isinstance(exc, InterfaceError):
        return True  # Django's "connection already closed"
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    if not isinstance(cause, psycopg.OperationalError):
        return False
    state = cause.sqlstate
    return state is None or state.startswith(_UNAVAILABLE_STATES)


def log_unavailable(request: HttpRequest, exc: BaseException) -> None:
    """One line, no traceback: the first line of the driver's message says which failure."""
    reason = str(exc.__cause__ or exc).strip().splitlines()[:1]
    logger.warning(
        "database unavailable",
        extra={"path": request.path, "reason": reason[0][:300] if reason else ""},
    )


def unavailable_response() -> JsonResponse:
    error = DatabaseUnavailableError()
    response = JsonResponse(error.as_body(), status=error.http_status)
    response["Retry-After"] = str(error.retry_after)
    return response


class DatabaseUnavailableMiddleware:
    """For the views DRF does not handle (the admin, /metrics): their connection failure
    answers the envelope's 503 rather than Django's 500 with a logged traceback."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_database_unavailable(exception):
            return None
        log_unavailable(request, exception)
        return unavailable_response()
