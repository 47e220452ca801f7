from kernel.errors import ConflictError, InvalidRequestError, NotFoundError


class WebhookNotFoundError(NotFoundError):
    code = "webhookNotFound"
    default_message = "Webhook not found."


class WebhookLimitError(InvalidRequestError):
    default_message = "An organization has at most 10 webhooks."


class WebhookUrlError(InvalidRequestError):
    """A `url` refused at registration (syntax, scheme or a non-public address)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"url: {reason}", details={"field": "url"})


class WebhookDisabledError(ConflictError):
    code = "webhookDisabled"
    default_message = "The webhook is disabled: enable it before sending it a test event."
