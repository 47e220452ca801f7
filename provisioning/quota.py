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

A refused caller gets a place in a virtual queue (``queue``, a second horizon): its "retry in"
is its place, so refused steps come back spaced at the bucket's pace instead of all at once (a
thundering herd of re-claims would cost the database more than the quota saves). Places are
spaced by ``T`` times the permits an average caller takes (measured by the bucket: permits
granted ÷ first permits, a moving average): spaced by ``T`` alone, steps that each make two or
three calls would come back faster than they can be served, be refused again and again, and
push the queue far beyond the work (measured: a one-minute idle gap in the 1000-chain run).

A 429 with ``Retry-After`` pauses the credential: ``tat`` moves to the end of
the pause (no burst right after it), for every process, since the state is shared. A 429
without one pauses it for ``DEFAULT_PAUSE_SECONDS`` (1 s).

The bucket paces ``SEMRUSH_RATE_LIMIT_MARGIN`` (5 %) below the configured rate: an upstream
that enforces R requests per second over a sliding second answers 429 to a client pacing at
exactly R as soon as network or scheduling jitter makes one request arrive later than the one
R permits after it (measured: a 429 every two seconds at exactly 50/s, each pausing the
credential for its ``Retry-After``). When the jitter is larger than that margin (a loaded host),
429s still come; each one also makes the bucket pace ``SLOW_STEP`` (5 %) slower, at most once
a second and up to ``SLOW_MAX``, fading by ``SLOW_DECAY`` a second: a few percent of rate is
cheaper than a one-second pause (measured: 66 429s in a 1000-chain run on a host at load 25).

Where the bucket lives (:func:`buckets`): Redis when the broker is Redis (an atomic Lua script
through redis-py's ``register_script``, the clock is Redis' ``TIME`` so every host agrees),
PostgreSQL otherwise (one :class:`~provisioning.models.UpstreamBucket` row per credential,
locked with ``select_for_update`` for the few microseconds of the computation), in-process for
the embedded default (SQLite and a filesystem broker, a development setup: there each process,
the dev server and each worker pool process, paces on its own). ``SEMRUSH_RATE_LIMIT_BACKEND``
forces one. A bucket that cannot be reached (Redis down) lets the call through and says so in
the log: upstream's own 429 is the backstop, and the limiter must not take the service down.

The key is an HMAC-SHA256 of the credential (keyed by ``SECRET_KEY``), never the credential;
metrics are labelled with the org id.

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
Orgs that share a credential share its bucket (SPEC §11.1: one credential, one bucket, at the
credential's limits). A refused step joins its own org's queue (`queues`, one horizon per org):
its place is the later of its org's next place and the next free permit, and each org's next
place moves on by the average step's permits times the number of orgs waiting. So a refused
step of an org with nothing waiting gets the next free permit, not the end of another org's
backlog, and while several orgs wait their places interleave (round-robin). Places are kept
only while in the future: an org whose steps were all served is waiting no more.

The broker's FIFO queue could still hold a second org back: a thousand-brand onboarding
publishes a thousand messages on commit. They drain fast because a step refused for quota
leaves its worker slot in milliseconds (a claim, one bucket call, a release) and at most
``SEMRUSH_RATE_LIMIT_STEP_QUEUE`` steps per credential sleep in slots waiting for a permit: the
other slots keep taking messages. A released step comes back by a countdown message at its
place; the dispatcher (:func:`jobs.services.jobs_dispatch_due`, the backstop for lost messages)
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
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
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
    UPSTREAM_SLOT_REFUSALS,
    org_label,
)
from provisioning import slots as slots_module
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
    """Where buckets live. `reserve` and `pause` are atomic across every process sharing it.
    `first`: the caller's first permit (a step starting), which the queue's spacing counts;
    `org`: whose queue a refused caller joins; `idle_wait`: the patience of a caller whose org
    has nothing waiting in the queue (when longer than `max_wait`; "Fairness")."""

    def reserve(
        self,
        key: str,
        *,
        rate: float,
        burst: int,
        max_wait: float,
        first: bool = False,
        org: str = "",
        idle_wait: float = 0.0,
    ) -> Reservation: ...

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None: ...

    def pause_remaining(self, key: str) -> float:
        """Seconds until the credential's current pause ends (0 or less: none)."""
        ...


@dataclass(frozen=True)
class BucketState:
    """`tat`: when the next permit is due plus the burst tolerance (epoch seconds; None: never
    used); `queue`: the next place for a refused caller; `grants` / `starts`: permits granted and
    how many of them were a caller's first, decayed, so `grants / starts` is the permits an
    average caller (a step) takes: the spacing of the queue's places; `pause_end`: when the
    last 429's pause ends; `slow` (a fraction, set at `slow_at`, decaying): how much slower than
    its rate the bucket paces after recent 429s; `queues`: each waiting org's next place (its
    own queue; `queue` is then only the floor a pause sets)."""

    tat: float | None = None
    queue: float = 0.0
    grants: float = 0.0
    starts: float = 0.0
    pause_end: float = 0.0
    slow: float = 0.0
    slow_at: float = 0.0
    queues: Mapping[str, float] = field(default_factory=dict)


# The counts behind the permits-per-caller estimate are halved past this many starts (a moving
# average over the last few hundred steps), and trusted from this many on.
_DECAY_AT = 400.0
_TRUSTED_FROM = 20.0
# After a 429 the bucket paces SLOW_STEP slower (at most one step per second, up to SLOW_MAX),
# which fades by SLOW_DECAY per second: see the module docstring.
SLOW_STEP = 0.05
SLOW_MAX = 0.3
SLOW_DECAY = 0.005


def _slowdown(state: BucketState, now: float) -> float:
    return max(state.slow - SLOW_DECAY * (now - state.slow_at), 0.0)


def _gcra(
    state: BucketState,
    *,
    now: float,
    rate: float,
    burst: int,
    max_wait: float,
    first: bool,
    org: str = "",
    idle_wait: float = 0.0,
) -> tuple[Reservation, BucketState]:
    """The bucket's arithmetic (module docstring): the answer and the new state. The Lua script
    of :class:`RedisBuckets` is this, line for line."""
    if state.queues.get(org, 0.0) <= now:
        max_wait = max(max_wait, idle_wait)  # nothing of this org waits: see "Fairness"
    tolerance = burst / rate
    interval = (1.0 / rate) * (1.0 + _slowdown(state, now))
    start = max(state.tat if state.tat is not None else now, now)
    permit_at = start + interval - tolerance
    wait = max(permit_at - now, 0.0)
    if wait <= max_wait:
        grants, starts = state.grants + 1, state.starts + (1 if first else 0)
        if starts > _DECAY_AT:
            grants, starts = grants / 2, starts / 2
        return Reservation(True, wait), replace(
            state, tat=start + interval, grants=grants, starts=starts
        )
    per_caller = max(state.grants / state.starts, 1.0) if state.starts >= _TRUSTED_FROM else 1.0
    # Round-robin across the orgs waiting (module docstring, "Fairness"): each org has its own
    # queue; its places are spaced by the pace times the number of orgs waiting.
    queues = {o: place for o, place in state.queues.items() if place > now}
    waiting = len(queues) + (0 if org in queues else 1)
    place = max(queues.get(org, 0.0), state.queue, permit_at)
    queues[org] = place + interval * per_caller * waiting
    return Reservation(False, place - now), replace(state, queues=queues)


def _paused(
    state: BucketState, *, now: float, rate: float, burst: int, seconds: float
) -> BucketState:
    """The state after a pause of `seconds`: the next permit is due when it ends, and the
    bucket paces a step slower for a while (once per second however many 429s come at once)."""
    interval = 1.0 / rate
    pause_end = now + seconds
    stepped = replace(
        state,
        tat=max(state.tat if state.tat is not None else now, pause_end + (burst - 1) * interval),
        queue=max(state.queue, pause_end),
        pause_end=max(state.pause_end, pause_end),
    )
    if now - state.slow_at < 1.0:
        return stepped  # this second's 429s have slowed it already
    return replace(stepped, slow=min(_slowdown(state, now) + SLOW_STEP, SLOW_MAX), slow_at=now)


class MemoryBuckets:
    """Buckets in this process (the embedded default: one process calls Semrush)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._state: dict[str, BucketState] = {}

    def reserve(
        self,
        key: str,
        *,
        rate: float,
        burst: int,
        max_wait: float,
        first: bool = False,
        org: str = "",
        idle_wait: float = 0.0,
    ) -> Reservation:
        with self._lock:
            answer, self._state[key] = _gcra(
                self._state.get(key, BucketState()),
                now=self._clock(),
                rate=rate,
                burst=burst,
                max_wait=max_wait,
                first=first,
                org=org,
                idle_wait=idle_wait,
            )
            return answer

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None:
        with self._lock:
            self._state[key] = _paused(
                self._state.get(key, BucketState()),
                now=self._clock(),
                rate=rate,
                burst=burst,
                seconds=seconds,
            )

    def pause_remaining(self, key: str) -> float:
        with self._lock:
            return self._state.get(key, BucketState()).pause_end - self._clock()


class DatabaseBuckets:
    """Buckets as rows of :class:`UpstreamBucket` (PostgreSQL without a Redis broker).

    Each reservation is one short transaction: the row is locked (``select_for_update``,
    created on first use), computed on, and written back; no transaction spans an upstream
    call. The clock is this host's (hosts of one deployment keep NTP time)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock

    def _locked(self, key: str) -> BucketState:
        row, _ = UpstreamBucket.objects.select_for_update().get_or_create(key=key)
        return BucketState(
            row.tat,
            row.queue or 0.0,
            row.grants,
            row.starts,
            row.pause_end,
            row.slow,
            row.slow_at,
            row.queues or {},
        )

    def _write(self, key: str, state: BucketState) -> None:
        UpstreamBucket.objects.filter(pk=key).update(
            tat=state.tat,
            queue=state.queue,
            grants=state.grants,
            starts=state.starts,
            pause_end=state.pause_end,
            slow=state.slow,
            slow_at=state.slow_at,
            queues=dict(state.queues),
        )

    def pause_remaining(self, key: str) -> float:
        pause_end = (
            UpstreamBucket.objects.filter(pk=key).values_list("pause_end", flat=True).first()
        )
        return (pause_end or 0.0) - self._clock()

    def reserve(
        self,
        key: str,
        *,
        rate: float,
        burst: int,
        max_wait: float,
        first: bool = False,
        org: str = "",
        idle_wait: float = 0.0,
    ) -> Reservation:
        with transaction.atomic():
            answer, state = _gcra(
                self._locked(key),
                now=self._clock(),
                rate=rate,
                burst=burst,
                max_wait=max_wait,
                first=first,
                org=org,
                idle_wait=idle_wait,
            )
            self._write(key, state)
        return answer

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None:
        with transaction.atomic():
            state = _paused(
                self._locked(key), now=self._clock(), rate=rate, burst=burst, seconds=seconds
            )
            self._write(key, state)


# KEYS[1]: the bucket (a hash {tat, queue, grants, starts, pause, slow, slow_at, and q:<org>
# per waiting org}). ARGV: interval, tolerance, max_wait (reserve) or seconds (pause), mode
# ("reserve" | "pause"), idle TTL, first ("1"), decay threshold, trusted-from, the slow-down
# step, maximum and decay, the org, the patience of an org with nothing waiting. Floats travel
# as strings: a Lua number returned to Redis would be truncated to an integer.
_BUCKET_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local amount = tonumber(ARGV[3])
local ttl = tonumber(ARGV[5])
local decay_at = tonumber(ARGV[7])
local trusted_from = tonumber(ARGV[8])
local slow_step = tonumber(ARGV[9])
local slow_max = tonumber(ARGV[10])
local slow_decay = tonumber(ARGV[11])
local state = redis.call('HMGET', KEYS[1], 'tat', 'queue', 'grants', 'starts', 'pause',
  'slow', 'slow_at')
local tat = tonumber(state[1] or '')
local queue = tonumber(state[2] or '') or 0
local grants = tonumber(state[3] or '') or 0
local starts = tonumber(state[4] or '') or 0
local paused = tonumber(state[5] or '') or 0
local slow_set = tonumber(state[6] or '') or 0
local slow_at = tonumber(state[7] or '') or 0
local slow = math.max(slow_set - slow_decay * (now - slow_at), 0)
if tat == nil or tat < now then tat = now end
local granted = 0
local wait = 0
local horizon_queue = 0
if ARGV[4] == 'pause' then
  local pause_end = now + amount
  tat = math.max(tat, pause_end + tolerance - interval)
  queue = math.max(queue, pause_end)
  paused = math.max(paused, pause_end)
  if now - slow_at >= 1 then
    slow = math.min(slow + slow_step, slow_max)
    slow_at = now
  else
    slow = math.max(slow, slow_set)
  end
  slow_set = slow
else
  interval = interval * (1 + slow)
  local permit_at = tat + interval - tolerance
  wait = math.max(permit_at - now, 0)
  local org_field = 'q:' .. ARGV[12]
  local own = 0
  local queued_at = tonumber(redis.call('HGET', KEYS[1], org_field) or '') or 0
  if queued_at <= now then amount = math.max(amount, tonumber(ARGV[13])) end
  if wait <= amount then
    granted = 1
    tat = tat + interval
    grants = grants + 1
    if ARGV[6] == '1' then starts = starts + 1 end
    if starts > decay_at then
      grants = grants / 2
      starts = starts / 2
    end
  else
    local per_caller = 1
    if starts >= trusted_from then per_caller = math.max(grants / starts, 1) end
    local waiting = 0
    local fields = redis.call('HGETALL', KEYS[1])
    for i = 1, #fields, 2 do
      local name = fields[i]
      if string.sub(name, 1, 2) == 'q:' then
        local at = tonumber(fields[i + 1]) or 0
        if at > now then
          waiting = waiting + 1
          if name == org_field then own = at end
        else
          redis.call('HDEL', KEYS[1], name)
        end
      end
    end
    if own == 0 then waiting = waiting + 1 end
    local place = math.max(own, queue, permit_at)
    wait = place - now
    horizon_queue = place + interval * per_caller * waiting
    redis.call('HSET', KEYS[1], org_field, tostring(horizon_queue))
  end
end
redis.call('HSET', KEYS[1], 'tat', tostring(tat), 'queue', tostring(queue),
  'grants', tostring(grants), 'starts', tostring(starts), 'pause', tostring(paused),
  'slow', tostring(slow_set), 'slow_at', tostring(slow_at))
local horizon = math.max(tat, queue, horizon_queue) - now + ttl
redis.call('PEXPIRE', KEYS[1], math.ceil(horizon * 1000))
return {granted, tostring(wait)}
"""

# Seconds until the pause of KEYS[1] ends, on Redis' clock.
_PAUSE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local pause_end = tonumber(redis.call('HGET', KEYS[1], 'pause') or '') or 0
return tostring(pause_end - now)
"""


class RedisBuckets:
    """Buckets in Redis (the broker's server by default): one atomic script call per permit."""

    def __init__(self, url: str) -> None:
        timeout = max(float(settings.JOBS_PUBLISH_TIMEOUT_SECONDS), 0.1)
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._script = self.client.register_script(_BUCKET_SCRIPT)
        self._pause_script = self.client.register_script(_PAUSE_SCRIPT)
        self._down_until = 0.0

    def _call(
        self,
        key: str,
        *,
        rate: float,
        burst: int,
        amount: float,
        mode: str,
        first: bool,
        org: str = "",
        idle_wait: float = 0.0,
    ) -> Reservation:
        if time.monotonic() < self._down_until:
            return Reservation(True, 0.0)
        interval = 1.0 / rate
        args = [
            repr(interval),
            repr(burst * interval),
            repr(amount),
            mode,
            repr(IDLE_TTL_SECONDS),
            "1" if first else "0",
            repr(_DECAY_AT),
            repr(_TRUSTED_FROM),
            repr(SLOW_STEP),
            repr(SLOW_MAX),
            repr(SLOW_DECAY),
            org,
            repr(idle_wait),
        ]
        try:
            granted, wait = self._script(keys=[key], args=args)
        except redis.RedisError:
            # Fail open: without its bucket the service still works, and upstream's 429 (with
            # the client's retries) is the backstop.
            logger.warning("upstream quota: Redis unreachable; calls go unmetered for now")
            self._down_until = time.monotonic() + REDIS_RETRY_AFTER_SECONDS
            return Reservation(True, 0.0)
        return Reservation(bool(int(granted)), float(wait))

    def reserve(
        self,
        key: str,
        *,
        rate: float,
        burst: int,
        max_wait: float,
        first: bool = False,
        org: str = "",
        idle_wait: float = 0.0,
    ) -> Reservation:
        return self._call(
            key,
            rate=rate,
            burst=burst,
            amount=max_wait,
            mode="reserve",
            first=first,
            org=org,
            idle_wait=idle_wait,
        )

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None:
        self._call(key, rate=rate, burst=burst, amount=seconds, mode="pause", first=False)

    def pause_remaining(self, key: str) -> float:
        if time.monotonic() < self._down_until:
            return 0.0
        try:
            return float(self._pause_script(keys=[key]))
        except redis.RedisError:
            return 0.0


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
