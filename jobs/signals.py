"""What `jobs` tells the apps that care when a chain ends, without knowing them.

`chain_ended` is sent inside the transaction that ends a chain (the write that finishes the
chain's current step: a step's `Finish`, a cancel, a stale reconcile), so that a receiver's own
writes (an outbox row, e.g. a webhook delivery) commit or roll back with the ending itself: a
crash can lose neither without the other. Receivers are connected by the apps that care
(`AppConfig.ready`); an exception in one rolls the ending back, so receivers only write rows.

A receiver may see one chain end twice (a cancel and a worker's own ending racing, each seeing
the chain finished after the other's write): it must be idempotent.

Arguments: `root_id` (the id clients hold), `organization_id`, `brand_id` (or None),
`job_type`, `mode` (`async` or `sync`, SPEC §13.5), `status` (the chain's effective status,
one of the finished statuses) and `metadata` (the ending step's: the references every row of
the chain carries).
"""

from __future__ import annotations

import uuid

from django.dispatch import Signal

from jobs.models import FINISHED_STATUSES, AsyncJob

chain_ended = Signal()
# Many chains ended by one set-based write (an onboarding's cancel, SPEC §12.4), sent once
# instead of `chain_ended` per chain. Argument: `jobs`, each chain's ending step (its `status`
# the chain's effective status; `root_id or id` the root). Same rules as `chain_ended`.
chains_ended = Signal()


def chain_ended_send(*, job: AsyncJob, status: str) -> None:
    """Tell the receivers of `jobs.signals.chain_ended` that `job`'s chain ended with `status`
    (inside the caller's transaction)."""
    chain_ended.send(
        sender=AsyncJob,
        root_id=job.root_id or job.id,
        organization_id=job.organization_id,
        brand_id=job.brand_id,
        job_type=job.job_type,
        mode=job.mode,
        status=status,
        metadata=job.metadata or {},
    )


def chain_ended_check(*, root_id: uuid.UUID) -> None:
    """After a write that may have finished the chain's current step (a cancel or a failure of
    the whole chain, a hand-over to a successor cancelled meanwhile): if the chain's effective
    status is now finished, send `chain_ended`. Receivers are idempotent, so a chain seen
    ended by two racing writers is harmless."""
    try:
        root = AsyncJob.objects.select_related("current").get(pk=root_id)
    except AsyncJob.DoesNotExist:
        return
    effective = root.current or root
    if effective.status in FINISHED_STATUSES:
        chain_ended_send(job=effective, status=effective.status)


def chains_ended_check(*, root_ids: list[uuid.UUID]) -> None:
    """`chain_ended_check` for many chains at once: one read, one `chains_ended` naming those
    whose effective status is now finished."""
    roots = AsyncJob.objects.select_related("current").filter(pk__in=root_ids)
    ended = [root.current or root for root in roots]
    ended = [job for job in ended if job.status in FINISHED_STATUSES]
    if ended:
        chains_ended.send(sender=AsyncJob, jobs=ended)
