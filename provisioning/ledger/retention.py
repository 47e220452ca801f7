"""Retention of the ledger (SPEC §13.4): beat deletes rows older than
`SERENITY_LEDGER_RETENTION_DAYS` (90 by default)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from provisioning.ledger.models import UpstreamCall

# Deleted in batches: one long DELETE would hold its locks and bloat the WAL in one go.
BATCH_SIZE = 5000


def upstream_calls_purge(*, older_than_days: float | None = None) -> int:
    """Delete the rows recorded longer ago than the retention; returns how many. Idempotent:
    two concurrent purges delete each row once (the loser's DELETE finds it gone)."""
    days = settings.SERENITY_LEDGER_RETENTION_DAYS if older_than_days is None else older_than_days
    cutoff = timezone.now() - timedelta(days=days)
    deleted = 0
    while True:
        batch = list(
            UpstreamCall.objects.filter(at__lt=cutoff).values_list("pk", flat=True)[:BATCH_SIZE]
        )
        if not batch:
            return deleted
        deleted += UpstreamCall.objects.filter(pk__in=batch).delete()[0]
