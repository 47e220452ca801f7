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

A 429 with ``Retry-After`` pauses the credential: ``tat`` moves to the end of the pause for every
process.

The adaptive rate (SPEC §13.3): Semrush's quota is shared with every other client of the account
and says nothing, so the rate the bucket paces at is learnt, AIMD-style (as AWS's SDKs learn a
throttling server's rate). It starts at the configured rate (the ceiling); a 429 *without*
``Retry-After`` multiplies it by ``Adaptation.decrease`` (at most once a second, however many
429s arrive at once, never below ``Adaptation.floor``) and drains the burst (the next permit is
one new interval away); every ``Adaptation.spell`` seconds without a 429 adds ``Adaptation.step``
permits/s, up to the ceiling. The state keeps the rate of the last 429 (``rate``) and when
(``rate_at``): the current rate is computed from them on the store's clock
(:func:`current_rate`), so raising it costs no write.

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
# An adapted rate outlives the credential's idle TTL by this much: an idle spell is no proof
# that upstream's share came back (it is raised as time passes anyway: `current_rate`).
ADAPTED_TTL_SECONDS = 3600.0
# A queue that ends within this is short: other orgs' first permits wait for it (docstring).
SHORT_QUEUE_SECONDS = 1.0


@dataclass(frozen=True)
class Reservation:
    """A bucket's answer: `granted` (the permit is reserved, due in `wait` seconds) or not (the
    caller's place in its org's queue is `wait` seconds away)."""

    granted: bool
    wait: float


@dataclass(frozen=True)
class Adaptation:
    """The adaptive rate's rules (module docstring; settings `SEMRUSH_RATE_DECREASE_FACTOR`,
    `SEMRUSH_RATE_INCREASE_STEP`, `SEMRUSH_RATE_INCREASE_SPELL_SECONDS`)."""

    decrease: float = 0.85
    step: float = 0.1
    spell: float = 2.0
    floor: float = 0.5


DEFAULT_ADAPTATION = Adaptation()


@dataclass(frozen=True)
class State:
    """One credential's state (module docstring); `queue`: the floor a pause sets for every
    place; `rate` (0: not adapted, the ceiling) as of `rate_at`, last lowered at `lowered_at`."""

    tat: float | None = None
    queue: float = 0.0
    pause_end: float = 0.0
    rate: float = 0.0
    rate_at: float = 0.0
    lowered_at: float = 0.0
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
                self.rate_at + ADAPTED_TTL_SECONDS if self.rate > 0 else now,
                *self.queues.values(),
                *self.slots.values(),
            ]
        )


# --- the arithmetic ---------------------------------------------------------------------------


def current_rate(
    state: State, now: float, *, ceiling: float, adapt: Adaptation = DEFAULT_ADAPTATION
) -> float:
    """The rate the credential is paced at now: the adapted rate raised by one step per quiet
    spell since the last 429, at most `ceiling` (module docstring)."""
    if state.rate <= 0:
        return ceiling
    spells = math.floor(max(now - state.rate_at, 0.0) / adapt.spell) if adapt.spell > 0 else 0
    return min(ceiling, state.rate + adapt.step * spells)


def reserve(
    state: State,
    now: float,
    *,
    rate: float,
    burst: int,
    max_wait: float,
    org: str = "",
    first: bool = False,
    adapt: Adaptation = DEFAULT_ADAPTATION,
) -> tuple[Reservation, State]:
    """A permit reserved within `max_wait`, or the caller's place in its org's queue, at the
    credential's adapted rate (`rate` is the ceiling). A caller's `first` permit also waits
    while another org's short queue ends before its own (module docstring)."""
    interval = 1.0 / current_rate(state, now, ceiling=rate, adapt=adapt)
    tolerance = burst * interval
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


def paused(
    state: State,
    now: float,
    *,
    rate: float,
    burst: int,
    seconds: float | None,
    adapt: Adaptation = DEFAULT_ADAPTATION,
) -> State:
    """The state after a 429 (`rate` is the ceiling). With a Retry-After (`seconds`) the next
    permit is due when it ends; without one (None) the rate is lowered (at most once a
    second) and the next permit is one new interval away. Either way the quiet spell that
    raises the rate starts again, and no burst follows."""
    current = current_rate(state, now, ceiling=rate, adapt=adapt)
    lowered_at = state.lowered_at
    if seconds is None:
        if now - state.lowered_at >= 1.0:
            current = max(current * adapt.decrease, min(adapt.floor, rate))
            lowered_at = now
        seconds = 1.0 / current
    interval = 1.0 / current
    pause_end = now + seconds
    return replace(
        state,
        tat=max(state.tat if state.tat is not None else now, pause_end + (burst - 1) * interval),
        queue=max(state.queue, pause_end),
        pause_end=max(state.pause_end, pause_end),
        rate=current if current < rate else 0.0,
        rate_at=now,
        lowered_at=lowered_at,
    )


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
        adapt: Adaptation = DEFAULT_ADAPTATION,
    ) -> Reservation:
        return self.apply(
            key,
            lambda state, now: reserve(
                state,
                now,
                rate=rate,
                burst=burst,
                max_wait=max_wait,
                org=org,
                first=first,
                adapt=adapt,
            ),
            Reservation(True, 0.0),
        )

    def pause(
        self,
        key: str,
        *,
        rate: float,
        burst: int,
        seconds: float | None,
        adapt: Adaptation = DEFAULT_ADAPTATION,
    ) -> None:
        """A 429: with its Retry-After (`seconds`), or without one (None: the rate is lowered)."""
        self.apply(
            key,
            lambda state, now: (
                None,
                paused(state, now, rate=rate, burst=burst, seconds=seconds, adapt=adapt),
            ),
            None,
        )

    def rate(self, key: str, *, ceiling: float, adapt: Adaptation = DEFAULT_ADAPTATION) -> float:
        """The credential's current (adapted) rate; `ceiling` when the store cannot be read."""
        return self.apply(
            key,
            lambda state, now: (current_rate(state, now, ceiling=ceiling, adapt=adapt), state),
            ceiling,
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
