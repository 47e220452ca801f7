"""The delivery step's task (a job id in) and its registration with the jobs runner."""

from __future__ import annotations

from celery import shared_task

from jobs.runner import register_step, run_step
from jobs.services import task_name_for
from webhooks import delivery
from webhooks.services import DELIVERY_STEP

# No quota wrapper: deliveries never take a Semrush permit.
register_step(
    DELIVERY_STEP, run=delivery.deliver_webhook_step, on_unexpected=delivery.on_unexpected
)


@shared_task(name=task_name_for(DELIVERY_STEP), ignore_result=True)
def deliver_webhook(job_id: str) -> None:
    run_step(job_id=job_id)
