"""The organization's Semrush client, and the translation of upstream errors into domain errors
(SPEC §7: upstream errors never reach a client as they are)."""

from __future__ import annotations

from kernel import context
from kernel.errors import ConfigurationError, DomainError
from kernel.metrics import record_upstream_call
from provisioning import quota
from provisioning.credentials import CredentialWatch, credential_of
from provisioning.exceptions import (
    CredentialRefusedError,
    QuotaExceededError,
    SubworkspaceGoneError,
    UpstreamBusyError,
    UpstreamError,
    UpstreamForbiddenError,
    UpstreamRateLimitedError,
    UpstreamUnauthorizedError,
)
from provisioning.ledger.recorder import recorder_for
from provisioning.semrush import (
    SemrushAuthError,
    SemrushBusyError,
    SemrushClient,
    SemrushConfigurationError,
    SemrushCredentialRefusedError,
    SemrushError,
    SemrushGoneError,
    SemrushQuotaError,
    SemrushRateLimitedError,
    SemrushUnauthorizedError,
    semrush_client_for,
)
from serenity.models import Organization


def client_for_org(organization: Organization, **log_context: object) -> SemrushClient:
    """A client with the org's own credential, else the service default, taking every call's
    permit from that credential's shared bucket and a slot of its concurrency limit (SPEC
    §10.6, §11.1): inside a chained step (`quota.step_permits`) a late permit re-schedules the
    step; elsewhere it raises `SemrushBusyError` (503 `upstreamBusy`).

    One credential, one set of limits (`provisioning.credentials`).

    Its lines carry the step's row (`step_job_id`) as the log context has it: the runner binds
    it on a worker, not for an inline run, whose rows are never saved. Its writes and confirm
    reads are recorded in the ledger (SPEC §13.4, `provisioning.ledger`)."""
    credential = credential_of(organization)
    token = credential.token
    permits = quota.CredentialPermits(
        key=credential.key,
        limits=credential.limits,
        org_id=str(organization.id),
        guard=CredentialWatch(credential, organization_id=organization.id),
    )
    ids = {"org_id": str(organization.id), **log_context}
    bound = context.current()
    if "step_job_id" in bound:
        ids["step_job_id"] = bound["step_job_id"]
    try:
        return semrush_client_for(
            token=token,
            log_context=ids,
            on_call=record_upstream_call,
            permits=permits,
            recorder=recorder_for(organization_id=str(organization.id), **log_context),
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
    if isinstance(exc, SemrushCredentialRefusedError):
        return CredentialRefusedError(retry_after=exc.retry_after)
    if isinstance(exc, SemrushBusyError):
        return UpstreamBusyError(retry_after=exc.retry_after)
    if isinstance(exc, SemrushRateLimitedError):
        return UpstreamRateLimitedError(retry_after=exc.retry_after)
    return UpstreamError()
