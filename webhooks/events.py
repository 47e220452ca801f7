"""Job events (SPEC §11.3): a root job (the id clients hold) reached COMPLETED, FAILED or
CANCELLED as its effective status (§4.6) → `job.completed` / `job.failed` / `job.cancelled`,
`data` = its job document without `steps`, plus `brandId`.

`job_chain_ended` receives `jobs.signals.chain_ended`, sent inside the transaction that ends
the chain on every path (a step's ending, a cancel by the API or by deactivate, a stale
reconcile, a poison job's failure): the deliveries commit with the ending. The event's id is
derived from the root job's, so a chain seen ended twice is one event.

`job_chains_ended` (many chains ended by one write: an onboarding's cancel) writes one outbox
job instead, run by a worker after the answer (SPEC §13.6: a 1,000-item cancel with 10
endpoints answers within a second), which writes the events' deliveries set-based.
"""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework import serializers

from jobs.endings import Finish, step_commit
from jobs.models import AsyncJob, JobMode, JobStatus, JobType
from jobs.outbox import outbox_jobs_create
from jobs.runner import StepRun
from jobs.selectors import job_document
from provisioning.models import OnboardingStatus
from provisioning.selectors import OnboardingSummary
from provisioning.serializers import JobSummarySerializer, OnboardingSummarySerializer
from webhooks.models import Webhook, WebhookEventType
from webhooks.services import Event, webhook_event_publish, webhook_events_publish

JOB_EVENTS = {
    JobStatus.COMPLETED: WebhookEventType.JOB_COMPLETED,
    JobStatus.FAILED: WebhookEventType.JOB_FAILED,
    JobStatus.CANCELLED: WebhookEventType.JOB_CANCELLED,
}
# The outbox job of the events of many chains ended at once (`job_chains_ended`).
EVENTS_JOB_TYPE = "webhookEvents"
EVENTS_STEP = "publishWebhookEvents"
EVENTS_KEY = "events"
# Events per such job: each is a short task (a worker that also runs provisioning steps takes a
# step between two), however many chains ended.
EVENTS_PER_JOB = 100
_JOB_EVENT_NAMESPACE = uuid.UUID("0b6c9f9e-3f0a-4d5e-9a51-7c2d8e41b6a3")


def job_event_id(root_id: uuid.UUID) -> uuid.UUID:
    """The id of the event that ends the chain `root_id` (one per chain: a chain ends once)."""
    return uuid.uuid5(_JOB_EVENT_NAMESPACE, str(root_id))


def job_event_data(root_id: uuid.UUID) -> dict[str, Any]:
    """The root job's document as polling reports it (without `steps`), plus `brandId`:
    rendered by the serializer the API's job answers use."""
    return job_events_data([root_id])[root_id]


def job_events_data(root_ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """`job_event_data` of many chains, in one read."""
    data = {}
    for root in AsyncJob.objects.select_related("current").filter(pk__in=root_ids):
        effective = root.current or root
        document = job_document(
            job_id=root.id,
            root=root,
            effective=effective,
            updated_at=max(root.updated_at, effective.updated_at),
        )
        data[root.id] = dict(JobSummarySerializer(document).data)
    return data


def job_chains_ended(sender: Any, *, jobs: list[AsyncJob], **_: Any) -> None:
    """`jobs.signals.chains_ended` receiver: the job events of many chains (an onboarding's
    cancel ends a thousand chains at once), written after the answer (SPEC §13.6): per org with
    an endpoint subscribed, outbox jobs naming the chains and their events, in the ending's
    transaction (so they commit with it, or not at all), one per `EVENTS_PER_JOB` chains; a
    worker writes their deliveries (`job_events_step`), set-based."""
    by_org: dict[uuid.UUID, dict[uuid.UUID, str]] = {}
    for job in jobs:
        if _evented(job.job_type, job.mode, job.status):
            event_type = JOB_EVENTS[JobStatus(job.status)]
            by_org.setdefault(job.organization_id, {})[job.root_id or job.id] = event_type
    for organization_id, ended in by_org.items():
        if not _subscribed(organization_id, set(ended.values())):
            continue
        named = [[str(root_id), event_type] for root_id, event_type in ended.items()]
        outbox_jobs_create(
            organization_id=organization_id,
            job_type=EVENTS_JOB_TYPE,
            step=EVENTS_STEP,
            jobs={
                uuid.uuid4(): {EVENTS_KEY: named[start : start + EVENTS_PER_JOB]}
                for start in range(0, len(named), EVENTS_PER_JOB)
            },
        )


def job_events_step(run: StepRun) -> None:
    """The job events an outbox job names (`job_chains_ended`): per org, one read of the
    chains' documents and one `webhook_events_publish`, in the transaction that completes the
    job. Idempotent: each event's id is derived from its chain's."""
    ended = [(uuid.UUID(root), str(kind)) for root, kind in run.job.metadata.get(EVENTS_KEY, [])]

    def publish() -> bool:
        data = job_events_data([root_id for root_id, _ in ended])
        events = [
            Event(type=event_type, data=data[root_id], event_id=job_event_id(root_id))
            for root_id, event_type in ended
            if root_id in data  # (a chain purged meanwhile has no document left)
        ]
        webhook_events_publish(organization_id=run.job.organization_id, events=events)
        return True

    step_commit(run, Finish(JobStatus.COMPLETED, result={"events": len(ended)}), effects=publish)


def job_events_failed(run: StepRun, exc: BaseException) -> None:
    """A bug writing the events: the job fails (its chains' events are not sent)."""
    error = {"code": "webhookEventsFailed", "message": type(exc).__name__, "retryable": False}
    step_commit(run, Finish(JobStatus.FAILED, error=error))


def _evented(job_type: str, mode: str, status: str) -> bool:
    """Whether a chain's end is an event: async work of a client-facing job type (sync work
    answered its request; SPEC §13.5)."""
    return job_type in JobType.values and mode == JobMode.ASYNC and status in JOB_EVENTS


def _subscribed(organization_id: uuid.UUID, event_types: set[str]) -> bool:
    """Whether an enabled endpoint of the org takes one of `event_types` (the common case,
    none, costs this one query)."""
    return any(
        event_types.intersection(events)
        for events in Webhook.objects.filter(organization_id=organization_id, enabled=True)
        .order_by()
        .values_list("events", flat=True)
    )


def job_chain_ended(
    sender: Any,
    *,
    root_id: uuid.UUID,
    organization_id: uuid.UUID,
    job_type: str,
    status: str,
    mode: str = JobMode.ASYNC,
    **_: Any,
) -> None:
    """Emit the job event of a chain that just ended (a client-facing job type only: a
    delivery's own job is not an event)."""
    if not _evented(job_type, mode, status):
        return
    event_type = JOB_EVENTS[JobStatus(status)]
    if not _subscribed(organization_id, {event_type}):
        return
    webhook_event_publish(
        organization_id=organization_id,
        type=event_type,
        data=job_event_data(root_id),
        event_id=job_event_id(root_id),
    )


ONBOARDING_EVENTS = {
    OnboardingStatus.COMPLETED: WebhookEventType.ONBOARDING_COMPLETED,
    OnboardingStatus.CANCELLED: WebhookEventType.ONBOARDING_CANCELLED,
}


def onboarding_event_id(onboarding_id: uuid.UUID) -> uuid.UUID:
    """The event's id (every attempt's `webhook-id`): one per onboarding, however often its
    end is seen (an onboarding ends once, COMPLETED or CANCELLED)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"serenity:onboarding.completed:{onboarding_id}")


def onboarding_ended_event(
    sender: Any, *, onboarding: Any, summary: OnboardingSummary, **_: Any
) -> None:
    """`provisioning.signals.onboarding_ended` receiver: `onboarding.completed` for a COMPLETED
    onboarding, `onboarding.cancelled` for a CANCELLED one (SPEC §12.2), `data` = the onboarding
    without its items, rendered as the API renders it, in the ending's transaction."""
    webhook_event_publish(
        organization_id=onboarding.organization_id,
        type=ONBOARDING_EVENTS[OnboardingStatus(summary.status)],
        data=dict(OnboardingSummarySerializer(summary).data),
        event_id=onboarding_event_id(onboarding.pk),
    )


def credential_refused_event(
    sender: Any, *, organization_id: uuid.UUID, source: str, refused_at: Any, **_: Any
) -> None:
    """`provisioning.signals.credential_refused` receiver (SPEC §13.2): `credential.refused` to
    the org whose call Semrush refused, once per hold (the signal is sent by the write that
    began it), `data` = `{source, status, refusedAt}` as `GET O/serenity` shows the credential."""
    webhook_event_publish(
        organization_id=organization_id,
        type=WebhookEventType.CREDENTIAL_REFUSED,
        data={
            "source": source,
            "status": "refused",
            "refusedAt": serializers.DateTimeField().to_representation(refused_at),
        },
    )


DRIFT_EVENTS = {
    "detected": WebhookEventType.DRIFT_DETECTED,
    "repaired": WebhookEventType.DRIFT_REPAIRED,
}


def _drift_event(
    what: str,
    *,
    organization_id: uuid.UUID,
    brand_id: uuid.UUID,
    kinds: list[str],
    reconciliation_id: uuid.UUID,
) -> None:
    """`drift.detected` / `drift.repaired` for one brand (SPEC §13.1), `data` = `{brandId,
    kinds, reconciliationId}`; one event per brand and reconciliation, however often seen."""
    event_type = DRIFT_EVENTS[what]
    if not _subscribed(organization_id, {event_type}):
        return
    webhook_event_publish(
        organization_id=organization_id,
        type=event_type,
        data={
            "brandId": str(brand_id),
            "kinds": list(kinds),
            "reconciliationId": str(reconciliation_id),
        },
        event_id=uuid.uuid5(
            uuid.NAMESPACE_URL, f"serenity:{event_type}:{reconciliation_id}:{brand_id}"
        ),
    )


def drift_detected_event(sender: Any, **kwargs: Any) -> None:
    """`provisioning.reconcile.signals.drift_detected` receiver."""
    _drift_event("detected", **_drift_fields(kwargs))


def drift_repaired_event(sender: Any, **kwargs: Any) -> None:
    """`provisioning.reconcile.signals.drift_repaired` receiver."""
    _drift_event("repaired", **_drift_fields(kwargs))


def _drift_fields(kwargs: dict[str, Any]) -> dict[str, Any]:
    names = ("organization_id", "brand_id", "kinds", "reconciliation_id")
    return {name: kwargs[name] for name in names}
