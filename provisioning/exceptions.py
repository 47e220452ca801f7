"""Domain errors of provisioning (rendered by the API's one exception handler).

Each error that can end provisioning work carries its own vocabulary: the attempt's `reason`
(SPEC §6.1), whether the job's error is `retryable`, and the job's generic `job_message`
(SPEC §4.6). `job_error()` and `attempt_reason()` read them for any `DomainError`.
"""

from typing import Any

from kernel.errors import ConflictError, DomainError, NotFoundError
from provisioning.models import AttemptReason

JOB_FAILED_MESSAGE = "The job failed unexpectedly."


def attempt_reason(error: DomainError) -> AttemptReason:
    """The attempt's reason for an error that ended its work (`upstream` unless it says)."""
    return getattr(error, "reason", AttemptReason.UPSTREAM)


def job_error(error: DomainError) -> dict[str, Any]:
    """The `{code, message, retryable}` a job reports for `error`: the error's own code and
    generic message when it is one a job may report, else `jobFailed`."""
    message = getattr(error, "job_message", None)
    if message is None:
        return {"code": "jobFailed", "message": JOB_FAILED_MESSAGE, "retryable": False}
    return {"code": error.code, "message": message, "retryable": getattr(error, "retryable", False)}


class ProvisioningInProgressError(ConflictError):
    code = "semrush_provisioning_in_progress"
    default_message = "A Semrush provisioning job is already in progress for this brand."


class ProvisioningCancelledError(ConflictError):
    code = "provisioningCancelled"
    default_message = "Provisioning was cancelled."


class ProvisioningIncompleteError(ConflictError):
    code = "semrush_provisioning_incomplete"
    default_message = (
        "The brand has no Semrush workspace yet; activate the brand before adding markets."
    )


class NoParentWorkspaceError(NotFoundError):
    code = "noParentWorkspace"
    default_message = "The organization has no Semrush parent workspace."


class WorkspaceMisconfiguredError(ConflictError):
    code = "workspaceMisconfigured"
    default_message = "The brand's workspace is misconfigured."


class AmbiguousWorkspaceError(ConflictError):
    code = "ambiguousWorkspace"
    default_message = "Several Semrush workspaces match this brand; an operator must resolve it."
    reason = AttemptReason.AMBIGUOUS
    retryable = False
    job_message = "Several Semrush workspaces match this brand."


class WorkspaceNotEmptyError(DomainError):
    code = "workspaceNotEmpty"
    http_status = 502
    default_message = "A Semrush workspace with this name exists and is not empty."
    reason = AttemptReason.AMBIGUOUS
    retryable = False
    job_message = "A Semrush workspace with this name exists and is not empty."


class SubworkspaceCreationFailedError(DomainError):
    code = "subworkspaceCreationFailed"
    http_status = 502
    default_message = "Semrush could not create the brand's workspace."
    reason = AttemptReason.TERMINAL
    retryable = False
    job_message = "Semrush could not create the brand's workspace."


class SubworkspaceCreationTimeoutError(DomainError):
    code = "subworkspaceCreationTimeout"
    http_status = 504
    default_message = "The brand's Semrush workspace did not become ready in time."
    reason = AttemptReason.EXHAUSTED
    retryable = True
    job_message = "The brand's workspace did not become ready in time."


class SubworkspaceGoneError(DomainError):
    code = "subworkspaceGone"
    http_status = 502
    default_message = "The brand's Semrush workspace no longer exists; activate the brand again."
    reason = AttemptReason.GONE
    retryable = True
    job_message = "The brand's workspace no longer exists; activate the brand again."


class UpstreamError(DomainError):
    code = "serenityUpstreamError"
    http_status = 502
    default_message = "Semrush could not complete the request."
    retryable = True
    job_message = "Semrush could not complete the request."


class UpstreamRateLimitedError(UpstreamError):
    """Semrush kept answering 429; `retry_after` (seconds) says when to try again."""

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UpstreamBusyError(UpstreamRateLimitedError):
    """The credential's shared quota had no permit within the request's patience (SPEC §10.6):
    nothing was sent for the refused call. Answered 503 with `Retry-After` (`retry_after`)."""

    code = "upstreamBusy"
    http_status = 503
    default_message = "Semrush is busy with this organization's requests; retry later."
    job_message = "Semrush is busy with this organization's requests."


class CredentialRefusedError(DomainError):
    """The org's Semrush credential is on hold (SPEC §13.2: Semrush refused it after accepting
    it before): nothing was sent. Answered 503 with `Retry-After` (when it is checked again)."""

    code = "credentialRefused"
    http_status = 503
    retryable = True

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    default_message = (
        "Semrush refuses the organization's credential for now; work that needs it waits."
    )
    job_message = "Semrush refuses the organization's credential for now."


class UpstreamUnauthorizedError(DomainError):
    code = "upstreamUnauthorized"
    http_status = 401
    default_message = "Semrush rejected the organization's credential."
    retryable = False
    job_message = "Semrush rejected the organization's credential."


class UpstreamForbiddenError(DomainError):
    code = "upstreamForbidden"
    http_status = 403
    default_message = "Semrush refused access with the organization's credential."
    retryable = False
    job_message = "Semrush refused access with the organization's credential."


class QuotaExceededError(ConflictError):
    code = "quotaExceeded"
    default_message = "The Semrush subscription quota is exhausted."


class ActivationIncompleteError(DomainError):
    code = "serenityActivationIncomplete"
    http_status = 502
    default_message = "The brand could not be activated."


class OnboardingNotFoundError(NotFoundError):
    code = "onboardingNotFound"
    default_message = "Onboarding not found."


class PublishFailedError(DomainError):
    """Semrush accepted the publish but could not make the project live (SPEC §12.1). The
    market keeps its project (`publish_failed`): a later create of the slice resumes it."""

    code = "publishFailed"
    http_status = 502
    default_message = "Semrush could not publish the market's project; create the market again."
    retryable = True
    job_message = "Semrush could not publish the market's project; create the market again."


class PublishTimeoutError(DomainError):
    """The publish was still running at the publish timeout (SPEC §12.1)."""

    code = "publishTimeout"
    http_status = 504
    default_message = "Semrush did not publish the market's project in time; create it again."
    retryable = True
    job_message = "Semrush did not publish the market's project in time; create it again."


class OnboardingFinishedError(ConflictError):
    code = "onboardingFinished"
    default_message = "The onboarding has already ended: there is nothing left to cancel."


class OnboardingInProgressError(ConflictError):
    """A redrive of an onboarding that has not ended, or whose earlier redrive has not
    (SPEC §13.2); `details.onboardingId` names the one running."""

    code = "onboardingInProgress"
    default_message = (
        "The onboarding (or an earlier redrive of it) is still in progress: redrive it once "
        "it has ended."
    )


class NothingToRetryError(ConflictError):
    code = "nothingToRetry"
    default_message = (
        "No item of the onboarding failed or was cancelled: there is nothing to retry."
    )


class OnboardingLimitError(DomainError):
    """The onboarding would queue more work than one org may (SPEC §12.4): its open items past
    the org's cap, or more markets in all than one onboarding holds. Nothing is written; the
    client retries after `retry_after` seconds (the `Retry-After` header)."""

    code = "onboardingLimit"
    http_status = 429
    default_message = "The onboarding would queue more work than the organization may."

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class QueuedMarketsLimitError(DomainError):
    """The request would queue more markets than the org may have queued (SPEC §13.6:
    `provisioning.caps`). Nothing is written; the client retries after `retry_after` seconds
    (the `Retry-After` header)."""

    code = "queuedMarketsLimit"
    http_status = 429
    default_message = "The request would queue more markets than the organization may."

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
