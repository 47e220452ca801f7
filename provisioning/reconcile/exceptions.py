"""The reconciliations' domain errors (SPEC §13.1)."""

from __future__ import annotations

import uuid

from kernel.errors import ConflictError, NotFoundError


class ReconciliationInProgressError(ConflictError):
    code = "reconciliationInProgress"
    default_message = "A reconciliation of this organization is in progress; wait for it to end."

    def __init__(self, *, reconciliation_id: uuid.UUID) -> None:
        super().__init__(details={"reconciliationId": str(reconciliation_id)})


class ReconciliationNotFoundError(NotFoundError):
    code = "reconciliationNotFound"
    default_message = "Reconciliation not found."


class BrandChangedError(ConflictError):
    code = "brandChanged"
    default_message = "The brand changed since the reconciliation read it; reconcile it again."
