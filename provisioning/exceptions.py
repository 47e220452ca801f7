"""Domain errors of provisioning (rendered by the API's one exception handler)."""

from kernel.errors import ConflictError, DomainError, NotFoundError


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


class WorkspaceNotEmptyError(DomainError):
    code = "workspaceNotEmpty"
    http_status = 502
    default_message = "A Semrush workspace with this name exists and is not empty."


class SubworkspaceCreationFailedError(DomainError):
    code = "subworkspaceCreationFailed"
    http_status = 502
    default_message = "Semrush could not create the brand's workspace."


class SubworkspaceCreationTimeoutError(DomainError):
    code = "subworkspaceCreationTimeout"
    http_status = 504
    default_message = "The brand's Semrush workspace did not become ready in time."


class SubworkspaceGoneError(DomainError):
    code = "subworkspaceGone"
    http_status = 502
    default_message = "The brand's Semrush workspace no longer exists; activate the brand again."


class UpstreamError(DomainError):
    code = "serenityUpstreamError"
    http_status = 502
    default_message = "Semrush could not complete the request."


class UpstreamRateLimitedError(UpstreamError):
    """Semrush kept answering 429; `retry_after` (seconds) says when to try again."""

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UpstreamUnauthorizedError(DomainError):
    code = "upstreamUnauthorized"
    http_status = 401
    default_message = "Semrush rejected the organization's credential."


class UpstreamForbiddenError(DomainError):
    code = "upstreamForbidden"
    http_status = 403
    default_message = "Semrush refused access with the organization's credential."


class QuotaExceededError(ConflictError):
    code = "quotaExceeded"
    default_message = "The Semrush subscription quota is exhausted."


class ActivationIncompleteError(DomainError):
    code = "serenityActivationIncomplete"
    http_status = 502
    default_message = "The brand could not be activated."
