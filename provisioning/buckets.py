"""Upstream permit buckets (SPEC §10.6, §11.1): one per Semrush credential, shared by every
process. :mod:`provisioning.quota` asks them for permits, with the patience of its caller; this
module is the arithmetic and where the state lives.

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
without one pauses it for ``provisioning.quota.DEFAULT_PAUSE_SECONDS`` (1 s).

The bucket paces ``SEMRUSH_RATE_LIMIT_MARGIN`` (5 %) below the configured rate: an upstream
that enforces R requests per second over a sliding second answers 429 to a client pacing at
exactly R as soon as network or scheduling jitter makes one request arrive later than the one
R permits after it (measured: a 429 every two seconds at exactly 50/s, each pausing the
credential for its ``Retry-After``). When the jitter is larger than that margin (a loaded host),
429s still come; each one also makes the bucket pace ``SLOW_STEP`` (5 %) slower, at most once
a second and up to ``SLOW_MAX``, fading by ``SLOW_DECAY`` a second: a few percent of rate is
cheaper than a one-second pause (measured: 66 429s in a 1000-chain run on a host at load 25).

Where the bucket lives (:func:`provisioning.quota.stores`): Redis when the broker is Redis
(:mod:`provisioning.redis_buckets`: an atomic Lua script through redis-py's
``register_script``; the clock is Redis' ``TIME`` so every host agrees), PostgreSQL otherwise
(one :class:`~provisioning.models.UpstreamBucket` row per credential, locked with
``select_for_update`` for the few microseconds of the computation), in-process for the embedded
default (SQLite and a filesystem broker, a development setup: there each process, the dev
server and each worker pool process, paces on its own). ``SEMRUSH_RATE_LIMIT_BACKEND`` forces
one. A bucket that cannot be reached (Redis down) lets the call through and says so in the log:
upstream's own 429 is the backstop, and the limiter must not take the service down.

The key is an HMAC-SHA256 of the credential (keyed by ``SECRET_KEY``), never the credential;
metrics are labelled with the org id.

Fairness
--------
Orgs that share a credential share its bucket (SPEC §11.1: one credential, one bucket, at the
credential's limits). A refused step joins its own org's queue (`queues`, one horizon per org):
its place is the later of its org's next place and the next free permit, and each org's next
place moves on by the average step's permits times the number of orgs waiting. So a refused
step of an org with nothing waiting gets the next free permit, not the end of another org's
backlog, and while several orgs wait their places interleave (round-robin). Places are kept
only while in the future: an org whose steps were all served is waiting no more.

Places alone do not make a small org fast: every call waits for the permits reserved ahead of
it, and a backlogged org keeps ``SEMRUSH_RATE_LIMIT_STEP_QUEUE`` of them reserved, so each of
another org's calls waited about that long (measured: a second org's single create took 8.2 s
behind a 300-brand burst on its credential, against S + 2 s). So the queue's depth binds only
the orgs that have a backlog: a step of an org with nothing waiting may wait its whole step
patience (``SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS``) for its first permit instead of being
refused, and once it is granted its org's *lane* is open for ``LANE_SECONDS``: meanwhile the
steps of the other, backlogged orgs are held to one permit of depth, so that the small org's
next calls wait behind about one permit rather than the whole horizon. The backlogged orgs
lose nothing but the order: their refused steps keep their places, and the bucket's rate is
the same.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from django.db import transaction

from provisioning.models import UpstreamBucket

logger = logging.getLogger("serenity.quota")

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
    own queue; `queue` is then only the floor a pause sets); `lane_org` / `lane`: the last org
    granted a permit with nothing of it waiting, and until when its lane is open ("Fairness")."""

    tat: float | None = None
    queue: float = 0.0
    grants: float = 0.0
    starts: float = 0.0
    pause_end: float = 0.0
    slow: float = 0.0
    slow_at: float = 0.0
    queues: Mapping[str, float] = field(default_factory=dict)
    lane: float = 0.0
    lane_org: str = ""


# The counts behind the permits-per-caller estimate are halved past this many starts (a moving
# average over the last few hundred steps), and trusted from this many on.
DECAY_AT = 400.0
TRUSTED_FROM = 20.0
# After a 429 the bucket paces SLOW_STEP slower (at most one step per second, up to SLOW_MAX),
# which fades by SLOW_DECAY per second: see the module docstring.
SLOW_STEP = 0.05
SLOW_MAX = 0.3
SLOW_DECAY = 0.005
# An org granted a permit with nothing of it waiting keeps a lane open this long: meanwhile the
# orgs with a backlog are held to one permit of depth ("Fairness").
LANE_SECONDS = 1.0


def _slowdown(state: BucketState, now: float) -> float:
    return max(state.slow - SLOW_DECAY * (now - state.slow_at), 0.0)


def gcra(
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
    of :class:`provisioning.redis_buckets.RedisBuckets` is this, line for line."""
    tolerance = burst / rate
    interval = (1.0 / rate) * (1.0 + _slowdown(state, now))
    idle = state.queues.get(org, 0.0) <= now  # nothing of this org waits: see "Fairness"
    if idle:
        max_wait = max(max_wait, idle_wait)
    elif idle_wait > 0 and state.lane > now and state.lane_org != org:
        max_wait = min(max_wait, interval)  # another org's lane is open: see "Fairness"
    start = max(state.tat if state.tat is not None else now, now)
    permit_at = start + interval - tolerance
    wait = max(permit_at - now, 0.0)
    if wait <= max_wait:
        grants, starts = state.grants + 1, state.starts + (1 if first else 0)
        if starts > DECAY_AT:
            grants, starts = grants / 2, starts / 2
        lane, lane_org = (now + LANE_SECONDS, org) if idle else (state.lane, state.lane_org)
        return Reservation(True, wait), replace(
            state,
            tat=start + interval,
            grants=grants,
            starts=starts,
            lane=lane,
            lane_org=lane_org,
        )
    per_caller = max(state.grants / state.starts, 1.0) if state.starts >= TRUSTED_FROM else 1.0
    # Round-robin across the orgs waiting (module docstring, "Fairness"): each org has its own
    # queue; its places are spaced by the pace times the number of orgs waiting.
    queues = {o: place for o, place in state.queues.items() if place > now}
    waiting = len(queues) + (0 if org in queues else 1)
    place = max(queues.get(org, 0.0), state.queue, permit_at)
    queues[org] = place + interval * per_caller * waiting
    return Reservation(False, place - now), replace(state, queues=queues)


def paused(
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
            answer, self._state[key] = gcra(
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
            self._state[key] = paused(
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
            row.lane,
            row.lane_org,
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
            lane=state.lane,
            lane_org=state.lane_org,
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
            answer, state = gcra(
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
            state = paused(
                self._locked(key), now=self._clock(), rate=rate, burst=burst, seconds=seconds
            )
            self._write(key, state)
