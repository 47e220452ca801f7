"""The one DRF exception handler: every error leaves as `{"error", "message", "details"?}`."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from api.database_unavailable import (
    DatabaseUnavailableError,
    is_database_unavailable,
    log_unavailable,
)
from api.responses import ErrorEnvelopeSerializer
from kernel.errors import (
    DomainError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    clean_message,
)

logger = logging.getLogger("api")


def _first_field_error(detail: Any, path: str = "") -> tuple[str, str]:
    """Walk DRF's nested error detail to the first (field path, message) pair."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            # A list's items are keyed by their index: `brands[3].markets[0].market`.
            if isinstance(key, int):
                sub = f"{path}[{key}]"
            else:
                sub = f"{path}.{key}" if path else str(key)
            if key == "non_field_errors":
                sub = path
            return _first_field_error(value, sub)
    if isinstance(detail, list) and detail:
        for index, item in enumerate(detail):
            if isinstance(item, dict | list):
                return _first_field_error(item, f"{path}[{index}]")
            return path, str(item)
    return path, str(detail)


def _validation_error(exc: exceptions.ValidationError) -> DomainError:
    """A serializer error names the first offending field. Domain codes such as
    `unknownMarket` are raised as `DomainError`s by the validators themselves."""
    field, message = _first_field_error(exc.detail)
    text = f"{field}: {message}" if field else message
    return DomainError(
        text, code="invalidRequest", http_status=400, details={"field": field} if field else None
    )


class AuthenticationRequiredError(DomainError):
    code = "authenticationRequired"
    http_status = 401
    default_message = "Authentication credentials were not provided or are invalid."


class UnsupportedMediaTypeError(DomainError):
    code = "unsupportedMediaType"
    http_status = 415
    default_message = "Use Content-Type: application/json."


class MethodNotAllowedError(DomainError):
    code = "methodNotAllowed"
    http_status = 405
    default_message = "Method not allowed."


class NotAcceptableError(DomainError):
    code = "notAcceptable"
    http_status = 406
    default_message = "Not acceptable."


class RateLimitedError(DomainError):
    code = "rateLimited"
    http_status = 429
    default_message = "Too many requests."


class RequestTooLargeError(DomainError):
    """Answered by kernel.request_limits before any view runs; named here for the document."""

    code = "requestTooLarge"
    http_status = 413
    default_message = f"The body is larger than {settings.SERENITY_MAX_BODY_BYTES} bytes."


# DRF's refusals, as the envelope names them (the first match wins).
FRAMEWORK_ERRORS: list[tuple[type[Exception] | tuple[type[Exception], ...], type[DomainError]]] = [
    ((exceptions.NotAuthenticated, exceptions.AuthenticationFailed), AuthenticationRequiredError),
    (exceptions.UnsupportedMediaType, UnsupportedMediaTypeError),
    (exceptions.MethodNotAllowed, MethodNotAllowedError),
    (exceptions.NotAcceptable, NotAcceptableError),
    ((Http404, exceptions.NotFound), NotFoundError),
    ((exceptions.PermissionDenied, DjangoPermissionDenied), ForbiddenError),
    (exceptions.Throttled, RateLimitedError),
]


def to_domain_error(exc: Exception) -> DomainError | None:
    if isinstance(exc, DomainError):
        return exc
    if isinstance(exc, exceptions.ValidationError):
        return _validation_error(exc)
    if isinstance(exc, exceptions.ParseError):
        return InvalidRequestError("The body must be a JSON object.")
    for drf_error, error in FRAMEWORK_ERRORS:
        if isinstance(exc, drf_error):
            return error()
    if isinstance(exc, exceptions.APIException):
        return InvalidRequestError(clean_message(str(exc.detail)))
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    error = to_domain_error(exc)
    if error is None and is_database_unavailable(exc):
        # 503 databaseUnavailable, one line and no traceback (api.database_unavailable).
        log_unavailable(context["request"], exc)
        error = DatabaseUnavailableError()
    if error is None:
        logger.exception("unhandled error", exc_info=exc)
        error = DomainError()
    set_rollback()
    headers: dict[str, str] = {}
    if isinstance(error, AuthenticationRequiredError):
        # Only our own token's refusal invites the client to authenticate; an upstream 401
        # (upstreamUnauthorized) is about the org's Semrush credential, not the caller's.
        headers["WWW-Authenticate"] = "Bearer"
    # DRF's Throttled carries the wait in `wait`; our own errors in `retry_after`.
    retry_after = getattr(exc, "retry_after", getattr(exc, "wait", None))
    if isinstance(error, DatabaseUnavailableError):
        retry_after = error.retry_after
    if isinstance(retry_after, int | float) and retry_after > 0:
        headers["Retry-After"] = str(max(1, int(retry_after)))
    body = ErrorEnvelopeSerializer(error.as_body()).data
    return Response(body, status=error.http_status, headers=headers)


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"error": "notFound", "message": "Not found."}, status=404)


@csrf_exempt
def unknown_route_view(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """The last route: whatever matched nothing answers the envelope, in every mode (with
    DEBUG on, Django would answer its HTML technical 404 listing the URLconf instead of
    calling `handler404`)."""
    return not_found_view(request)


def server_error_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        {"error": "internalServerError", "message": "An unexpected error occurred."}, status=500
    )
