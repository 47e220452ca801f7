"""The upstream limiter (SPEC §10.6, §11.1, §12.3): per Semrush credential, a token bucket for
the rate and a set of slots for the calls in flight, shared by every process that uses the
same store. :mod:`provisioning.quota` asks it for permits and slots with its caller's patience;
this module is the arithmetic (written once, in Python) and the two stores it runs on.

The bucket: GCRA with reservations
----------------------------------
A bucket's rate state is ``tat`` (the "theoretical arrival time" of the next permit, epoch
seconds), for rate ``r`` (interval ``T = 1/r``) and burst ``b`` (tolerance ``τ = b·T``). A caller
asks for a permit with a patience ``w``: its permit is due at ``max(tat, now) + T - τ``; if that is
at most ``w`` away the permit is *reserved* (``tat`` advances by ``T``) and the caller sleeps
until it is due, else nothing is reserved and the caller learns how long it would have waited.
Callers with little patience never push the horizon beyond what they accepted.

A refused caller gets a place in its org's queue (``queues``, one horizon per org): its "retry
in" is its place, so refused steps come back spaced at the bucket's pace instead of all at
once. Each org's places are spaced by ``T`` times the number of orgs waiting: while several
orgs wait their places interleave (round-robin), and a refused step of an org with nothing
waiting gets the next free permit, not the end of another org's backlog; and while an org's
queue is short (it ends within ``SHORT_QUEUE_SECONDS``, before the caller's own), other orgs'
first permits wait for it, so that its step, back at its place, finds the permit free instead
of a bucket kept full by a backlog's steps coming back. One interval per
place, not the permits a caller will take: a caller that comes back before its turn is
refused again in milliseconds and takes a later place, while places spaced for more permits
than the callers then take leave the credential idle (and an idle bucket's burst meets
upstream's 429s).

A 429 pauses the credential: ``tat`` moves to the end of the pause for every process, and the
bucket paces ``SLOW_STEP`` slower for a while (at most once a second, up to ``SLOW_MAX``, fading
by ``SLOW_DECAY`` a second): a few percent of rate is cheaper than a one-second pause.

Slots (SPEC §11.1): ``slots`` maps each call in flight to its expiry (the client's timeout + 5 s),
so a process killed in the middle of a call leaks nothing.

Stores
------
A store does one thing: apply a change to a credential's state atomically, on its own clock
(:meth:`Store.apply`). :class:`RedisStore` (production: the broker's Redis, every process and
host shares it; the state is one JSON value changed under ``WATCH``/``MULTI``, the clock is
Redis' ``TIME``) and :class:`MemoryStore` (the embedded default, SQLite and a filesystem broker:
each process paces on its own). A Redis that cannot be reached lets calls through and says so
in the log: upstream's own 429 is the backstop, and the limiter must not take the service down.

The key is an HMAC-SHA256 of the credential (:func:`provisioning.quota.credential_key`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TypeVar, cast

import redis

logger = logging.getLogger("serenity.quota")

T = TypeVar("T")

# A credential's state outlives its last permit, place or slot by this much (Redis key TTL).
IDLE_TTL_SECONDS = 60.0
# After Redis failed, the limiter lets calls through without asking it for this long.
REDIS_RETRY_AFTER_SECONDS = 5.0
# After a 429 the bucket paces SLOW_STEP slower (see the module docstring).
SLOW_STEP = 0.05
SLOW_MAX = 0.3
SLOW_DECAY = 0.005
# A queue that ends within this is short: other orgs' first permits wait for it (docstring).
SHORT_QUEUE_SECONDS = 1.0


@dataclass(frozen=True)
class Reservation:
    """A bucket's answer: `granted` (the permit is reserved, due in `wait` seconds) or not (the
    caller's place in its org's queue is `wait` seconds away)."""

    granted: bool
    wait: float


@dataclass(frozen=True)
class State:
    """One credential's state (module docstring); `queue`: the floor a pause sets for every
    place."""

    tat: float | None = None
    queue: float = 0.0
    pause_end: float = 0.0
    slow: float = 0.0
    slow_at: float = 0.0
    queues: dict[str, float] = field(default_factory=dict)
    slots: dict[str, float] = field(default_factory=dict)

    def expires(self, now: float) -> float:
        """When nothing in this state matters any more."""
        return max(
            [
                self.tat or now,
                self.queue,
                self.pause_end,
                now,
                *self.queues.values(),
                *self.slots.values(),
            ]
        )


# --- the arithmetic ---------------------------------------------------------------------------


def _slowdown(state: State, now: float) -> float:
    return max(state.slow - SLOW_DECAY * (now - state.slow_at), 0.0)


def reserve(
    state: State,
    now: float,
    *,
    rate: float,
    burst: int,
    max_wait: float,
    org: str = "",
    first: bool = False,
) -> tuple[Reservation, State]:
    """A permit reserved within `max_wait`, or the caller's place in its org's queue. A
    caller's `first` permit also waits while another org's short queue ends before its own
    (module docstring)."""
    tolerance = burst / rate
    interval = (1.0 / rate) * (1.0 + _slowdown(state, now))
    start = max(state.tat if state.tat is not None else now, now)
    permit_at = start + interval - tolerance
    wait = max(permit_at - now, 0.0)
    queues = {o: place for o, place in state.queues.items() if place > now}
    if wait <= max_wait and not (first and _behind_a_short_queue(queues, org, now)):
        return Reservation(True, wait), replace(state, tat=start + interval)
    waiting = len(queues) + (0 if org in queues else 1)
    place = max(queues.get(org, 0.0), state.queue, permit_at)
    queues[org] = place + interval * waiting
    return Reservation(False, place - now), replace(state, queues=queues)


def _behind_a_short_queue(queues: dict[str, float], org: str, now: float) -> bool:
    """Whether another org's queue ends within `SHORT_QUEUE_SECONDS` and before `org`'s."""
    own = queues.get(org, math.inf)
    return any(
        other != org and end <= now + SHORT_QUEUE_SECONDS and end < own
        for other, end in queues.items()
    )


def paused(state: State, now: float, *, rate: float, burst: int, seconds: float) -> State:
    """The state after a 429: the next permit is due when the pause ends, and the bucket paces
    a step slower for a while (once per second however many 429s come at once)."""
    interval = 1.0 / rate
    pause_end = now + seconds
    stepped = replace(
        state,
        tat=max(state.tat if state.tat is not None else now, pause_end + (burst - 1) * interval),
        queue=max(state.queue, pause_end),
        pause_end=max(state.pause_end, pause_end),
    )
    if now - state.slow_at < 1.0:
        return stepped
    return replace(stepped, slow=min(_slowdown(state, now) + SLOW_STEP, SLOW_MAX), slow_at=now)


def slot_taken(
    state: State, now: float, *, slot: str, limit: int, ttl: float
) -> tuple[bool, State]:
    """`slot` held until `now + ttl` if fewer than `limit` unexpired slots are held."""
    live = {held: until for held, until in state.slots.items() if until > now}
    if len(live) >= limit:
        return False, replace(state, slots=live)
    return True, replace(state, slots={**live, slot: now + ttl})


def slot_given_back(state: State, slot: str) -> State:
    return replace(state, slots={k: v for k, v in state.slots.items() if k != slot})


# --- the stores -------------------------------------------------------------------------------


class Store:
    """Where credentials' states live; every operation is one atomic :meth:`apply`."""

    def apply(self, key: str, change: Callable[[State, float], tuple[T, State]], fallback: T) -> T:
        """Apply `change(state, now)` atomically; its first value is the answer. `fallback` is
        the answer when the store cannot be reached (the call goes through)."""
        raise NotImplementedError

    def reserve(
        self,
        key: str,
        *,
        rate: float,
        burst: int,
        max_wait: float,
        org: str = "",
        first: bool = False,
    ) -> Reservation:
        return self.apply(
            key,
            lambda state, now: reserve(
                state, now, rate=rate, burst=burst, max_wait=max_wait, org=org, first=first
            ),
            Reservation(True, 0.0),
        )

    def pause(self, key: str, *, rate: float, burst: int, seconds: float) -> None:
        self.apply(
            key,
            lambda state, now: (
                None,
                paused(state, now, rate=rate, burst=burst, seconds=seconds),
            ),
            None,
        )

    def pause_remaining(self, key: str) -> float:
        """Seconds until the credential's current pause ends (0 or less: none)."""
        return self.apply(key, lambda state, now: (state.pause_end - now, state), 0.0)

    def take(self, key: str, *, limit: int, ttl: float) -> str | None:
        """A new slot's id, or None when `limit` unexpired slots are held already."""
        slot = uuid.uuid4().hex

        def change(state: State, now: float) -> tuple[str | None, State]:
            taken, state = slot_taken(state, now, slot=slot, limit=limit, ttl=ttl)
            return (slot if taken else None), state

        fallback: str | None = slot
        return self.apply(key, change, fallback)

    def give_back(self, key: str, slot: str) -> None:
        self.apply(key, lambda state, now: (None, slot_given_back(state, slot)), None)

    def held(self, key: str) -> int:
        """Unexpired slots held now."""
        return self.apply(
            key, lambda state, now: (sum(1 for t in state.slots.values() if t > now), state), 0
        )


class MemoryStore(Store):
    """States in this process (the embedded default)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._states: dict[str, State] = {}

    def apply(self, key: str, change: Callable[[State, float], tuple[T, State]], fallback: T) -> T:
        with self._lock:
            answer, self._states[key] = change(self._states.get(key, State()), self._clock())
            return answer


class RedisStore(Store):
    """States in Redis: one JSON value per credential, changed under ``WATCH``/``MULTI``
    (redis-py's ``Redis.transaction`` retries when another process changed it meanwhile), on
    Redis' clock so that every host agrees (`clock` replaces it in tests)."""

    def __init__(
        self, url: str, *, timeout: float, clock: Callable[[], float] | None = None
    ) -> None:
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._clock = clock
        self._down_until = 0.0

    def apply(self, key: str, change: Callable[[State, float], tuple[T, State]], fallback: T) -> T:
        if time.monotonic() < self._down_until:
            return fallback

        def attempt(pipe: redis.client.Pipeline) -> T:
            raw = pipe.get(key)
            now = self._clock() if self._clock else _seconds(pipe.time())
            before = _decoded(raw)
            answer, after = change(before, now)
            if after != before:
                pipe.multi()
                ttl_ms = math.ceil((after.expires(now) - now + IDLE_TTL_SECONDS) * 1000)
                pipe.set(key, json.dumps(asdict(after)), px=ttl_ms)
            return answer

        try:
            # With value_from_callable, redis-py returns what `attempt` returned.
            answer = self.client.transaction(
                attempt,  # type: ignore[arg-type]
                key,
                value_from_callable=True,
            )
            return cast(T, answer)
        except redis.RedisError:
            logger.warning("upstream limiter: Redis unreachable; calls go unmetered for now")
            self._down_until = time.monotonic() + REDIS_RETRY_AFTER_SECONDS
            return fallback


def _seconds(server_time: tuple[int, int]) -> float:
    return server_time[0] + server_time[1] / 1_000_000


def _decoded(raw: bytes | str | None) -> State:
    if raw is None:
        return State()
    # A field a newer or older release wrote and this one does not know is dropped.
    return State(**{k: v for k, v in json.loads(raw).items() if k in _STATE_FIELDS})


_STATE_FIELDS = frozenset(f.name for f in fields(State))
