"""The stale sweep (SPEC §6.4): reconcile attempts pending past the threshold, and empty the
freshly created candidates of failed attempts that nobody cleaned up."""

from __future__ import annotations

import logging

from provisioning import services as attempts

logger = logging.getLogger("serenity.provisioning")


def attempts_sweep() -> dict[str, int]:
    from provisioning.steps import cleanup_candidate

    reconciled = 0
    for attempt in attempts.stale_attempts():
        if attempts.attempt_reconcile_stale(attempt=attempt):
            reconciled += 1
    cleaned = 0
    for attempt in attempts.attempts_needing_cleanup():
        try:
            cleanup_candidate(attempt_id=attempt.id)
            cleaned += 1
        except Exception:
            logger.warning(
                "cleanup failed; will retry at the next sweep",
                exc_info=True,
                extra={"attempt_id": str(attempt.id)},
            )
    return {"reconciled": reconciled, "cleaned": cleaned}
