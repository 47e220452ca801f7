"""Publishing job messages to the broker: bounded, never raising into the caller.

The job row is the source of truth; a message is only transport. A publish that fails is
logged and left to the dispatcher, which re-publishes every due job that has no live message.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError
from django.db.models import F
from django.utils import timezone

from config.celery import app as celery_app
from jobs.models import AsyncJob

logger = logging.getLogger("serenity.jobs")


def publish_job(
    *, job_id: uuid.UUID, task_name: str, countdown: float = 0.0, premarked: bool = False
) -> bool:
    """Send one message for `job_id` (with a countdown for a settle wait). Returns whether the
    broker accepted it; never raises. Waits at most about JOBS_PUBLISH_TIMEOUT_SECONDS.

    The row's `published_at` records when the message is due; with `premarked` the row already
    says so (set when it was written) and only a failure is recorded (`published_at` cleared,
    so that the dispatcher re-sends it at its next round)."""
    try:
        celery_app.send_task(
            task_name,
            args=[str(job_id)],
            countdown=countdown if countdown > 0 else None,
            queue=settings.CELERY_TASK_DEFAULT_QUEUE,
            retry=False,
        )
    except Exception as exc:
        logger.warning(
            "job publish failed; the dispatcher will re-publish",
            extra={"job_id": str(job_id), "task": task_name, "error_class": type(exc).__name__},
        )
        if premarked:
            with contextlib.suppress(DatabaseError):
                AsyncJob.objects.filter(pk=job_id, claim_token__isnull=True).update(
                    published_at=None
                )
        return False
    if premarked:
        return True
    try:
        AsyncJob.objects.filter(pk=job_id).update(
            published_at=timezone.now() + timedelta(seconds=max(countdown, 0.0)),
            publish_count=F("publish_count") + 1,
        )
    except DatabaseError:
        # The message is out; without the mark the dispatcher sends a harmless duplicate.
        logger.warning(
            "job published but not marked; the dispatcher may publish it again",
            extra={"job_id": str(job_id), "task": task_name},
        )
    return True


def broker_reachable() -> bool:
    try:
        with celery_app.connection_for_write() as connection:
            connection.ensure_connection(
                max_retries=0, timeout=settings.JOBS_PUBLISH_TIMEOUT_SECONDS
            )
        return True
    except Exception:
        logger.warning("readiness: broker unreachable", exc_info=True)
        return False
