"""Semrush enterprise write APIs: the client and its error family (see ``client.py``)."""

from provisioning.semrush.client import SemrushClient, semrush_client_for
from provisioning.semrush.errors import (
    SemrushAuthError,
    SemrushBusyError,
    SemrushConfigurationError,
    SemrushConflictError,
    SemrushCredentialRefusedError,
    SemrushError,
    SemrushForbiddenError,
    SemrushGoneError,
    SemrushNetworkError,
    SemrushNotFoundError,
    SemrushQuotaError,
    SemrushRateLimitedError,
    SemrushServerError,
    SemrushTimeoutError,
    SemrushUnauthorizedError,
    SemrushUnexpectedResponseError,
    SemrushValidationError,
)

__all__ = [
    "SemrushAuthError",
    "SemrushBusyError",
    "SemrushClient",
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
    "semrush_client_for",
]
