"""The per-brand concurrency guard (SPEC §6.2): the only code that locks a brand row and begins a
provisioning attempt, for every path (brand create, market create, activate, deactivate; sync
and async).

    with lease(brand_id=..., started_by=..., checks=...) as begun:
        ...  # the caller's own rows (a reservation, the chain's jobs), same transaction

One short transaction: lock the brand row (`select_for_update`), run the caller's refusals
(`checks`, under the lock, before the guard's own answer), then the guard: no pending attempt →
insert ours; a live pending attempt → 409 `semrush_provisioning_in_progress` naming its job; a
stale one (`services.attempts_stale`: nothing drives it any more) → reconciled (`failed`/`stale`,
or `ready` if its workspace was promoted; its chain's leftovers FAILED) and we proceed. The lock
is released at commit, long before any upstream call. The partial unique constraint (one pending
attempt per brand) is the last line of defence: its violation is the same 409, never a 500.

Every operation, sync or async, hands its attempt to the chain it writes in that transaction
(`flows.begin`, SPEC §13.5); the chain ends it. An attempt begun without a job (`job_id`
None) reads the pending attempt inside a savepoint: when the attempts table or column does not
exist yet (PostgreSQL 42P01/42703, a deploy ahead of its migration) it proceeds without one
(`begun.attempt is None`); any other read error fails closed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import IntegrityError, ProgrammingError, transaction
from django.utils import timezone

from jobs.models import AsyncJob, JobMode
from kernel import context
from provisioning import services
from provisioning.exceptions import ProvisioningInProgressError
from provisioning.models import AttemptStartedBy, AttemptStatus, ProvisioningAttempt
from serenity.exceptions import BrandNotFoundError
from serenity.models import Brand, Organization

logger = logging.getLogger("serenity.provisioning")

# PostgreSQL: undefined_table, undefined_column.
_MISSING_SCHEMA_SQLSTATES = frozenset({"42P01", "42703"})
_CONSTRAINT = "one_pending_attempt_per_brand"


# The caller's refusals, run under the brand's lock with the pointer read there.
Checks = Callable[[str | None], None]


@dataclass(frozen=True)
class Begun:
    """What the guard began: the attempt (None only while the attempts table is missing)."""

    attempt: ProvisioningAttempt | None


def pending_attempt_for(brand_id: uuid.UUID) -> ProvisioningAttempt | None:
    return ProvisioningAttempt.objects.filter(
        brand_id=brand_id, status=AttemptStatus.PENDING
    ).first()


@contextmanager
def lease(
    *,
    brand_id: uuid.UUID,
    started_by: AttemptStartedBy,
    job_id: uuid.UUID | None = None,
    candidate_is_pointer: bool = False,
    checks: Checks | None = None,
    brand_is_new: bool = False,
    durable: bool = False,
) -> Iterator[Begun]:
    """Begin an attempt on the brand under its row lock; the block runs in the same transaction.

    `checks(pointer)` raises the caller's refusals under the lock, before the guard answers (a
    taken slice is `sliceExists` whoever holds the brand). `job_id`: the chain that will drive
    the attempt (async). `candidate_is_pointer`: the attempt settles the brand's existing
    workspace (its candidate is the pointer read under the lock). Raises
    `ProvisioningInProgressError`, the refusals of `checks`, and anything the block raises
    (everything then rolls back).

    `brand_is_new`: the brand was inserted by the caller's transaction, which nobody else can
    see until it commits, so nothing can hold or race it: the attempt is inserted without the
    lock, the read and a savepoint (a failure ends the caller's transaction). `durable`: the
    transaction may not be folded into a caller's (sync work commits its begin first)."""
    if brand_is_new:
        with transaction.atomic(savepoint=False):
            first = attempt_row(brand_id=brand_id, started_by=started_by, job_id=job_id)
            first.save(force_insert=True)
            yield Begun(attempt=first)
        return
    try:
        with transaction.atomic(durable=durable):
            pointer = _lock(brand_id)
            if checks is not None:
                checks(pointer)
            attempt = _pass_and_insert(
                brand_id=brand_id,
                started_by=started_by,
                job_id=job_id,
                candidate=pointer if candidate_is_pointer else None,
            )
            yield Begun(attempt=attempt)
    except IntegrityError as exc:
        if _CONSTRAINT not in str(exc):
            raise
        raise in_progress_error(brand_id=brand_id) from None


def in_progress_error(*, brand_id: uuid.UUID) -> ProvisioningInProgressError:
    """The guard's 409, naming the blocking attempt's job (null for sync work)."""
    current = pending_attempt_for(brand_id)
    return ProvisioningInProgressError(
        details={"jobId": _job_named(current) if current is not None else None}
    )


def attempt_driven_async(attempt: ProvisioningAttempt) -> bool:
    """Whether the attempt's chain is async work (the workers'); False for a sync request's
    (its request runs it) and an attempt without a chain."""
    return (
        attempt.job_id is not None
        and not AsyncJob.objects.filter(pk=attempt.job_id, mode=JobMode.SYNC).exists()
    )


def _job_named(attempt: ProvisioningAttempt) -> str | None:
    """The job a 409 names for the blocking attempt: its async chain's; null for sync work
    (SPEC §6.2: its request is answering it)."""
    return str(attempt.job_id) if attempt_driven_async(attempt) else None


def organization_onboarding_lock(organization_id: uuid.UUID) -> None:
    """Lock the org row until the transaction ends: onboarding accepts of one org are taken
    one at a time, so two cannot both fit under the org's cap of open items (SPEC §12.4).
    FOR NO KEY UPDATE: rows that refer to the org (a brand created meanwhile) take FOR KEY
    SHARE on it, which this lock does not block."""
    list(
        Organization.objects.select_for_update(no_key=True)
        .filter(pk=organization_id)
        .values_list("pk")
    )


def attempts_lock(job_ids: list[uuid.UUID]) -> list[ProvisioningAttempt]:
    """The pending attempts of these chains (by their root ids), locked in primary-key order
    until the transaction ends (an onboarding's cancel, SPEC §12.4)."""
    return list(
        ProvisioningAttempt.objects.select_for_update()
        .filter(job_id__in=job_ids, status=AttemptStatus.PENDING)
        .order_by("pk")
        .only("id", "job_id", "workspace_promoted", "candidate_workspace_id")
    )


def _lock(brand_id: uuid.UUID) -> str | None:
    """Lock the brand row until the transaction ends; its pointer as of now."""
    pointers = list(
        Brand.objects.select_for_update()
        .filter(pk=brand_id)
        .values_list("semrush_sub_workspace_id", flat=True)
    )
    if not pointers:
        raise BrandNotFoundError()
    return pointers[0]


def _pass_and_insert(
    *,
    brand_id: uuid.UUID,
    started_by: AttemptStartedBy,
    job_id: uuid.UUID | None,
    candidate: str | None,
) -> ProvisioningAttempt | None:
    schema_present, blocking = _read_pending(brand_id, tolerate_missing=job_id is None)
    if not schema_present:
        return None
    if blocking is not None:
        if blocking.updated_at is None or not services.attempt_is_stale(attempt_id=blocking.id):
            raise ProvisioningInProgressError(details={"jobId": _job_named(blocking)})
        services.attempt_reconcile_stale(attempt=blocking)
    attempt = attempt_row(
        brand_id=brand_id, started_by=started_by, job_id=job_id, candidate=candidate
    )
    attempt.save(force_insert=True)
    return attempt


def attempt_row(
    *,
    brand_id: uuid.UUID,
    started_by: AttemptStartedBy,
    job_id: uuid.UUID | None,
    candidate: str | None = None,
) -> ProvisioningAttempt:
    """A new pending attempt (not saved), driven by the chain `job_id`; `candidate`: the
    workspace it settles (the brand's pointer)."""
    return ProvisioningAttempt(
        id=uuid.uuid4(),
        brand_id=brand_id,
        started_by=started_by,
        candidate_workspace_id=candidate,
        candidate_at=timezone.now() if candidate is not None else None,
        job_id=job_id,
        **context.actor_fields("started"),
    )


def _read_pending(
    brand_id: uuid.UUID, *, tolerate_missing: bool
) -> tuple[bool, ProvisioningAttempt | None]:
    """(schema present?, the pending attempt). Sync work reads inside a savepoint so that a
    missing table leaves the transaction usable; async work writes jobs and attempts anyway,
    so it needs the schema and reads directly."""
    if not tolerate_missing:
        return True, pending_attempt_for(brand_id)
    try:
        with transaction.atomic():
            return True, pending_attempt_for(brand_id)
    except ProgrammingError as exc:
        if getattr(exc.__cause__, "sqlstate", None) in _MISSING_SCHEMA_SQLSTATES:
            logger.warning("attempts table missing; guard proceeds (migration pending)")
            return False, None
        raise
