"""The admin of every app, registered when Django's autodiscovery imports `api.admin`."""

from api.admin import jobs, ledger, onboardings, provisioning, serenity, webhooks  # noqa: F401
