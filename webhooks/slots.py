"""Which webhook attempt runs now, and where (SPEC §13.6, §13.7): fair across orgs, and never
more than a fixed share of a worker.

Every attempt runs under two slots (`AttemptSlot` rows, taken with the job's claim in one
transaction, lapsing with the attempt's lease):

- its org's: at most `WEBHOOK_ATTEMPTS_PER_ORG` (2) attempts of one org in flight, every worker
  together, so an org whose receivers never answer holds two attempts, not the pool;
- its worker's: at most the worker's share of its pool (`worker_share`: half its slots, at
  least one; all of them for a worker that consumes the webhook queue alone), so a worker that
  also runs provisioning steps (one worker consuming every queue, the embedded default) always
  has slots for them, however many deliveries are due.

A delivery's message does not run its own job: it runs the fairest due delivery (`_fairest`):
of the orgs under their cap, the one with the fewest attempts in flight, then the fewest due,
then the oldest due; its own job when it is of that org. So another org's first attempt is
made by the next message any worker takes (or the next attempt a running loop starts), not
after the messages of one org's backlog that the broker's queue holds ahead of it.
When the attempt ends, the same worker thread runs the next fairest (`attempts_run`) until none
is due that it may run. A message that finds no slot does nothing (in milliseconds): its job is
run by the loop of an attempt in flight when that one ends (its job is due: the loop finds it),
or at worst published again by the dispatcher (`_park`). So a batch of deliveries needs only
as many messages as its org may have attempts in flight (`webhooks.services`).
"""

from __future__ import annotations

import math
import os
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from jobs.publishing import publish_job
from jobs.runner import run_claimed
from jobs.services import job_claim, task_name_for
from webhooks.models import AttemptSlot, SlotKind
from webhooks.services import DELIVERY_STEP, PARKED_SECONDS

# How long one message runs attempts one after the other before it hands on to a new message.
LOOP_SECONDS = 60.0
# A slot outlives the attempt's deadline by this much (the attempt's lease: `webhooks.delivery`).
SLOT_MARGIN_SECONDS = 30.0


def worker_share(*, pool_slots: int | None, webhooks_only: bool) -> int:
    """How many attempts a worker with `pool_slots` slots (None: Celery's default, the CPU
    count) may run at once: all of them when it consumes the webhook queue alone, else
    `WEBHOOK_WORKER_SHARE` of them (half), at least one."""
    slots = pool_slots or os.cpu_count() or 1
    if webhooks_only:
        return slots
    return max(1, min(slots - 1, math.floor(slots * settings.WEBHOOK_WORKER_SHARE)))


@dataclass(frozen=True)
class Taken:
    job: AsyncJob
    slot_ids: tuple[int, ...]


def attempts_run(*, job_id: uuid.UUID | None, worker: str, share: int) -> int:
    """A delivery's message: run the fairest due attempt under its slots, then the next, until
    none may run here. Returns how many ran. After `LOOP_SECONDS` the loop hands on to a new
    message instead (a task that ran for hours would hold a worker's warm shutdown and outlive
    the broker's visibility timeout)."""
    ran = 0
    own = job_id
    started = time.monotonic()
    while True:
        taken = attempt_take(own_job_id=own, worker=worker, share=share)
        if taken is None:
            break
        try:
            run_claimed(taken.job)
        finally:
            AttemptSlot.objects.filter(pk__in=taken.slot_ids).delete()
        ran += 1
        own = None
        if time.monotonic() - started >= LOOP_SECONDS:
            publish_job(job_id=taken.job.id, task_name=task_name_for(DELIVERY_STEP))
            break
    if job_id is not None:
        _park(job_id)
    return ran


def _park(job_id: uuid.UUID) -> None:
    """A message that could not run its own job (it is due, and waits for a slot): the job is
    run by the loop of an attempt in flight, so the dispatcher's backstop publishes it again
    only `PARKED_SECONDS` (and a lease) later, not every lease while its org's backlog lasts."""
    now = timezone.now()
    AsyncJob.objects.filter(
        pk=job_id, status=JobStatus.IN_PROGRESS, claim_token__isnull=True, run_after__lte=now
    ).update(published_at=now + timedelta(seconds=PARKED_SECONDS))


def attempt_take(*, own_job_id: uuid.UUID | None, worker: str, share: int) -> Taken | None:
    """Claim the fairest due delivery job with a slot of `worker` (one of `share`) and one of
    its org's, in one transaction. None: the worker's share is in use, or no due delivery of
    an org under its cap is left."""
    cap = settings.WEBHOOK_ATTEMPTS_PER_ORG
    for _ in range(5):  # the chosen job was claimed (or a slot taken) by another meanwhile
        now = timezone.now()
        AttemptSlot.objects.filter(held_until__lt=now).delete()
        if AttemptSlot.objects.filter(kind=SlotKind.WORKER, holder=worker).count() >= share:
            return None
        in_flight = dict(
            AttemptSlot.objects.filter(kind=SlotKind.ORG)
            .values("holder")
            .annotate(n=Count("id"))
            .values_list("holder", "n")
        )
        chosen = _fairest(own_job_id=own_job_id, in_flight=in_flight, cap=cap, now=now)
        if chosen is None:
            return None
        job_id, organization_id = chosen
        until = now + timedelta(
            seconds=settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS + SLOT_MARGIN_SECONDS
        )
        with transaction.atomic():
            worker_slot = _slot_take(SlotKind.WORKER, worker, share, job_id=job_id, until=until)
            if worker_slot is None:
                transaction.set_rollback(True)
                return None
            org_slot = _slot_take(
                SlotKind.ORG, str(organization_id), cap, job_id=job_id, until=until
            )
            job = job_claim(job_id=job_id) if org_slot is not None else None
            if org_slot is not None and job is not None:
                return Taken(job=job, slot_ids=(worker_slot, org_slot))
            transaction.set_rollback(True)
    return None


def _due(now: datetime) -> QuerySet[AsyncJob]:
    """Delivery jobs due and not held under a live claim."""
    return AsyncJob.objects.filter(
        step=DELIVERY_STEP, status=JobStatus.IN_PROGRESS, run_after__lte=now
    ).filter(Q(claim_token__isnull=True) | Q(lease_expires_at__lt=now))


def _fairest(
    *, own_job_id: uuid.UUID | None, in_flight: dict[str, int], cap: int, now: datetime
) -> tuple[uuid.UUID, uuid.UUID] | None:
    """The job (and its org) a message runs: of the orgs with a due delivery and fewer than
    `cap` attempts in flight, the one with the fewest in flight, then the fewest due (an org's
    backlog never goes before another org's first delivery, even where a worker runs one
    attempt at a time and every org has none in flight between two), then the oldest due; its
    own job when it is of that org, else that org's oldest due."""
    full = [holder for holder, n in in_flight.items() if n >= cap]
    due = _due(now).exclude(organization_id__in=full)
    orgs = list(
        due.order_by()
        .values("organization_id")
        .annotate(backlog=Count("id"), first=Min("run_after"))
        .values_list("organization_id", "backlog", "first")
    )
    if not orgs:
        return None
    best_org, _, _ = min(orgs, key=lambda row: (in_flight.get(str(row[0]), 0), row[1], row[2]))
    if own_job_id is not None and due.filter(pk=own_job_id, organization_id=best_org).exists():
        return own_job_id, best_org
    job_id = (
        due.filter(organization_id=best_org)
        .order_by("run_after", "id")
        .values_list("id", flat=True)
        .first()
    )
    return None if job_id is None else (job_id, best_org)


def _slot_take(
    kind: SlotKind, holder: str, cap: int, *, job_id: uuid.UUID, until: datetime
) -> int | None:
    """A free slot of `holder` (its row id), or None when all `cap` are held."""
    held = set(
        AttemptSlot.objects.filter(kind=kind, holder=holder).values_list("number", flat=True)
    )
    for number in range(cap):
        if number in held:
            continue
        try:
            with transaction.atomic():
                return AttemptSlot.objects.create(
                    kind=kind, holder=holder, number=number, job_id=job_id, held_until=until
                ).pk
        except IntegrityError:
            continue  # taken meanwhile
    return None
