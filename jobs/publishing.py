"""Publishing job messages to the broker: bounded, never raising into the caller.

The job row is the source of truth; a message is only transport. A publish that fails is
logged and left to the dispatcher, which re-publishes every due job that has no live message.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from datetime import timedelta
from typing import Any

from celery import current_app as celery_app
from django.conf import settings
from django.db import DatabaseError
from django.db.models import F
from django.utils import timezone
from kombu.connection import ConnectionPool

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
    failure = _send(task_name=task_name, args=[str(job_id)], countdown=countdown)
    if failure is not None:
        logger.warning(
            "job publish failed; the dispatcher will re-publish",
            extra={"job_id": str(job_id), "task": task_name, "error_class": failure},
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


def publish_task(*, task_name: str, args: list[Any]) -> bool:
    """Send one message for the task named `task_name` (by name: the publisher needs no import
    of the app that runs it). Bounded by JOBS_PUBLISH_TIMEOUT_SECONDS; never raises; returns
    whether the broker accepted it."""
    failure = _send(task_name=task_name, args=args)
    if failure is not None:
        logger.warning("publish failed", extra={"task": task_name, "error_class": failure})
    return failure is None


def _send(*, task_name: str, args: list[Any], countdown: float = 0.0) -> str | None:
    """Publish; the error's class name when the broker did not take the message."""
    try:
        with _publishing_pool().acquire(
            block=True, timeout=settings.JOBS_PUBLISH_TIMEOUT_SECONDS
        ) as connection:
            celery_app.send_task(
                task_name,
                args=args,
                countdown=countdown if countdown > 0 else None,
                retry=False,
                connection=connection,
            )
    except Exception as exc:
        return type(exc).__name__
    return None


_pools: dict[tuple[int, str], ConnectionPool] = {}


def _bounded_transport_options() -> dict[str, Any]:
    timeout = settings.JOBS_PUBLISH_TIMEOUT_SECONDS
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        return {}
    return {"socket_timeout": timeout, "socket_connect_timeout": timeout}


def _publishing_pool() -> ConnectionPool:
    """Connections for publishing, every socket operation bounded by
    JOBS_PUBLISH_TIMEOUT_SECONDS (SPEC §2). The app's own pool carries the transport's longer
    socket timeout, which the workers' consumers need: with it, a broker that accepts
    connections but never answers (frozen, or behind a broken network) held every async
    request about 5 s instead of 1 (found by the chaos suite). One pool per process and broker
    URL (after a fork, the child builds its own)."""
    key = (os.getpid(), str(celery_app.conf.broker_write_url or celery_app.conf.broker_url))
    pool = _pools.get(key)
    if pool is None:
        connection = celery_app.connection_for_write(
            transport_options=_bounded_transport_options(),
            connect_timeout=settings.JOBS_PUBLISH_TIMEOUT_SECONDS,
        )
        pool = connection.Pool(limit=celery_app.conf.broker_pool_limit or 10)
        for stale_key, stale in list(_pools.items()):
            if stale_key[0] == key[0]:
                with contextlib.suppress(Exception):
                    stale.force_close_all()
        _pools.clear()
        _pools[key] = pool
    return pool


def broker_reachable() -> bool:
    try:
        with celery_app.connection_for_write(
            transport_options=_bounded_transport_options(),
            connect_timeout=settings.JOBS_PUBLISH_TIMEOUT_SECONDS,
        ) as connection:
            connection.ensure_connection(
                max_retries=0, timeout=settings.JOBS_PUBLISH_TIMEOUT_SECONDS
            )
        return True
    except Exception:
        logger.warning("readiness: broker unreachable", exc_info=True)
        return False
