"""The organization's Semrush client, and the translation of upstream errors into domain errors
(SPEC §7: upstream errors never reach a client as they are)."""

from __future__ import annotations

from kernel.errors import ConfigurationError, DomainError
from kernel.metrics import record_upstream_call
from provisioning.exceptions import (
    QuotaExceededError,
    SubworkspaceGoneError,
    UpstreamError,
    UpstreamForbiddenError,
    UpstreamRateLimitedError,
    UpstreamUnauthorizedError,
)
from provisioning.semrush import (
    SemrushAuthError,
    SemrushClient,
    SemrushConfigurationError,
    SemrushError,
    SemrushGoneError,
    SemrushQuotaError,
    SemrushRateLimitedError,
    SemrushUnauthorizedError,
    semrush_client_for,
)
from serenity.models import Organization


def client_for_org(organization: Organization, **log_context: object) -> SemrushClient:
    """A client with the org's own credential, else the service default."""
    try:
        token = organization.semrush_credential()
    except ValueError as exc:
        raise ConfigurationError("The organization's Semrush credential cannot be read.") from exc
    try:
        return semrush_client_for(
            token=token,
            log_context={"org_id": str(organization.id), **log_context},
            on_call=record_upstream_call,
        )
    except SemrushConfigurationError as exc:
        raise ConfigurationError() from exc


def translate_upstream(exc: SemrushError) -> DomainError:
    """Upstream errors never reach a client as they are (SPEC §7)."""
    if isinstance(exc, SemrushGoneError):
        return SubworkspaceGoneError()
    if isinstance(exc, SemrushUnauthorizedError):
        return UpstreamUnauthorizedError()
    if isinstance(exc, SemrushAuthError):
        return UpstreamForbiddenError()
    if isinstance(exc, SemrushQuotaError):
        return QuotaExceededError()
    if isinstance(exc, SemrushConfigurationError):
        return ConfigurationError()
    if isinstance(exc, SemrushRateLimitedError):
        return UpstreamRateLimitedError(retry_after=exc.retry_after)
    return UpstreamError()
