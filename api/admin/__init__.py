"""The admin of every app, registered when Django's autodiscovery imports `api.admin`."""

from api.admin import (  # noqa: F401
    jobs,
    ledger,
    markets,
    onboardings,
    provisioning,
    reconciliations,
    serenity,
    webhooks,
)
