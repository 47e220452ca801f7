"""Upstream quota (SPEC §10.6, §11.1): who asks the credential's limiter for a concurrency slot
and a permit, with what patience.

Every upstream call takes a slot and then a permit, in
:meth:`provisioning.semrush.calls.SemrushCaller._request` (the one place every call goes
through), from the :class:`CredentialPermits` that :func:`provisioning.upstream.client_for_org`
gives the client. The arithmetic and where it lives (Redis for production, this process for
the embedded default) is :mod:`provisioning.limiter`.

Patience: who waits, and how long
---------------------------------
- A chained step (:func:`step_permits`): its first permit only if it is due within
  ``STEP_WAIT_SECONDS`` and behind at most ``STEP_QUEUE`` permits already reserved, its slot
  only if one is handed over within ``STEP_SLOT_WAIT_SECONDS``; else
  :class:`PermitDeferredError`: the step
  is re-scheduled at its org's place in the queue (a later ``runAfter``, see
  :func:`provisioning.chain.quota_deferring`) and gives its worker slot back in milliseconds,
  without consuming its retry budget. So a worker slot never sleeps long for a permit, however
  few slots there are (Celery's prefork default at 2 or 4 processes included), and the
  dispatcher's fair claim (:func:`jobs.runner.run_step`) gives the freed slot to the org with
  the fewest steps running. Once a step has made an upstream call, its later permits may wait up
  to ``SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS``: half-done work is better finished than interrupted
  (its re-run lists what it made, which costs more quota).
- An operator's command that makes many calls (the audit, :func:`patient_permits`): up to
  ``COMPENSATION_WAIT_SECONDS`` for each permit, no budget for the whole; with a ``share``
  below 1 (the audit: ``SERENITY_AUDIT_RATE_SHARE``, half) it also takes at most that share of
  the credential's rate, so provisioning work waiting on the credential keeps the rest.
- Anything else (a sync request, the sweep): at most
  ``SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS`` (5 s) of waiting in all, then
  :class:`~provisioning.semrush.errors.SemrushBusyError` (503 ``upstreamBusy`` with
  ``Retry-After``); "in all" is the client's, or the request's (:func:`request_permits`: a
  sync request running the chain's steps inline builds a client per step). The
  compensation's own calls, after a refusal, may wait up to ``COMPENSATION_WAIT_SECONDS``
  each: an orphan upstream is worse than a slower 503.

The configured rate is a ceiling: the rate each credential is paced at adapts to upstream's
429s (SPEC §13.3; the rules in :mod:`provisioning.limiter`, their numbers in the settings,
:func:`adaptation`), and :func:`rate_per_second` tells it in the operator's terms.

The bucket paces a margin (``SEMRUSH_RATE_LIMIT_MARGIN``, 2 %) below the configured rate: an
upstream that enforces R requests per second over a sliding second answers 429 to a client
pacing at exactly R as soon as jitter makes one request arrive later than the one R permits
after it. At 10/s, 2 % lets each request arrive 20 ms later than the one ten permits after it.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from kernel.metrics import (
    UPSTREAM_PERMIT_DEFERRALS,
    UPSTREAM_PERMIT_REFUSALS,
    UPSTREAM_PERMIT_WAIT,
    UPSTREAM_PERMITS,
    UPSTREAM_RATE_LIMITED,
    UPSTREAM_SLOT_REFUSALS,
    org_label,
)
from provisioning.limiter import Adaptation, MemoryStore, RedisStore, Reservation, Store
from provisioning.semrush.errors import SemrushBusyError, SemrushCredentialRefusedError

# After a refusal, the calls that undo what the refused work made (emptying a workspace this
# request created) may wait this long each for their permits.
COMPENSATION_WAIT_SECONDS = 20.0
# A step's first permit (and its slot) within this, else it is re-scheduled (module docstring).
STEP_WAIT_SECONDS = 0.25
# ... and behind at most this many permits already reserved.
STEP_QUEUE = 3.0
# The grace beyond the client's timeout after which a slot expires on its own.
SLOT_EXPIRY_GRACE_SECONDS = 5.0

_stores: dict[tuple[int, str], Store] = {}
_stores_lock = threading.Lock()


def store() -> Store:
    """This process's limiter store: Redis when the broker is Redis (shared by every process
    and host), else this process's memory (the embedded default). One per process and URL; a
    forked child builds its own."""
    url = str(settings.CELERY_BROKER_URL)
    shared = url.startswith(("redis://", "rediss://", "unix://"))
    cache_key = (os.getpid(), url if shared else "")
    with _stores_lock:
        found = _stores.get(cache_key)
        if found is None:
            timeout = max(float(settings.JOBS_PUBLISH_TIMEOUT_SECONDS), 0.1)
            found = RedisStore(url, timeout=timeout) if shared else MemoryStore()
            _stores[cache_key] = found
        return found


def adaptation() -> Adaptation:
    """The adaptive rate's rules, from the settings (SPEC §13.3, :mod:`provisioning.limiter`)."""
    return Adaptation(
        decrease=float(settings.SEMRUSH_RATE_DECREASE_FACTOR),
        step=float(settings.SEMRUSH_RATE_INCREASE_STEP),
        spell=float(settings.SEMRUSH_RATE_INCREASE_SPELL_SECONDS),
        hold=float(settings.SEMRUSH_RATE_HOLD_SECONDS),
        floor=RATE_FLOOR * (1.0 - _margin()),
    )


def rate_per_second(key: str, limits: Limits) -> float:
    """The credential's current rate in the operator's terms (the configured rate at most,
    the margin not taken off: what `/metrics`, `GET O/serenity` and the admin show)."""
    if limits.rate <= 0:
        return 0.0
    paced = store().rate(key, ceiling=limits.rate, adapt=adaptation())
    return round(paced / (1.0 - _margin()), 2)


def slot_ttl() -> float:
    """How long a slot lives at most: longer than any one attempt (its timeout) can take."""
    return float(settings.SEMRUSH_TIMEOUT_SECONDS) + SLOT_EXPIRY_GRACE_SECONDS


def credential_key(credential: str) -> str:
    """The bucket's key: a keyed hash of the credential, never the credential."""
    digest = hmac.new(settings.SECRET_KEY.encode(), credential.encode(), hashlib.sha256).hexdigest()
    return f"serenity:quota:{digest[:40]}"


# --- patience -----------------------------------------------------------------------------


class PermitDeferredError(Exception):
    """A chained step cannot get a permit soon enough: re-schedule it in `retry_in` seconds.

    Not a Semrush error on purpose: it passes through the flows' upstream-error handling
    untouched (no compensation, no failed outcome) to the step's boundary
    (:func:`provisioning.chain.quota_deferring`), like an interruption of the worker: what the
    step wrote stands, and its re-run resumes."""

    def __init__(self, retry_in: float) -> None:
        super().__init__(f"upstream permit deferred {retry_in:.3f}s")
        self.retry_in = retry_in


class CredentialHeldError(PermitDeferredError):
    """The credential is on hold (SPEC §13.2, :mod:`provisioning.credentials`): a chained step
    waits for it, re-scheduled like a deferred permit (its job reads ``waitingFor:
    "credential"``) and woken when the hold lifts; the refused call did not run and is made
    again then. `retry_in` is only the backstop should no wake come."""


class CredentialGuard(Protocol):
    """A credential's state as a call sees it (`provisioning.credentials.CredentialWatch`)."""

    def held(self) -> bool:
        """Whether the credential is on hold: no call may be sent with it."""

    def answered(self, status: int) -> bool:
        """Upstream answered `status`; True: that answer puts (or keeps) it on hold."""


def held_backstop_seconds() -> float:
    """When a held step runs again should no wake come (the lift wakes it at once): a step
    released just after the lift's wake would otherwise wait long; back then, it makes the
    re-check itself if none was made meanwhile (`credentials.CredentialWatch.held`)."""
    return float(settings.SERENITY_CREDENTIAL_RECHECK_SECONDS)


@dataclass
class _Waits:
    """What the clients sharing one budget have waited, and whether one was refused."""

    waited: float = 0.0
    refused: bool = False


_in_step: contextvars.ContextVar[bool] = contextvars.ContextVar("quota_in_step", default=False)
_request: contextvars.ContextVar[_Waits | None] = contextvars.ContextVar(
    "quota_request", default=None
)
_patient: contextvars.ContextVar[bool] = contextvars.ContextVar("quota_patient", default=False)
_share: contextvars.ContextVar[float] = contextvars.ContextVar("quota_share", default=1.0)


def in_step() -> bool:
    """Whether the caller runs inside a chained step (`step_permits`): it re-schedules itself
    rather than wait (a sync request waits within its budget)."""
    return _in_step.get()


@contextlib.contextmanager
def step_permits() -> Iterator[None]:
    """Clients built inside this block follow a chained step's patience (module docstring)."""
    token = _in_step.set(True)
    try:
        yield
    finally:
        _in_step.reset(token)


@contextlib.contextmanager
def request_permits() -> Iterator[None]:
    """Clients built inside this block share one sync budget (module docstring): a sync request
    whose steps each build their own client waits at most its budget in all, and once any of
    them was refused, the others' compensating calls get the compensation's patience."""
    token = _request.set(_Waits())
    try:
        yield
    finally:
        _request.reset(token)


@contextlib.contextmanager
def patient_permits(share: float = 1.0) -> Iterator[None]:
    """Clients built inside this block wait up to ``COMPENSATION_WAIT_SECONDS`` for each permit,
    with no budget for the whole: an operator's command that makes many calls in a row (the
    audit lists every workspace's projects) goes at the credential's pace instead of failing
    once five seconds of waits have added up.

    With ``share`` below 1, each of their permits is first taken from a bucket of their own
    (the credential's key + ``:share``, in the same store, at ``share`` times the credential's rate,
    no burst), then from the credential's: they never take more than that share of its rate,
    whoever else waits on it."""
    tokens = (_patient.set(True), _share.set(min(max(float(share), 0.0), 1.0)))
    try:
        yield
    finally:
        _share.reset(tokens[1])
        _patient.reset(tokens[0])


@dataclass(frozen=True)
class Limits:
    rate: float
    burst: int
    concurrency: int = 0


def limits_for(*, rate: float | None, burst: int | None, concurrency: int | None = None) -> Limits:
    """The override where there is one (an org with a credential of its own), else
    `SEMRUSH_RATE_LIMIT_PER_SECOND` / `_BURST` and `SEMRUSH_CONCURRENCY_LIMIT`; the bucket paces
    the margin below that rate (module docstring)."""
    configured = float(rate if rate else settings.SEMRUSH_RATE_LIMIT_PER_SECOND)
    return Limits(
        rate=configured * (1.0 - _margin()),
        burst=max(int(burst if burst else settings.SEMRUSH_RATE_LIMIT_BURST), 1),
        concurrency=max(int(concurrency if concurrency else settings.SEMRUSH_CONCURRENCY_LIMIT), 0),
    )


def _margin() -> float:
    """The fraction below the configured rate the bucket paces at (module docstring)."""
    return float(settings.SEMRUSH_RATE_LIMIT_MARGIN)


# The adaptive rate never goes below this (SPEC §13.3), in permits per second.
RATE_FLOOR = 0.5
# A step waits this long for a slot to be handed over (a call ends in less, as a rule) before
# it is re-scheduled (SPEC §13.7).
STEP_SLOT_WAIT_SECONDS = 1.0


class CredentialPermits:
    """The permits of one client (one request, one step run): the protocol
    :class:`~provisioning.semrush.calls.SemrushCaller` calls around every attempt.

    `acquire` returns once a slot of the credential's concurrency limit is held and then a
    permit is due (after sleeping until then, so that the request leaves on time;
    :mod:`provisioning.limiter`), or raises (the slot given back)
    :class:`PermitDeferredError` (in a step) / :class:`SemrushBusyError` (elsewhere); `release`
    gives the slot back once the attempt has its answer. `pause` records a 429's Retry-After
    for every process, or (without one) lowers the credential's adapted rate."""

    def __init__(
        self,
        *,
        key: str,
        limits: Limits,
        org_id: str,
        in_step: bool | None = None,
        store: Store | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        guard: CredentialGuard | None = None,
    ) -> None:
        self._key = key
        self._guard = guard
        self._limits = limits
        self._org = org_id  # whose queue a refused step joins (round-robin)
        self._org_label = org_label(org_id)
        self._in_step = _in_step.get() if in_step is None else in_step
        self._patient = _patient.get() and not self._in_step
        self._share = _share.get() if self._patient else 1.0
        self._store = store
        self._sleep = sleep
        self._clock = clock
        self._granted = 0
        self._waits = _request.get() or _Waits()
        self._slot: str | None = None
        self._adapt = adaptation()

    @property
    def key(self) -> str:
        return self._key

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = store()
        return self._store

    def _patience(self) -> float:
        sync_wait = float(settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS)
        if self._in_step:
            if self._granted == 0:
                # Behind at most STEP_QUEUE reserved permits: see "Patience".
                return min(STEP_WAIT_SECONDS, STEP_QUEUE / self._limits.rate)
            return sync_wait
        if self._waits.refused or self._patient:
            return COMPENSATION_WAIT_SECONDS
        return max(sync_wait - self._waits.waited, 0.0)

    def acquire(self, operation: str) -> None:
        # A share-paced caller (the audit) waits for its own pace holding nothing. Then the
        # slot, then the permit: the request leaves as its permit falls due. Taken after it,
        # the slot's Redis transaction (contended by every thread) delayed some requests by
        # tens of milliseconds, and the next ones' arrivals closed up on them: 11 in a second,
        # a 429.
        if self._guard is not None and self._guard.held():
            self._refuse_held(operation)
        if self._limits.rate > 0 and 0 < self._share < 1:
            self._take_share()
        reserved = self._take_slot(operation) if self._limits.concurrency > 0 else None
        try:
            if self._limits.rate > 0:
                while not self._acquired(operation, reserved):
                    # A 429 paused the credential while this permit was waiting to be due: it
                    # was granted before the pause and must not be sent into it; ask again.
                    reserved = None
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """The attempt has its answer (or failed): its slot is free for the next call."""
        if self._slot is not None:
            slot, self._slot = self._slot, None
            self.store.give_back(self._key, slot, ttl=slot_ttl())

    def answered(self, operation: str, status: int) -> None:
        """Upstream answered the attempt `status`: a 401 on a credential that was accepted
        before puts it on hold, and the call is refused as held (SPEC §13.2)."""
        if self._guard is not None and self._guard.answered(status):
            self._refuse_held(operation)

    def _refuse_held(self, operation: str) -> None:
        """The credential is on hold: a step waits for it, anything else answers 503
        `credentialRefused` at once."""
        if self._in_step:
            raise CredentialHeldError(held_backstop_seconds())
        raise SemrushCredentialRefusedError(
            operation=operation, retry_after=float(settings.SERENITY_CREDENTIAL_RECHECK_SECONDS)
        )

    def _refuse(self, operation: str, retry_in: float) -> None:
        """No permit or slot within this caller's patience: defer the step or refuse."""
        if self._in_step:
            UPSTREAM_PERMIT_DEFERRALS.labels(self._org_label).inc()
            raise PermitDeferredError(retry_in)
        self._waits.refused = True
        UPSTREAM_PERMIT_REFUSALS.labels(self._org_label).inc()
        raise SemrushBusyError(operation=operation, retry_after=math.ceil(retry_in))

    def _acquired(self, operation: str, reserved: Reservation | None = None) -> bool:
        """The permit (`reserved`: already asked for with the slot), slept for until due."""
        answer = (
            reserved
            if reserved is not None
            else self.store.reserve(
                self._key,
                rate=self._limits.rate,
                burst=self._limits.burst,
                max_wait=self._patience(),
                org=self._org,
                first=self._in_step and self._granted == 0,
                adapt=self._adapt,
            )
        )
        if not answer.granted:
            self._refuse(operation, max(answer.wait, 0.001))
        self._granted += 1
        UPSTREAM_PERMITS.labels(self._org_label).inc()
        UPSTREAM_PERMIT_WAIT.labels(self._org_label).observe(answer.wait)
        if answer.wait > 0:
            self._waits.waited += answer.wait
            self._sleep(answer.wait)
            if self.store.pause_remaining(self._key) > 0:
                self._granted -= 1
                return False
        return True

    def _take_share(self) -> None:
        """The caller's own pace (`patient_permits(share)`): a permit of its share's bucket,
        waited for as long as it takes (only such callers of this credential use it)."""
        ceiling = self._limits.rate
        rate = self.store.rate(self._key, ceiling=ceiling, adapt=self._adapt) * self._share
        while True:
            answer = self.store.reserve(
                f"{self._key}:share", rate=rate, burst=1, max_wait=COMPENSATION_WAIT_SECONDS
            )
            if answer.wait > 0:
                self._sleep(answer.wait)
            if answer.granted:
                return

    def _take_slot(self, operation: str) -> Reservation | None:
        """Hold one of the credential's slots, polling within this caller's patience for the
        slot (a step: `STEP_SLOT_WAIT_SECONDS`; a sync request: what is left of its budget):
        a slot given back meanwhile is handed over to it at once (the org holding the fewest
        slots first: :mod:`provisioning.limiter_rules`); else refuse as for a late permit, to
        come back when its turn comes (the pace slots are given back at). A free slot comes
        with the call's permit asked for in the same change (`Store.take_and_reserve`): its
        answer is returned (refused: no slot is held); None: the permit is still to ask."""
        if self._in_step:
            patience = STEP_SLOT_WAIT_SECONDS
        elif self._waits.refused or self._patient:
            patience = COMPENSATION_WAIT_SECONDS
        else:
            sync_wait = float(settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS)
            patience = max(sync_wait - self._waits.waited, 0)
        limit = self._limits.concurrency
        waiter = uuid.uuid4().hex
        slot, reserved = self._take(waiter=waiter, patience=patience)
        if reserved is not None and not reserved.granted:
            return reserved  # refused its permit (`_acquired` refuses): no slot held
        if slot is None and patience > 0:
            started = self._clock()
            slot = self.store.handed(self._key, waiter, patience)
            if slot is None:
                slot = self.store.stop_waiting(self._key, waiter)
            self._waits.waited += self._clock() - started
        if slot is not None:
            self._slot = slot
            return reserved
        UPSTREAM_SLOT_REFUSALS.labels(self._org_label).inc()
        self._refuse(operation, self.store.slot_turn(self._key, limit=limit))
        return None

    def _take(self, *, waiter: str, patience: float) -> tuple[str | None, Reservation | None]:
        """A slot, with the call's permit when the credential has a rate (`_take_slot`)."""
        limit, ttl = self._limits.concurrency, slot_ttl()
        if self._limits.rate <= 0:
            slot = self.store.take(
                self._key, limit=limit, ttl=ttl, org=self._org, waiter=waiter, patience=patience
            )
            return slot, None
        return self.store.take_and_reserve(
            self._key,
            limit=limit,
            ttl=ttl,
            org=self._org,
            waiter=waiter,
            patience=patience,
            rate=self._limits.rate,
            burst=self._limits.burst,
            max_wait=self._patience(),
            first=self._in_step and self._granted == 0,
            adapt=self._adapt,
        )

    def pause(self, seconds: float | None) -> None:
        UPSTREAM_RATE_LIMITED.labels(self._org_label).inc()
        if self._limits.rate <= 0:
            return
        self.store.pause(
            self._key,
            rate=self._limits.rate,
            burst=self._limits.burst,
            seconds=seconds if seconds is not None and seconds > 0 else None,
            adapt=self._adapt,
        )
