"""Provisioning attempt state machine (SPEC §6.1).

    pending ──► ready    the work finished (for a chain: after promotion and the chained job)
       │
       └──────► failed   terminal | exhausted | upstream | gone | ambiguous | unexpected
                         | cancelled | stale

Every write is one conditional UPDATE on the attempt's id and `status = pending`. A write that
changes no row means the attempt was cancelled or reconciled meanwhile: the caller stops without
side effects, cleaning up only what it freshly created itself.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from kernel.errors import clean_message
from provisioning.models import AttemptReason, AttemptStatus, ProvisioningAttempt

ALLOWED: dict[AttemptStatus, tuple[AttemptStatus, ...]] = {
    AttemptStatus.READY: (AttemptStatus.PENDING,),
    AttemptStatus.FAILED: (AttemptStatus.PENDING,),
}


def transition(
    *,
    attempt_id: uuid.UUID,
    to: AttemptStatus,
    reason: AttemptReason | None = None,
    error: str | None = None,
    **fields: Any,
) -> bool:
    """Finish a pending attempt. Returns whether this call changed the row."""
    now = timezone.now()
    sources = ALLOWED[to]
    source = {"status": sources[0]} if len(sources) == 1 else {"status__in": sources}
    changed = ProvisioningAttempt.objects.filter(pk=attempt_id, **source).update(
        status=to,
        reason=reason,
        error=clean_message(error) if error else None,
        updated_at=now,
        finished_at=now,
        **fields,
    )
    return changed == 1


def update_pending(
    *, attempt_id: uuid.UUID, only_if: dict[str, Any] | None = None, **fields: Any
) -> bool:
    """Change fields of a still-pending attempt (record a candidate, mark promotion, bump the
    staleness clock). `only_if` adds conditions, e.g. `{"candidate_workspace_id": None}`."""
    pending = ProvisioningAttempt.objects.filter(
        pk=attempt_id, status=AttemptStatus.PENDING, **(only_if or {})
    )
    return pending.update(updated_at=timezone.now(), **fields) == 1


def touch(*, attempt_id: uuid.UUID) -> bool:
    """Bump the staleness clock; False when the attempt is no longer pending."""
    return update_pending(attempt_id=attempt_id)
