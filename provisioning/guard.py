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

Async work hands its attempt to the chain it writes in that transaction. Sync work holds it for
the request's upstream calls and ends it on every exit (SPEC §11.5):

    with attempt_held(brand_id=..., started_by=...) as held:
        ...  # the request's upstream work; the attempt ends when the block does

A deploy may run ahead of its migration: when the attempts table or column does not exist yet
(PostgreSQL 42P01/42703, read inside a savepoint so the transaction survives), sync work proceeds
without an attempt (`begun.attempt is None`); any other read error fails closed. (Deactivate
works without one; the chain's steps, which sync creates and activates run inline, need their
attempt's row: those answer 503 `configurationError`, `flows.common.chain_run_sync`.)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import IntegrityError, ProgrammingError, transaction
from django.utils import timezone

from kernel import context
from kernel.errors import DomainError
from provisioning import services, states
from provisioning.exceptions import ProvisioningInProgressError, attempt_reason
from provisioning.models import AttemptReason, AttemptStartedBy, AttemptStatus, ProvisioningAttempt
from serenity.exceptions import BrandNotFoundError
from serenity.models import Brand, Market, Organization

logger = logging.getLogger("serenity.provisioning")

# PostgreSQL: undefined_table, undefined_column.
_MISSING_SCHEMA_SQLSTATES = frozenset({"42P01", "42703"})
_CONSTRAINT = "one_pending_attempt_per_brand"


# The caller's refusals, run under the brand's lock with the pointer read there.
Checks = Callable[[str | None], None]


@dataclass(frozen=True)
class Begun:
    """What the guard began: the attempt (None only while the attempts table is missing) and the
    brand's pointer as read under the lock."""

    attempt: ProvisioningAttempt | None
    pointer: str | None


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
    lock, the read and a savepoint (a failure ends the caller's transaction)."""
    if brand_is_new:
        with transaction.atomic(savepoint=False):
            first = ProvisioningAttempt.objects.create(
                brand_id=brand_id,
                started_by=started_by,
                job_id=job_id,
                **context.actor_fields("started"),
            )
            yield Begun(attempt=first, pointer=None)
        return
    try:
        with transaction.atomic():
            pointer = _lock(brand_id)
            if checks is not None:
                checks(pointer)
            attempt = _pass_and_insert(
                brand_id=brand_id,
                started_by=started_by,
                job_id=job_id,
                candidate=pointer if candidate_is_pointer else None,
            )
            yield Begun(attempt=attempt, pointer=pointer)
    except IntegrityError as exc:
        if _CONSTRAINT not in str(exc):
            raise
        raise in_progress_error(brand_id=brand_id) from None


@dataclass
class SyncAttempt:
    """A sync request's hold on its brand (`attempt_held`): the attempt begun for it (None only
    while the attempts table is missing), the owner of the request's market reservations (the
    attempt, else a fresh id) and the reservation made in the begin transaction, if any.

    The block says how its attempt ends when that is not the default: `fail(error)` (it answered
    an error without raising it), or `withdraw()` (it was refused before any upstream write).
    The chain's steps that the block runs inline end the attempt themselves (SPEC §6.3), as on
    a worker: the block's end then changes nothing of it."""

    brand_id: uuid.UUID
    attempt: ProvisioningAttempt | None
    owner: uuid.UUID
    market: Market | None = None
    failure: DomainError | None = field(default=None, init=False)
    withdrawn: bool = field(default=False, init=False)

    @property
    def attempt_id(self) -> uuid.UUID | None:
        return self.attempt.id if self.attempt is not None else None

    def fail(self, error: DomainError) -> None:
        self.failure = error

    def withdraw(self) -> None:
        self.withdrawn = True


# What a failure records as the attempt's reason; None: the work failed but the brand's
# provisioning did not (the attempt ends `ready`).
FailureReason = Callable[[DomainError], AttemptReason | None]


@contextmanager
def attempt_held(
    *,
    brand_id: uuid.UUID,
    started_by: AttemptStartedBy,
    checks: Checks | None = None,
    reserve: Callable[[uuid.UUID], Market | None] | None = None,
    insert_brand: Callable[[], object] | None = None,
    candidate_is_pointer: bool = False,
    failure_reason: FailureReason = attempt_reason,
) -> Iterator[SyncAttempt]:
    """Sync work on a brand, begun and ended here: the one way a sync request holds its brand.

    Begins in one durable transaction (committed before the block's upstream calls, which must
    not run inside a caller's transaction: nesting raises RuntimeError): `insert_brand()` (a
    brand create: the brand row, which nobody else can see yet), then the guard (`lease`, with
    `checks` and `candidate_is_pointer`), then `reserve(owner)` (the request's market
    reservation). Raises what `lease` raises, before the block runs.

    Ends on every exit of the block, with one conditional write (a cancel or a reconcile may
    have ended the attempt first):
      withdrawn             the attempt is deleted, as if it had never begun
      fail(error)           `failed` with `failure_reason(error)` (None: `ready`)
      success               `ready`
      a domain error        `failed` with `failure_reason(error)` (None: `ready`)
      any other exception   `failed` / `unexpected`
    Every exit but a success also frees the owner's reservations that created nothing upstream
    (SPEC §3), and ends a brand this request inserted by deleting it, with its attempt and
    reservation (SPEC §4.1). The block's exception propagates unchanged."""
    brand_is_new = insert_brand is not None
    held = _held_begin(
        brand_id=brand_id,
        started_by=started_by,
        checks=checks,
        reserve=reserve,
        insert_brand=insert_brand,
        candidate_is_pointer=candidate_is_pointer,
    )
    try:
        yield held
    except BaseException as exc:
        _held_end(held, exc=exc, failure_reason=failure_reason, brand_is_new=brand_is_new)
        raise
    _held_end(held, exc=None, failure_reason=failure_reason, brand_is_new=brand_is_new)


def _held_begin(
    *,
    brand_id: uuid.UUID,
    started_by: AttemptStartedBy,
    checks: Checks | None,
    reserve: Callable[[uuid.UUID], Market | None] | None,
    insert_brand: Callable[[], object] | None,
    candidate_is_pointer: bool,
) -> SyncAttempt:
    with transaction.atomic(durable=True):
        if insert_brand is not None:
            insert_brand()
        with lease(
            brand_id=brand_id,
            started_by=started_by,
            checks=checks,
            brand_is_new=insert_brand is not None,
            candidate_is_pointer=candidate_is_pointer,
        ) as begun:
            owner = begun.attempt.id if begun.attempt is not None else uuid.uuid4()
            market = reserve(owner) if reserve is not None else None
    return SyncAttempt(brand_id=brand_id, attempt=begun.attempt, owner=owner, market=market)


def _held_end(
    held: SyncAttempt,
    *,
    exc: BaseException | None,
    failure_reason: FailureReason,
    brand_is_new: bool,
) -> None:
    """End the attempt as `attempt_held` says."""
    failed = held.withdrawn or held.failure is not None or exc is not None
    if failed and brand_is_new:
        Brand.objects.filter(pk=held.brand_id).delete()
        return
    if failed:
        services.release_reservations(owner=held.owner)
    if held.attempt is None:
        return
    if held.withdrawn:
        attempt_withdraw(held.attempt)
        return
    reason, message = _failure_of(held, exc, failure_reason)
    if reason is None:
        states.transition(attempt_id=held.attempt.id, to=AttemptStatus.READY)
        return
    states.transition(
        attempt_id=held.attempt.id, to=AttemptStatus.FAILED, reason=reason, error=message
    )


def _failure_of(
    held: SyncAttempt, exc: BaseException | None, failure_reason: FailureReason
) -> tuple[AttemptReason | None, str | None]:
    """The attempt's failure reason and message for how the block ended; no reason: `ready`."""
    if held.failure is not None:
        return failure_reason(held.failure), held.failure.message
    if exc is None:
        return None, None
    if isinstance(exc, DomainError):
        return failure_reason(exc), exc.message
    return AttemptReason.UNEXPECTED, None


def attempt_withdraw(attempt: ProvisioningAttempt) -> None:
    """Take back an attempt that did no work (its request was refused before any upstream
    write): the lease ends as if it had never begun."""
    ProvisioningAttempt.objects.filter(pk=attempt.id, status=AttemptStatus.PENDING).delete()


def in_progress_error(*, brand_id: uuid.UUID) -> ProvisioningInProgressError:
    """The guard's 409, naming the blocking attempt's job (null for sync work)."""
    current = pending_attempt_for(brand_id)
    return ProvisioningInProgressError(
        details={"jobId": str(current.job_id) if current and current.job_id else None}
    )


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
            raise ProvisioningInProgressError(
                details={"jobId": str(blocking.job_id) if blocking.job_id else None}
            )
        services.attempt_reconcile_stale(attempt=blocking)
    return ProvisioningAttempt.objects.create(
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
