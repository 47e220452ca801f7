"""Upstream quota (SPEC §10.6): one token bucket per Semrush credential, shared by every process.

Semrush limits requests per credential. Every upstream call takes a permit first, in
:meth:`provisioning.semrush.calls.SemrushCaller._request` (the one place every call goes
through), from the :class:`CredentialPermits` that :func:`provisioning.upstream.client_for_org`
gives the client. Nothing else in the code base knows about the quota.

The credential's bucket (its arithmetic, round-robin across orgs, and where it lives: Redis,
PostgreSQL or in-process) is :mod:`provisioning.buckets`; this module decides who asks for a
permit with what patience, and holds the concurrency slot after it.

Patience: who waits, and how long
---------------------------------
- A chained step (:func:`step_permits`): its first permit within
  ``SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS`` (1 s) and behind at most
  ``SEMRUSH_RATE_LIMIT_STEP_QUEUE`` (3) permits already reserved, else
  :class:`PermitDeferredError`: the step is re-scheduled at its place in the queue (a later
  ``runAfter``, see :func:`provisioning.chain.quota_deferring`) and leaves the worker in
  milliseconds, without consuming its retry budget or failing the chain. The second bound
  matters at high rates: at 50/s a whole second of reservations is 50 steps asleep in worker
  slots, more than a deployment's slots, and a full pool takes the broker queue no faster than
  the permits come; with it, at most about ten slots per credential wait for a permit, the
  others take messages and re-schedule the credential's backlog in milliseconds, and another
  org's message is reached at once. Once a step has made an upstream call, its
  later permits may wait up to ``SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS``: half-done work is
  better finished than interrupted (an interrupted step resumes, as after a crash, but its
  re-run lists what it made, which costs more quota). A refusal even then defers it the same
  way.
- An operator's command that makes many calls (the audit, :func:`patient_permits`): up to
  ``COMPENSATION_WAIT_SECONDS`` for each permit, no budget for the whole; with a ``share``
  below 1 (the audit: ``SERENITY_AUDIT_RATE_SHARE``, half) it also takes at most that share of
  the credential's rate, so provisioning work waiting on the credential keeps the rest.
- Anything else (a sync request, the sweep): at most
  ``SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS`` (5 s) of waiting in all, then
  :class:`~provisioning.semrush.errors.SemrushBusyError`, which flows handle like any upstream
  failure (they compensate: release the reservation, empty a workspace they created) and the
  API answers 503 ``upstreamBusy`` with ``Retry-After``. The compensation's own calls, after a
  refusal, may wait up to ``COMPENSATION_WAIT_SECONDS`` each: an orphan upstream is worse than
  a slower 503.

The broker's FIFO queue could still hold a second org back: a thousand-brand onboarding
publishes a thousand messages on commit. They drain fast because a step refused for quota
leaves its worker slot in milliseconds (a claim, one bucket call, a release) and at most
``SEMRUSH_RATE_LIMIT_STEP_QUEUE`` steps per credential sleep in slots waiting for a permit: the
other slots keep taking messages. A released step comes back by a countdown message at its
place; the dispatcher (:func:`jobs.dispatch.jobs_dispatch_due`, the backstop for lost messages)
publishes due jobs round-robin across orgs too.

The concurrency limit (SPEC §11.1) is :mod:`provisioning.slots`: after its permit, an attempt
takes one of the credential's slots, polling within its patience (a step: 1 s, then it is
re-scheduled; a sync request: what is left of its 5 s), and gives it back with its answer.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from kernel.metrics import (
    UPSTREAM_PERMIT_DEFERRALS,
    UPSTREAM_PERMIT_REFUSALS,
    UPSTREAM_PERMIT_WAIT,
    UPSTREAM_PERMITS,
    UPSTREAM_RATE_LIMITED,
    UPSTREAM_SLOT_REFUSALS,
    org_label,
)
from provisioning import slots as slots_module
from provisioning.buckets import Buckets, DatabaseBuckets, MemoryBuckets
from provisioning.redis_buckets import RedisBuckets
from provisioning.semrush.errors import SemrushBusyError

# After a refusal, the calls that undo what the refused work made (emptying a workspace this
# request created) may wait this long each for their permits.
COMPENSATION_WAIT_SECONDS = 20.0


@dataclass(frozen=True)
class Stores:
    """This process's bucket store and slot store, of one backend."""

    buckets: Buckets
    slots: slots_module.Slots


_stores: dict[tuple[int, str], Stores] = {}
_stores_lock = threading.Lock()


def backend_name() -> str:
    """`redis`, `database` or `memory`: `SEMRUSH_RATE_LIMIT_BACKEND`, else from the broker and
    the database (module docstring)."""
    chosen = (getattr(settings, "SEMRUSH_RATE_LIMIT_BACKEND", "") or "").strip().lower()
    if chosen:
        return chosen
    if _redis_url().startswith(("redis://", "rediss://", "unix://")):
        return "redis"
    if connection.vendor == "postgresql":
        return "database"
    return "memory"


def _redis_url() -> str:
    return str(getattr(settings, "SEMRUSH_RATE_LIMIT_REDIS_URL", "") or settings.CELERY_BROKER_URL)


def stores() -> Stores:
    """This process's stores (one per process and backend; a forked child builds its own)."""
    name = backend_name()
    cache_key = (os.getpid(), f"{name}:{_redis_url() if name == 'redis' else ''}")
    with _stores_lock:
        found = _stores.get(cache_key)
        if found is None:
            if name == "redis":
                bucket_store = RedisBuckets(_redis_url())
                found = Stores(bucket_store, slots_module.RedisSlots(bucket_store.client))
            elif name == "database":
                found = Stores(DatabaseBuckets(), slots_module.DatabaseSlots())
            elif name == "memory":
                found = Stores(MemoryBuckets(), slots_module.MemorySlots())
            else:
                raise ValueError(f"unknown SEMRUSH_RATE_LIMIT_BACKEND {name!r}")
            _stores[cache_key] = found
        return found


def buckets() -> Buckets:
    """This process's buckets."""
    return stores().buckets


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


_in_step: contextvars.ContextVar[bool] = contextvars.ContextVar("quota_in_step", default=False)
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
    `SEMRUSH_RATE_LIMIT_MARGIN` below that rate (module docstring)."""
    configured = float(rate if rate else settings.SEMRUSH_RATE_LIMIT_PER_SECOND)
    margin = min(max(float(settings.SEMRUSH_RATE_LIMIT_MARGIN), 0.0), 0.5)
    return Limits(
        rate=configured * (1.0 - margin),
        burst=max(int(burst if burst else settings.SEMRUSH_RATE_LIMIT_BURST), 1),
        concurrency=max(int(concurrency if concurrency else settings.SEMRUSH_CONCURRENCY_LIMIT), 0),
    )


# A 429 without Retry-After pauses the credential this long (SPEC §11.1).
DEFAULT_PAUSE_SECONDS = 1.0
# Waiting for a free slot: polls start this far apart and double up to the cap.
SLOT_POLL_SECONDS = 0.02
SLOT_POLL_MAX_SECONDS = 0.2


class CredentialPermits:
    """The permits of one client (one request, one step run): the protocol
    :class:`~provisioning.semrush.calls.SemrushCaller` calls around every attempt.

    `acquire` returns once a permit is due (after sleeping until then) and a slot of the
    credential's concurrency limit is held (:mod:`provisioning.slots`), or raises
    :class:`PermitDeferredError` (in a step) / :class:`SemrushBusyError` (elsewhere); `release`
    gives the slot back once the attempt has its answer. `pause` records a 429's Retry-After
    (1 s without one) for every process."""

    def __init__(
        self,
        *,
        key: str,
        limits: Limits,
        org_id: str,
        in_step: bool | None = None,
        store: Buckets | None = None,
        slot_store: slots_module.Slots | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._key = key
        self._limits = limits
        self._org = org_id  # whose queue a refused step joins (round-robin)
        self._org_label = org_label(org_id)
        self._in_step = _in_step.get() if in_step is None else in_step
        self._patient = _patient.get() and not self._in_step
        self._share = _share.get() if self._patient else 1.0
        self._store = store
        self._slot_store = slot_store
        self._sleep = sleep
        self._clock = clock
        self._granted = 0
        self._waited = 0.0
        self._refused = False
        self._slot: str | None = None

    @property
    def key(self) -> str:
        return self._key

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def store(self) -> Buckets:
        if self._store is None:
            self._store = buckets()
        return self._store

    @property
    def slot_store(self) -> slots_module.Slots:
        if self._slot_store is None:
            self._slot_store = stores().slots
        return self._slot_store

    def _patience(self) -> float:
        sync_wait = float(settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS)
        if self._in_step:
            if self._granted == 0:
                # Behind at most STEP_QUEUE reserved permits: see "Patience".
                depth = float(settings.SEMRUSH_RATE_LIMIT_STEP_QUEUE) / self._limits.rate
                return min(float(settings.SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS), depth)
            return sync_wait
        if self._refused or self._patient:
            return COMPENSATION_WAIT_SECONDS
        return max(sync_wait - self._waited, 0.0)

    def acquire(self, operation: str) -> None:
        if self._limits.rate > 0:
            if 0 < self._share < 1:
                self._take_share()
            while not self._acquired(operation):
                # A 429 paused the credential while this permit was waiting to be due: it was
                # granted before the pause and must not be sent into it; ask again.
                pass
        if self._limits.concurrency > 0:
            self._take_slot(operation)

    def release(self) -> None:
        """The attempt has its answer (or failed): its slot is free for the next call."""
        if self._slot is not None:
            slot, self._slot = self._slot, None
            self.slot_store.give_back(self._key, slot)

    def _refuse(self, operation: str, retry_in: float) -> None:
        """No permit or slot within this caller's patience: defer the step or refuse."""
        if self._in_step:
            UPSTREAM_PERMIT_DEFERRALS.labels(self._org_label).inc()
            raise PermitDeferredError(retry_in)
        self._refused = True
        UPSTREAM_PERMIT_REFUSALS.labels(self._org_label).inc()
        raise SemrushBusyError(operation=operation, retry_after=math.ceil(retry_in))

    def _acquired(self, operation: str) -> bool:
        patience = self._patience()
        first_in_step = self._in_step and self._granted == 0
        answer = self.store.reserve(
            self._key,
            rate=self._limits.rate,
            burst=self._limits.burst,
            max_wait=patience,
            first=self._granted == 0,
            org=self._org,
            # A step of an org with nothing waiting is not held to the queue's depth.
            idle_wait=(
                float(settings.SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS) if first_in_step else 0.0
            ),
        )
        if not answer.granted:
            self._refuse(operation, max(answer.wait, 0.001))
        self._granted += 1
        UPSTREAM_PERMITS.labels(self._org_label).inc()
        UPSTREAM_PERMIT_WAIT.labels(self._org_label).observe(answer.wait)
        if answer.wait > 0:
            self._waited += answer.wait
            self._sleep(answer.wait)
            if self.store.pause_remaining(self._key) > 0:
                self._granted -= 1
                return False
        return True

    def _take_share(self) -> None:
        """The caller's own pace (`patient_permits(share)`): a permit of its share's bucket,
        waited for as long as it takes (only such callers of this credential use it)."""
        rate = self._limits.rate * self._share
        while True:
            answer = self.store.reserve(
                f"{self._key}:share", rate=rate, burst=1, max_wait=COMPENSATION_WAIT_SECONDS
            )
            if answer.wait > 0:
                self._sleep(answer.wait)
            if answer.granted:
                return

    def _take_slot(self, operation: str) -> None:
        """Hold one of the credential's slots, polling within this caller's patience for the
        slot (a step: `SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS`; a sync request: what is left of
        its budget), else refuse as for a late permit."""
        ttl = slots_module.slot_ttl()
        if self._in_step:
            patience = float(settings.SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS)
        elif self._refused or self._patient:
            patience = COMPENSATION_WAIT_SECONDS
        else:
            patience = max(float(settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS) - self._waited, 0)
        started = self._clock()
        poll = SLOT_POLL_SECONDS
        while True:
            slot = self.slot_store.take(self._key, limit=self._limits.concurrency, ttl=ttl)
            if slot is not None:
                self._slot = slot
                return
            waited = self._clock() - started
            if waited + poll > patience:
                self._waited += waited
                UPSTREAM_SLOT_REFUSALS.labels(self._org_label).inc()
                # Calls end in well under a second as a rule: come back about then.
                self._refuse(operation, 0.5 + random.random() * 0.5)
            self._sleep(poll)
            poll = min(poll * 2, SLOT_POLL_MAX_SECONDS)

    def pause(self, seconds: float | None) -> None:
        UPSTREAM_RATE_LIMITED.labels(self._org_label).inc()
        if self._limits.rate <= 0:
            return
        if seconds is None or seconds <= 0:
            seconds = DEFAULT_PAUSE_SECONDS
        self.store.pause(
            self._key, rate=self._limits.rate, burst=self._limits.burst, seconds=seconds
        )
