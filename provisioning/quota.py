"""Upstream quota (SPEC §10.6): one token bucket per Semrush credential, shared by every process.

Semrush limits requests per credential. Every upstream call takes a permit first, in
:meth:`provisioning.semrush.calls.SemrushCaller._request` (the one place every call goes
through), from the :class:`CredentialPermits` that :func:`provisioning.upstream.client_for_org`
gives the client. Nothing else in the code base knows about the quota.

The bucket: GCRA with reservations
----------------------------------
A bucket is one number, ``tat`` (the "theoretical arrival time" of the next permit, epoch
seconds), for rate ``r`` (interval ``T = 1/r``) and burst ``b`` (tolerance ``τ = b·T``). A caller
asks for a permit with a patience ``w``: its permit is due at ``max(tat, now) + T - τ``; if that is
at most ``w`` away the permit is *reserved* (``tat`` advances by ``T``) and the caller sleeps
until it is due, else nothing is reserved and the caller learns how long it would have waited.
So the bucket answers "wait ``x`` seconds" instead of "no", and callers with little patience
never push the horizon beyond what they accepted: the reserved horizon stays within about a
second of now even with a thousand chains contending.

A refused caller gets a place in a virtual queue (``queue``, a second horizon advancing by ``T``
per refusal): its "retry in" is its place, so refused steps come back spaced at the bucket's
rate instead of all at once (a thundering herd of re-claims would cost the database more than
the quota saves). A 429 with ``Retry-After`` pauses the credential: ``tat`` moves to the end of
the pause (no burst right after it), for every process, since the state is shared.

The bucket paces ``SEMRUSH_RATE_LIMIT_MARGIN`` (5 %) below the configured rate: an upstream
that enforces R requests per second over a sliding second answers 429 to a client pacing at
exactly R as soon as network or scheduling jitter makes one request arrive later than the one
R permits after it (measured: a 429 every two seconds at exactly 50/s, each pausing the
credential for its ``Retry-After``).

Where the bucket lives (:func:`buckets`): Redis when the broker is Redis (an atomic Lua script
through redis-py's ``register_script``, the clock is Redis' ``TIME`` so every host agrees),
PostgreSQL otherwise (one :class:`~provisioning.models.UpstreamBucket` row per credential,
locked with ``select_for_update`` for the few microseconds of the computation), in-process for
the embedded default (SQLite and a filesystem broker: one process runs everything that calls
Semrush, ``./scripts/run``). ``SEMRUSH_RATE_LIMIT_BACKEND`` forces one. A bucket that cannot be
reached (Redis down) lets the call through and says so in the log: upstream's own 429 is the
backstop, and the limiter must not take the service down with it.

The key is an HMAC-SHA256 of the credential (keyed by ``SECRET_KEY``), never the credential;
metrics are labelled with the org id.

Patience: who waits, and how long
---------------------------------
- A chained step (:func:`step_permits`): its first permit within
  ``SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS`` (1 s) and behind at most
  ``SEMRUSH_RATE_LIMIT_STEP_QUEUE`` (10) permits already reserved, else
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
  ``COMPENSATION_WAIT_SECONDS`` for each permit, no budget for the whole.
- Anything else (a sync request, the sweep): at most
  ``SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS`` (5 s) of waiting in all, then
  :class:`~provisioning.semrush.errors.SemrushBusyError`, which flows handle like any upstream
  failure (they compensate: release the reservation, empty a workspace they created) and the
  API answers 503 ``upstreamBusy`` with ``Retry-After``. The compensation's own calls, after a
  refusal, may wait up to ``COMPENSATION_WAIT_SECONDS`` each: an orphan upstream is worse than
  a slower 503.

Fairness
--------
Buckets are per credential, so one org's onboarding never takes another org's permits. A step
refused for quota does not sleep in the worker slot: it is released with ``runAfter`` at its
place in the queue and no message (``published_at`` NULL); the dispatcher
(:func:`jobs.services.jobs_dispatch_due`) publishes due jobs round-robin across orgs (ORM window
function: each org's n-th due job before anyone's (n+1)-th). The broker queue therefore holds
at most about one dispatcher round of any org's backlog, and a second org's new chain, published
on commit, runs after at most those few milliseconds-long refusals.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import redis
from django.conf import settings
from django.db import connection, transaction

from kernel.metrics import (
    UPSTREAM_PERMIT_DEFERRALS,
    UPSTREAM_PERMIT_REFUSALS,
    UPSTREAM_PERMIT_WAIT,
    UPSTREAM_PERMITS,
    UPSTREAM_RATE_LIMITED,
)
from provisioning.models import UpstreamBucket
from provisioning.semrush.errors import SemrushBusyError

logger = logging.getLogger("serenity.quota")

# After a refusal, the calls that undo what the refused work made (emptying a workspace this
# request created) may wait this long each for their permits.
COMPENSATION_WAIT_SECONDS = 20.0
# A bucket's state outlives its last permit by this much (Redis key TTL).
IDLE_TTL_SECONDS = 60.0
# After Redis failed, the limiter lets calls through without asking it for this long.
REDIS_RETRY_AFTER_SECONDS = 5.0


@dataclass(frozen=True)
class Reservation:
    """A bucket's answer: `granted` (the permit is reserved, due in `wait` seconds) or not (the
    caller's place in the queue is `wait` seconds away)."""

    granted: bool
    wait: float


class Buckets(Protocol):
    """Where buckets live. `reserve` and `pause` are atomic across every process sharing it."""

    def reserve(self, key: str, *, rate: float, burst: int, max_wait: float) -> Reservation: ...

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None: ...


def _gcra(
    *, tat: float | None, queue: float | None, now: float, rate: float, burst: int, max_wait: float
) -> tuple[Reservation, float | None, float | None]:
    """The bucket's arithmetic (module docstring): the answer and the new (tat, queue); None
    leaves a value as it was. The Lua script of :class:`RedisBuckets` is this, line for line."""
    interval = 1.0 / rate
    tolerance = burst * interval
    start = max(tat if tat is not None else now, now)
    permit_at = start + interval - tolerance
    wait = max(permit_at - now, 0.0)
    if wait <= max_wait:
        return Reservation(True, wait), start + interval, None
    place = max(queue if queue is not None else 0.0, permit_at)
    return Reservation(False, place - now), None, place + interval


def _paused(
    *, tat: float | None, queue: float | None, now: float, rate: float, burst: int, seconds: float
) -> tuple[float, float]:
    """The (tat, queue) after a pause of `seconds`: the next permit is due when it ends."""
    interval = 1.0 / rate
    until = now + seconds
    return (
        max(tat if tat is not None else now, until + burst * interval - interval),
        max(queue if queue is not None else 0.0, until),
    )


class MemoryBuckets:
    """Buckets in this process (the embedded default: one process calls Semrush)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float | None, float | None]] = {}

    def reserve(self, key: str, *, rate: float, burst: int, max_wait: float) -> Reservation:
        with self._lock:
            tat, queue = self._state.get(key, (None, None))
            answer, new_tat, new_queue = _gcra(
                tat=tat, queue=queue, now=self._clock(), rate=rate, burst=burst, max_wait=max_wait
            )
            self._state[key] = (
                new_tat if new_tat is not None else tat,
                new_queue if new_queue is not None else queue,
            )
            return answer

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None:
        with self._lock:
            tat, queue = self._state.get(key, (None, None))
            self._state[key] = _paused(
                tat=tat, queue=queue, now=self._clock(), rate=rate, burst=burst, seconds=seconds
            )


class DatabaseBuckets:
    """Buckets as rows of :class:`UpstreamBucket` (PostgreSQL without a Redis broker).

    Each reservation is one short transaction: the row is locked (``select_for_update``,
    created on first use), computed on, and written back; no transaction spans an upstream
    call. The clock is this host's (hosts of one deployment keep NTP time)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock

    def _locked(self, key: str) -> UpstreamBucket:
        bucket, _ = UpstreamBucket.objects.select_for_update().get_or_create(key=key)
        return bucket

    def reserve(self, key: str, *, rate: float, burst: int, max_wait: float) -> Reservation:
        with transaction.atomic():
            bucket = self._locked(key)
            answer, tat, queue = _gcra(
                tat=bucket.tat,
                queue=bucket.queue,
                now=self._clock(),
                rate=rate,
                burst=burst,
                max_wait=max_wait,
            )
            changes = {"tat": tat} if tat is not None else {"queue": queue}
            UpstreamBucket.objects.filter(pk=key).update(**changes)
        return answer

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None:
        with transaction.atomic():
            bucket = self._locked(key)
            tat, queue = _paused(
                tat=bucket.tat,
                queue=bucket.queue,
                now=self._clock(),
                rate=rate,
                burst=burst,
                seconds=seconds,
            )
            UpstreamBucket.objects.filter(pk=key).update(tat=tat, queue=queue)


# KEYS[1]: the bucket (a hash {tat, queue}). ARGV: interval, tolerance, max_wait (reserve) or
# seconds (pause), mode ("reserve" | "pause"), idle TTL. Floats travel as strings: a Lua number
# returned to Redis would be truncated to an integer.
_BUCKET_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local amount = tonumber(ARGV[3])
local ttl = tonumber(ARGV[5])
local tat = tonumber(redis.call('HGET', KEYS[1], 'tat') or '')
local queue = tonumber(redis.call('HGET', KEYS[1], 'queue') or '')
if tat == nil or tat < now then tat = now end
if queue == nil then queue = 0 end
local granted = 0
local wait
if ARGV[4] == 'pause' then
  local pause_end = now + amount
  tat = math.max(tat, pause_end + tolerance - interval)
  queue = math.max(queue, pause_end)
  wait = 0
else
  local permit_at = tat + interval - tolerance
  wait = math.max(permit_at - now, 0)
  if wait <= amount then
    granted = 1
    tat = tat + interval
  else
    local place = math.max(queue, permit_at)
    wait = place - now
    queue = place + interval
  end
end
redis.call('HSET', KEYS[1], 'tat', tostring(tat), 'queue', tostring(queue))
local horizon = math.max(tat, queue) - now + ttl
redis.call('PEXPIRE', KEYS[1], math.ceil(horizon * 1000))
return {granted, tostring(wait)}
"""


class RedisBuckets:
    """Buckets in Redis (the broker's server by default): one atomic script call per permit."""

    def __init__(self, url: str) -> None:
        timeout = max(float(settings.JOBS_PUBLISH_TIMEOUT_SECONDS), 0.1)
        self._client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._script = self._client.register_script(_BUCKET_SCRIPT)
        self._down_until = 0.0

    def _call(self, key: str, *args: str) -> Reservation:
        if time.monotonic() < self._down_until:
            return Reservation(True, 0.0)
        try:
            granted, wait = self._script(keys=[key], args=[*args, repr(IDLE_TTL_SECONDS)])
        except redis.RedisError:
            # Fail open: without its bucket the service still works, and upstream's 429 (with
            # the client's retries) is the backstop.
            logger.warning("upstream quota: Redis unreachable; calls go unmetered for now")
            self._down_until = time.monotonic() + REDIS_RETRY_AFTER_SECONDS
            return Reservation(True, 0.0)
        return Reservation(bool(int(granted)), float(wait))

    def reserve(self, key: str, *, rate: float, burst: int, max_wait: float) -> Reservation:
        interval = 1.0 / rate
        return self._call(key, repr(interval), repr(burst * interval), repr(max_wait), "reserve")

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None:
        interval = 1.0 / rate
        self._call(key, repr(interval), repr(burst * interval), repr(seconds), "pause")


_buckets: dict[tuple[int, str], Buckets] = {}
_buckets_lock = threading.Lock()


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


def buckets() -> Buckets:
    """This process's buckets (one per process and backend; a forked child builds its own)."""
    name = backend_name()
    cache_key = (os.getpid(), f"{name}:{_redis_url() if name == 'redis' else ''}")
    with _buckets_lock:
        found = _buckets.get(cache_key)
        if found is None:
            if name == "redis":
                found = RedisBuckets(_redis_url())
            elif name == "database":
                found = DatabaseBuckets()
            elif name == "memory":
                found = MemoryBuckets()
            else:
                raise ValueError(f"unknown SEMRUSH_RATE_LIMIT_BACKEND {name!r}")
            _buckets[cache_key] = found
        return found


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


@contextlib.contextmanager
def step_permits() -> Iterator[None]:
    """Clients built inside this block follow a chained step's patience (module docstring)."""
    token = _in_step.set(True)
    try:
        yield
    finally:
        _in_step.reset(token)


@contextlib.contextmanager
def patient_permits() -> Iterator[None]:
    """Clients built inside this block wait up to ``COMPENSATION_WAIT_SECONDS`` for each permit,
    with no budget for the whole: an operator's command that makes many calls in a row (the
    audit lists every workspace's projects) goes at the credential's pace instead of failing
    once five seconds of waits have added up."""
    token = _patient.set(True)
    try:
        yield
    finally:
        _patient.reset(token)


@dataclass(frozen=True)
class Limits:
    rate: float
    burst: int


def limits_for(*, rate: float | None, burst: int | None) -> Limits:
    """The org's override where it has one, else `SEMRUSH_RATE_LIMIT_PER_SECOND` / `_BURST`;
    the bucket paces `SEMRUSH_RATE_LIMIT_MARGIN` below that rate (module docstring)."""
    configured = float(rate if rate else settings.SEMRUSH_RATE_LIMIT_PER_SECOND)
    margin = min(max(float(settings.SEMRUSH_RATE_LIMIT_MARGIN), 0.0), 0.5)
    return Limits(
        rate=configured * (1.0 - margin),
        burst=max(int(burst if burst else settings.SEMRUSH_RATE_LIMIT_BURST), 1),
    )


class CredentialPermits:
    """The permits of one client (one request, one step run): the protocol
    :class:`~provisioning.semrush.calls.SemrushCaller` calls before every attempt.

    `acquire` returns once a permit is due (after sleeping until then), or raises
    :class:`PermitDeferredError` (in a step) / :class:`SemrushBusyError` (elsewhere).
    `pause` records a 429's Retry-After for every process."""

    def __init__(
        self,
        *,
        key: str,
        limits: Limits,
        org_id: str,
        in_step: bool | None = None,
        store: Buckets | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._key = key
        self._limits = limits
        self._org = org_id
        self._in_step = _in_step.get() if in_step is None else in_step
        self._patient = _patient.get() and not self._in_step
        self._store = store
        self._sleep = sleep
        self._granted = 0
        self._waited = 0.0
        self._refused = False

    @property
    def store(self) -> Buckets:
        if self._store is None:
            self._store = buckets()
        return self._store

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
        if self._limits.rate <= 0:
            return
        answer = self.store.reserve(
            self._key,
            rate=self._limits.rate,
            burst=self._limits.burst,
            max_wait=self._patience(),
        )
        if not answer.granted:
            retry_in = max(answer.wait, 0.001)
            if self._in_step:
                UPSTREAM_PERMIT_DEFERRALS.labels(self._org).inc()
                raise PermitDeferredError(retry_in)
            self._refused = True
            UPSTREAM_PERMIT_REFUSALS.labels(self._org).inc()
            raise SemrushBusyError(operation=operation, retry_after=math.ceil(retry_in))
        self._granted += 1
        UPSTREAM_PERMITS.labels(self._org).inc()
        UPSTREAM_PERMIT_WAIT.labels(self._org).observe(answer.wait)
        if answer.wait > 0:
            self._waited += answer.wait
            self._sleep(answer.wait)

    def pause(self, seconds: float | None) -> None:
        UPSTREAM_RATE_LIMITED.labels(self._org).inc()
        if seconds is None or seconds <= 0 or self._limits.rate <= 0:
            return
        self.store.pause(
            self._key, rate=self._limits.rate, burst=self._limits.burst, seconds=seconds
        )
