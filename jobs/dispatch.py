"""Publishing due jobs again: the dispatcher, the backstop of delivery (SPEC §6.4), and the
operator's republish (SPEC §8).

A message is only transport; the job row is the truth. Whatever publish was lost (the broker
was down, a worker died holding a claim, a hand-over's worker died before claiming), the row is
still due, and beat's dispatcher publishes it again. Duplicate messages are harmless: a
delivery that cannot claim its job does nothing (`jobs.services.job_claim`).
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Case, Exists, F, Q, QuerySet, Sum, Value, When, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from jobs.models import AsyncJob, JobMode, JobStatus
from jobs.publishing import publish_job
from jobs.services import publish_on_commit, task_name_for

logger = logging.getLogger("serenity.jobs")


def job_republish(*, job_id: uuid.UUID) -> bool:
    """Operator action: publish an unfinished, runnable job again (claims make it harmless)."""
    job = AsyncJob.objects.filter(
        pk=job_id, status=JobStatus.IN_PROGRESS, run_after__isnull=False
    ).first()
    if job is None:
        return False
    return publish_job(job_id=job.id, task_name=task_name_for(job.step))


def _due(steps: list[str], now: Any) -> QuerySet[AsyncJob]:
    """The due jobs of `steps` (`job_due_idx`; a running job is due too)."""
    return AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS, run_after__lte=now, step__in=steps)


def _live_claim(now: Any) -> Q:
    """A job that a worker runs now: claimed under a lease not yet expired."""
    return Q(claim_token__isnull=False, lease_expires_at__gte=now)


def job_fairest_due(*, job_id: uuid.UUID, steps: list[str]) -> uuid.UUID:
    """The job a delivery of `job_id` runs (`jobs.runner.run_step`): among the due, claimable
    jobs of `steps`, the one whose org has the fewest jobs of `steps` running under a live
    claim, then the fewest due (a short step holds no claim for long, so an org's backlog
    breaks the tie: a burst's steps do not go before a second org's one); on a tie `job_id`
    itself, then the oldest due. `job_id` when it is not one of `steps` (a delivery of another
    kind of step runs its own job), when nothing else is due, and when one org's work is all
    that is due (a burst, an onboarding, most deliveries): there is nothing to share, and the
    delivery runs its own job (or nothing: the other jobs have messages of their own) after one
    cheap read of the orgs due, without the ranking query, whose window and cases cost more to
    build and compile than to run.

    So the workers are shared across orgs by what they run now, not by the order of the
    broker's queue: a second org's first step goes to the next free worker even behind
    another org's backlog of messages. The ranking is one read over the due rows
    (`job_due_idx`; a running job is due too), counting each org's running jobs with a window
    rather than a subquery per row; the claim that follows is the conditional UPDATE of
    `jobs.services.job_claim` (two deliveries that pick the same job: one claims it, the
    other's own job is left to its own message)."""
    now = timezone.now()
    due = _due(steps, now)
    orgs_due = due.order_by().values_list("organization_id", flat=True).distinct()[:2]
    if len(orgs_due) < 2:
        return job_id
    live_claim = _live_claim(now)
    fairest = (
        due.filter(Exists(AsyncJob.objects.filter(pk=job_id, step__in=steps)))
        # A sync request's rows are its own to run (a settle read it sleeps for); a worker
        # runs one only by its own delivery, once the dispatcher sends it (the request died).
        .exclude(Q(mode=JobMode.SYNC), ~live_claim, ~Q(pk=job_id))
        .annotate(
            # Running rows stay in the set (the window counts them) and sort last.
            claimable=Case(When(live_claim, then=Value(0)), default=Value(1)),
            busy=Window(
                Sum(Case(When(live_claim, then=Value(1)), default=Value(0))),
                partition_by=[F("organization_id")],
            ),
            backlog=Window(
                Sum(Case(When(live_claim, then=Value(0)), default=Value(1))),
                partition_by=[F("organization_id")],
            ),
            other=Case(When(pk=job_id, then=Value(0)), default=Value(1)),
        )
        .order_by("-claimable", "busy", "backlog", "other", "run_after", "id")
        .values_list("id", "claimable")
        .first()
    )
    return fairest[0] if fairest is not None and fairest[1] else job_id


def job_unclaimed_due(*, job_id: uuid.UUID, steps: list[str]) -> uuid.UUID | None:
    """The job a delivery of `job_id` runs when its own cannot run (finished, cancelled,
    claimed, or not due: a duplicate, a hand-over's message, one a cancel left behind): the
    oldest due job of `steps` that no worker runs, when `job_id` is one of `steps`; None when
    there is none. So the messages a cancelled onboarding leaves in the broker's queue run the
    work queued behind them instead of nothing: one org's due work is otherwise run only by
    its own messages (`job_fairest_due`), and another org's step would wait behind all of
    them. A sync request's rows are its own to run (as in `job_fairest_due`)."""
    now = timezone.now()
    return (
        _due(steps, now)
        .filter(Exists(AsyncJob.objects.filter(pk=job_id, step__in=steps)))
        .exclude(pk=job_id)
        .exclude(_live_claim(now))
        .exclude(mode=JobMode.SYNC)
        .order_by("run_after", "id")
        .values_list("id", flat=True)
        .first()
    )


def jobs_dispatch_due(*, limit: int = 500) -> int:
    """The backstop of delivery: publish every due job that has no live message, round-robin
    across orgs.

    Due and unclaimed, and either never published or published (due) longer than a lease ago
    without being claimed (the message was lost); or claimed with an expired lease (the worker
    died) and not re-published since the lease ran out (or that message too is a lease
    overdue). Duplicate messages are harmless: a delivery that cannot claim does nothing.
    """
    now = timezone.now()
    lost_before = now - timedelta(seconds=settings.JOBS_LEASE_SECONDS)
    # An expired claim keeps its token until a worker re-claims the job, so without the
    # `published_at` condition every round (every couple of seconds) would send another message
    # for it while the workers are busy.
    message_missing = (
        Q(published_at__isnull=True)
        | Q(published_at__lt=F("lease_expires_at"))
        | Q(published_at__lt=lost_before)
    )
    # Round-robin across orgs (SPEC §10.6): each org's n-th due job (oldest first) goes out
    # before any org's (n+1)-th, so one org's backlog of re-scheduled steps never queues a
    # second org's jobs behind it.
    due = (
        AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS, run_after__lte=now)
        .filter(
            Q(claim_token__isnull=True, published_at__isnull=True)
            | Q(claim_token__isnull=True, published_at__lt=lost_before)
            | (Q(claim_token__isnull=False, lease_expires_at__lt=now) & message_missing)
        )
        .annotate(
            turn=Window(
                RowNumber(),
                partition_by=[F("organization_id")],
                order_by=[F("run_after").asc(), F("id").asc()],
            )
        )
        .order_by("turn", "run_after", "id")
        .values_list("id", "step")[:limit]
    )
    published = 0
    for job_id, step in due:
        if publish_job(job_id=job_id, task_name=task_name_for(step)):
            published += 1
        else:
            break  # the broker is down: the next round tries again
    if published:
        logger.info("dispatcher re-published jobs", extra={"count": published})
    return published


def jobs_wake(*, waiting_for: str, organization_ids: Any) -> int:
    """Make the released jobs of these orgs that wait for `waiting_for` due now (their app's
    reason to wait is gone: a credential's hold lifted, SPEC §13.2), and publish them.
    `organization_ids`: ids, or a query of them. The rows' writes are one UPDATE; the messages
    go after the commit (the dispatcher as backstop)."""
    now = timezone.now()
    waiting = AsyncJob.objects.filter(
        status=JobStatus.IN_PROGRESS,
        waiting_for=waiting_for,
        claim_token__isnull=True,
        organization_id__in=organization_ids,
    )
    woken = list(waiting.values_list("id", "step"))
    if not woken:
        return 0
    AsyncJob.objects.filter(
        pk__in=[pk for pk, _ in woken], waiting_for=waiting_for, claim_token__isnull=True
    ).update(run_after=now, waiting_for=None, published_at=None)
    for job_id, step in woken:
        publish_on_commit(job_id=job_id, step=step)
    return len(woken)
