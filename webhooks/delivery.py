"""The delivery step: one attempt of one delivery, run by the jobs runner (SPEC §11.3).

    2xx within 10 s          delivered; the job COMPLETED
    anything else            the next attempt after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h
                             (the same job row, its claim given back with that delay:
                             `Defer`), then failed (the job FAILED)
    a single redelivery      delivered or failed, no schedule

The attempt's record (count, status code, error, next attempt) and the job's ending are one
transaction (`jobs.endings.step_commit`), conditional on the claim and on the delivery still
being carried by this job: a worker killed in the middle of an attempt leaves the job claimed;
its lease expires and the dispatcher publishes it again, so the attempt is made again
(delivered at least once, never lost). Before the attempt the lease is extended past the
attempt's deadline (`WEBHOOK_ATTEMPT_DEADLINE_SECONDS` + `LEASE_MARGIN_SECONDS`), so the
dispatcher never starts the same attempt again while it runs and its answer is always recorded.
A delivery that ended meanwhile (its endpoint deleted, dropped as `overflow`) ends its job.

The endpoint's health follows its attempts: a 2xx clears `failing_since`; a failure sets it if
unset, and an endpoint failing since `WEBHOOK_FAILING_DISABLE_SECONDS` (24 h) is disabled with
its reason. Deliveries take no Semrush permit.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from jobs.endings import Defer, Finish, JobEnding, step_commit
from jobs.models import JobStatus
from jobs.runner import StepRun
from jobs.services import job_renew
from webhooks.models import DeliveryStatus, WebhookAttempt, WebhookDelivery
from webhooks.sender import CONNECTION_FAILED, AttemptResult, webhook_post
from webhooks.services import DELIVERY_KEY, SINGLE_ATTEMPT_KEY, webhook_health_record

logger = logging.getLogger("serenity.webhooks")

RETRY_DELAYS_SECONDS = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)
# The lease outlives the attempt's deadline by this much: time to record its outcome.
LEASE_MARGIN_SECONDS = 30.0


def _delivery_of(run: StepRun) -> WebhookDelivery | None:
    delivery_id = run.job.metadata.get(DELIVERY_KEY)
    if not delivery_id:
        return None
    try:
        return WebhookDelivery.objects.select_related("webhook").get(
            pk=uuid.UUID(delivery_id), job_id=run.job.id, status=DeliveryStatus.PENDING
        )
    except WebhookDelivery.DoesNotExist:
        return None


def deliver_webhook_step(run: StepRun) -> None:
    """One attempt of the delivery this job carries. A delivery that is gone (its webhook was
    deleted) or no longer carried by this job ends the job CANCELLED, sending nothing."""
    delivery = _delivery_of(run)
    if delivery is None:
        step_commit(run, Finish(JobStatus.CANCELLED, error=_ended_error("not pending")))
        return
    lease = settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS + LEASE_MARGIN_SECONDS
    if not job_renew(job_id=run.job.id, claim_token=run.claim_token, seconds=lease):
        return  # the claim was lost: its holder makes the attempt
    try:
        secrets = delivery.webhook.signing_secrets(now=timezone.now())
    except ValueError:
        logger.error(
            "webhook secret cannot be decrypted", extra={"webhook_id": str(delivery.webhook_id)}
        )
        result = AttemptResult(status_code=None, error=CONNECTION_FAILED)
    else:
        result = webhook_post(
            url=delivery.webhook.url,
            secrets=secrets,
            message_id=str(delivery.event_id),
            body=delivery.body,
        )
    attempt_record(run, delivery, result)


def attempt_record(run: StepRun, delivery: WebhookDelivery, result: AttemptResult) -> None:
    """Record the attempt and end (or re-schedule) the job, in one transaction."""
    attempts = delivery.attempts + 1
    now = timezone.now()
    status, next_attempt_at, ending = _after_attempt(
        result, attempts=attempts, single=bool(run.job.metadata.get(SINGLE_ATTEMPT_KEY)), now=now
    )

    def record() -> bool:
        error = (result.error or "")[:500] or None
        carried = WebhookDelivery.objects.filter(
            pk=delivery.pk, job_id=run.job.id, status=DeliveryStatus.PENDING
        )
        if not carried.update(
            attempts=F("attempts") + 1,
            last_status_code=result.status_code,
            last_error=error,
            status=status,
            next_attempt_at=next_attempt_at,
            updated_at=now,
        ):
            return False
        began = now - timedelta(milliseconds=result.duration_ms)
        WebhookAttempt.objects.create(
            delivery_id=delivery.pk,
            at=began,
            status_code=result.status_code,
            error=error,
            duration_ms=result.duration_ms,
        )
        webhook_health_record(
            webhook_id=delivery.webhook_id, delivered=result.delivered, began=began
        )
        return True

    recorded = step_commit(run, ending, effects=record)
    if not recorded:
        # The delivery ended meanwhile (endpoint deleted, overflow): so does its job (a no-op
        # when the claim was lost instead).
        step_commit(run, Finish(JobStatus.CANCELLED, error=_ended_error("not pending")))
    logger.info(
        "webhook attempt",
        extra={
            "delivery_id": str(delivery.pk),
            "webhook_id": str(delivery.webhook_id),
            "attempt": attempts,
            "status_code": result.status_code,
            "delivery_status": status if recorded else "not recorded",
        },
    )


def _after_attempt(
    result: AttemptResult, *, attempts: int, single: bool, now: datetime
) -> tuple[DeliveryStatus, datetime | None, JobEnding]:
    """The delivery's status after its `attempts`-th attempt, when its next one is due, and
    the job's ending: the schedule of the module docstring."""
    if result.delivered:
        completed = Finish(JobStatus.COMPLETED, result={"statusCode": result.status_code})
        return DeliveryStatus.DELIVERED, None, completed
    if not single and attempts <= len(RETRY_DELAYS_SECONDS):
        delay = RETRY_DELAYS_SECONDS[attempts - 1]
        return DeliveryStatus.PENDING, now + timedelta(seconds=delay), Defer(delay_seconds=delay)
    failed = Finish(JobStatus.FAILED, error=_ended_error(result.error or "failed"))
    return DeliveryStatus.FAILED, None, failed


def on_unexpected(run: StepRun, exc: BaseException) -> None:
    """A bug in the attempt: it counts as a failed attempt (the schedule goes on)."""
    delivery = _delivery_of(run)
    if delivery is None:
        step_commit(run, Finish(JobStatus.FAILED, error=_ended_error("unexpected error")))
        return
    attempt_record(run, delivery, AttemptResult(status_code=None, error=CONNECTION_FAILED))


def _ended_error(message: str) -> dict[str, object]:
    return {"code": "webhookDeliveryFailed", "message": message[:500], "retryable": True}
