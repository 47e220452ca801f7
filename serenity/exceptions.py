"""Domain errors of organizations, brands, markets and prompts."""

from kernel.errors import ConflictError, DomainError, ForbiddenError, NotFoundError


class OrganizationNotFoundError(NotFoundError):
    code = "notFound"
    default_message = "Organization not found."


class NotAMemberError(ForbiddenError):
    default_message = "You are not allowed to act on this organization."


class BrandNotFoundError(NotFoundError):
    code = "brandNotFound"
    default_message = "Brand not found."


class SerenityNotActiveError(NotFoundError):
    code = "serenityNotActive"
    default_message = "Serenity is not active for this brand."


class SerenityNotEnabledError(ForbiddenError):
    code = "serenityNotEnabled"
    default_message = "Serenity is not enabled for this organization."


class BrandExistsError(ConflictError):
    code = "brandExists"
    default_message = "A brand with this name already exists in the organization."


class BaseUrlRequiredError(DomainError):
    code = "baseUrlRequired"
    http_status = 400
    default_message = "baseUrl is required."


class UnknownMarketError(DomainError):
    code = "unknownMarket"
    http_status = 400
    default_message = "market is not a known ISO 3166 country."


class UnknownLanguageError(DomainError):
    code = "unknownLanguage"
    http_status = 400
    default_message = "languageCode is not in the upstream language catalogue."


class MarketNotFoundError(NotFoundError):
    code = "marketNotFound"
    default_message = "Market not found."


class SliceExistsError(ConflictError):
    code = "sliceExists"
    default_message = "A market already exists for this country and language."


class MarketBusyError(ConflictError):
    code = "marketBusy"
    default_message = "The market is being created; try again when it has finished."


class IdempotencyKeyReusedError(DomainError):
    code = "idempotencyKeyReused"
    http_status = 422
    default_message = "This Idempotency-Key was already used with a different request body."


class IdempotencyKeyInUseError(ConflictError):
    code = "idempotencyKeyInUse"
    default_message = (
        "A request with this Idempotency-Key is still being processed; retry after it finishes."
    )
