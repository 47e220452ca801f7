"""The domain error base class shared by every app.

A service raises a `DomainError` subclass (or an instance with an explicit code); the one DRF
exception handler renders it as `{"error": code, "message": message, "details"?}`.
"""

from __future__ import annotations

from typing import Any

MAX_MESSAGE_LENGTH = 500


def clean_message(message: str) -> str:
    """Messages are one line and at most 500 characters, whatever produced them."""
    single_line = " ".join(str(message).replace("\r", " ").replace("\n", " ").split())
    return single_line[:MAX_MESSAGE_LENGTH]


class DomainError(Exception):
    code: str = "internalServerError"
    http_status: int = 500
    default_message: str = "An unexpected error occurred."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        http_status: int | None = None,
        details: dict[str, Any] | None = None,
        field: str | None = None,
    ) -> None:
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status
        self.message = clean_message(message or self.default_message)
        # An error about one field names it in `details.field` (SPEC §12.2), whatever its code.
        self.details = {**(details or {}), "field": field} if field is not None else details
        super().__init__(self.message)

    def as_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return body


class InvalidRequestError(DomainError):
    code = "invalidRequest"
    http_status = 400
    default_message = "The request is invalid."


class NotFoundError(DomainError):
    code = "notFound"
    http_status = 404
    default_message = "Not found."


class ForbiddenError(DomainError):
    code = "forbidden"
    http_status = 403
    default_message = "You are not allowed to do this."


class ConflictError(DomainError):
    http_status = 409
    code = "conflict"
    default_message = "The request conflicts with the current state."


class ConfigurationError(DomainError):
    code = "configurationError"
    http_status = 503
    default_message = "The service is not configured for this operation."
