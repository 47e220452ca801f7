"""Periodic maintenance of the API's own records."""

from __future__ import annotations

from celery import shared_task

from serenity.idempotency import idempotency_keys_purge


@shared_task(name="serenity.purge_idempotency_keys", ignore_result=True)
def purge_idempotency_keys() -> int:
    """Delete expired Idempotency-Key answers (SPEC §10.3); beat runs it hourly."""
    return idempotency_keys_purge()
