"""The delivery step's task (a job id in) and its registration with the jobs runner.

A delivery's message runs the fairest due attempt under its slots (`webhooks.slots`), not
necessarily its own job; the worker's share of its pool is known from its start-up
(`worker_init`, before a prefork pool forks its processes)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from celery import shared_task
from celery.signals import worker_init
from django.conf import settings

from jobs.runner import register_step, run_step
from jobs.services import task_name_for
from webhooks import delivery, events
from webhooks.services import DELIVERY_STEP
from webhooks.slots import attempts_run, worker_share

logger = logging.getLogger("serenity.webhooks")

# No quota wrapper: deliveries never take a Semrush permit.
register_step(
    DELIVERY_STEP, run=delivery.deliver_webhook_step, on_unexpected=delivery.on_unexpected
)
register_step(
    events.EVENTS_STEP, run=events.job_events_step, on_unexpected=events.job_events_failed
)

# This worker's pool: its slots, and whether it consumes the webhook queue alone.
_pool: dict[str, Any] = {"slots": None, "webhooks_only": False}


@worker_init.connect
def remember_pool(sender: Any = None, **_: object) -> None:
    """The worker's pool, once its queues and concurrency are set (before its pool starts)."""
    if sender is None:
        return
    queues = set(sender.app.amqp.queues.consume_from or {})
    slots = getattr(sender, "concurrency", None)
    _pool["slots"] = slots if isinstance(slots, int) else None
    _pool["webhooks_only"] = queues == {settings.CELERY_WEBHOOK_QUEUE}
    logger.info(
        "webhook attempts share",
        extra={"pool_slots": _pool["slots"], "attempts_at_once": this_worker_share()},
    )


def this_worker_share() -> int:
    return worker_share(pool_slots=_pool["slots"], webhooks_only=_pool["webhooks_only"])


@shared_task(name=task_name_for(DELIVERY_STEP), ignore_result=True, bind=True)
def deliver_webhook(self: Any, job_id: str) -> None:
    attempts_run(
        job_id=uuid.UUID(job_id),
        worker=str(self.request.hostname or "local"),
        share=this_worker_share(),
    )


@shared_task(name=task_name_for(events.EVENTS_STEP), ignore_result=True)
def publish_webhook_events(job_id: str) -> None:
    run_step(job_id=job_id)
