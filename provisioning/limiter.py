"""The upstream limiter (SPEC §10.6, §11.1, §12.3): per Semrush credential, a token bucket for
the rate and a set of slots for the calls in flight, shared by every process that uses the
same store. :mod:`provisioning.quota` asks it for permits and slots with its caller's patience;
this module is the two stores the rules run on. The rules (the bucket, the adaptive rate, slots
and their hand-over: the arithmetic, written once, in Python) are
:mod:`provisioning.limiter_rules`.

Stores
------
A store does one thing: apply a change to a credential's state atomically, on its own clock
(:meth:`Store.apply`). :class:`RedisStore` (production: the broker's Redis, every process and
host shares it; the state is one JSON value, changed by a compare-and-set script, in one round
trip when this process wrote it last; the clock is Redis') and :class:`MemoryStore` (the
embedded default, SQLite and a filesystem broker: each process paces on its own). A Redis
that cannot be reached lets calls through and says so in the log: upstream's own 429 is the
backstop, and the limiter must not take the service down.

The key is an HMAC-SHA256 of the credential (:func:`provisioning.quota.credential_key`).
"""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from typing import Any, TypeVar

import redis

from provisioning.limiter_rules import (
    DEFAULT_ADAPTATION,
    Adaptation,
    Reservation,
    State,
    current_rate,
    paused,
    reserve,
    slot_and_permit,
    slot_given_back,
    slot_taken,
    slot_turn,
)

__all__ = ["Adaptation", "MemoryStore", "RedisStore", "Reservation", "State", "Store"]

logger = logging.getLogger("serenity.quota")

T = TypeVar("T")

# A credential's state outlives its last permit, place or slot by this much (Redis key TTL).
IDLE_TTL_SECONDS = 60.0
# After Redis failed, the limiter lets calls through without asking it for this long.
REDIS_RETRY_AFTER_SECONDS = 5.0
# A slot handed to a waiter that is gone stays in its list this long (seconds).
HANDOFF_TTL_SECONDS = 30
# A waiter for a slot blocks on Redis this long at most at once (below the socket timeout).
BLOCK_SECONDS = 0.5


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

    def take(
        self,
        key: str,
        *,
        limit: int,
        ttl: float,
        org: str = "",
        waiter: str | None = None,
        patience: float = 0.0,
    ) -> str | None:
        """A new slot's id, or None when `limit` unexpired slots are held already (`waiter`
        then waits for one for `patience` seconds: `handed`, `stop_waiting`)."""
        slot = uuid.uuid4().hex

        def change(state: State, now: float) -> tuple[str | None, State]:
            taken, state = slot_taken(
                state,
                now,
                slot=slot,
                limit=limit,
                ttl=ttl,
                org=org,
                waiter=waiter,
                patience=patience,
            )
            return (slot if taken else None), state

        fallback: str | None = slot
        return self.apply(key, change, fallback)

    def take_and_reserve(
        self,
        key: str,
        *,
        limit: int,
        ttl: float,
        org: str,
        waiter: str,
        patience: float,
        rate: float,
        burst: int,
        max_wait: float,
        first: bool,
        adapt: Adaptation = DEFAULT_ADAPTATION,
    ) -> tuple[str | None, Reservation | None]:
        """`take` and, with the slot, `reserve` in one change (`slot_and_permit`): the new
        slot's id (None: none was free, or the permit was refused) and the permit's answer
        (None: no slot was free, `waiter` waits for one)."""
        slot = uuid.uuid4().hex

        def change(state: State, now: float) -> tuple[tuple[str | None, Reservation | None], State]:
            (taken, answer), after = slot_and_permit(
                state,
                now,
                slot=slot,
                limit=limit,
                ttl=ttl,
                org=org,
                waiter=waiter,
                patience=patience,
                rate=rate,
                burst=burst,
                max_wait=max_wait,
                first=first,
                adapt=adapt,
            )
            granted = taken and answer is not None and answer.granted
            return ((slot if granted else None), answer), after

        fallback: tuple[str | None, Reservation | None] = (slot, Reservation(True, 0.0))
        return self.apply(key, change, fallback)

    def give_back(self, key: str, slot: str, *, ttl: float = 0.0) -> None:
        """`slot` is free: handed over to a waiter if one waits (`slot_given_back`)."""
        handed = uuid.uuid4().hex
        answer = self.apply(
            key,
            lambda state, now: slot_given_back(state, now, slot=slot, ttl=ttl, handed=handed),
            None,
        )
        if answer is not None:
            self._hand(key, *answer)

    def slot_turn(self, key: str, *, limit: int) -> float:
        return self.apply(key, lambda state, now: (slot_turn(state, now, limit=limit), state), 0.1)

    def stop_waiting(self, key: str, waiter: str) -> str | None:
        """`waiter` waits no more; a slot handed to it meanwhile is its (None: none was)."""

        def change(state: State, now: float) -> tuple[None, State]:
            waiters = {w: v for w, v in state.waiters.items() if w != waiter}
            return None, replace(state, waiters=waiters)

        self.apply(key, change, None)
        return self.handed(key, waiter, 0.0)

    def _hand(self, key: str, waiter: str, slot: str) -> None:
        raise NotImplementedError

    def handed(self, key: str, waiter: str, timeout: float) -> str | None:
        """The slot handed to `waiter` within `timeout` seconds (0: only one already handed)."""
        raise NotImplementedError

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
        self._handoffs: dict[tuple[str, str], queue.SimpleQueue[str]] = {}

    def apply(self, key: str, change: Callable[[State, float], tuple[T, State]], fallback: T) -> T:
        with self._lock:
            answer, self._states[key] = change(self._states.get(key, State()), self._clock())
            return answer

    def _box(self, key: str, waiter: str) -> queue.SimpleQueue[str]:
        with self._lock:
            return self._handoffs.setdefault((key, waiter), queue.SimpleQueue())

    def _hand(self, key: str, waiter: str, slot: str) -> None:
        self._box(key, waiter).put(slot)

    def handed(self, key: str, waiter: str, timeout: float) -> str | None:
        box = self._box(key, waiter)
        try:
            slot = box.get(timeout=timeout) if timeout > 0 else box.get_nowait()
        except queue.Empty:
            return None
        with self._lock:
            self._handoffs.pop((key, waiter), None)
        return slot


# Written only if the value is still the one the change was made on (`""`: none): 1. Else the
# value now (`""`: none) and the server's TIME, to make the change again on, in the same round
# trip.
COMPARE_AND_SET = """
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return {current, redis.call('TIME')} end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""
# A change is made on this process's clock (Redis' as last read, plus the time since) this long
# after Redis' clock was read: it then still agrees with Redis' to well under a millisecond.
# Later, the value is read with the clock first.
CLOCK_TRUSTED_SECONDS = 1.0


class RedisStore(Store):
    """States in Redis: one JSON value per credential, changed with :data:`COMPARE_AND_SET`
    on Redis' clock so that every host agrees (`clock` replaces it in tests).

    A change is made on the value this process last wrote for the credential, on Redis' clock
    as the process last read it plus the time since (within `CLOCK_TRUSTED_SECONDS`), and
    sent at once: one round trip when no other process wrote meanwhile. Otherwise the script
    answers the value now with the server's time, and the change is made again on that (one
    more). Without such a value, or a clock read that recently, or when the change changes
    nothing (an answer is never given from a value not read just now), the value is read with
    ``TIME`` in one round trip first."""

    def __init__(
        self, url: str, *, timeout: float, clock: Callable[[], float] | None = None
    ) -> None:
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._clock = clock
        self._down_until = 0.0
        self._compare_and_set = self.client.register_script(COMPARE_AND_SET)
        self._key_locks: dict[str, threading.Lock] = {}
        # The value this process last wrote, per key, with the state it encodes (the next change
        # starts from it undecoded: the rules never change a state in place); Redis' clock as
        # last read, and when.
        self._written: dict[str, tuple[str, State]] = {}
        self._clock_read = (0.0, -math.inf)

    def apply(self, key: str, change: Callable[[State, float], tuple[T, State]], fallback: T) -> T:
        # This process's threads change a key one at a time: the compare-and-set then only
        # meets other processes' writes, instead of every thread's re-reading and re-applying
        # after each of its neighbours' (`dict.setdefault` is atomic). Redis found unreachable
        # by the thread ahead is not tried again by each thread that waited behind it.
        # (It is marked down before the lock is released, or a waiter would try it meanwhile.)
        with self._key_locks.setdefault(key, threading.Lock()):
            if time.monotonic() < self._down_until:
                return fallback
            try:
                return self._changed(key, change)
            except redis.RedisError:
                self._down_until = time.monotonic() + REDIS_RETRY_AFTER_SECONDS
                logger.warning("upstream limiter: Redis unreachable; calls go unmetered for now")
                return fallback

    def _changed(self, key: str, change: Callable[[State, float], tuple[T, State]]) -> T:
        """`change` applied to the key's value, under the key's lock (see the class)."""
        written = self._written.get(key)
        raw: bytes | str | None = written[0] if written else None
        now = self._now()
        read = raw is None or now is None
        if read:
            raw, now = self._read(key)
        assert now is not None
        while True:
            before = written[1] if written and raw is written[0] else _decoded(raw)
            answer, after = change(before, now)
            if after == before and read:
                return answer
            if after == before:
                # Nothing to write, on a value not read: read it, and answer from what it is.
                (raw, now), read = self._read(key), True
                continue
            value = _encoded(after)
            ttl_ms = math.ceil((after.expires(now) - now + IDLE_TTL_SECONDS) * 1000)
            reply = self._compare_and_set(keys=[key], args=[raw or "", value, ttl_ms])
            if reply == 1:
                self._written[key] = (value, after)
                return answer
            # Another process wrote meanwhile: the change again, on its value and the time.
            raw, now, read = reply[0] or None, self._time_read(reply[1]), True

    def _now(self) -> float | None:
        """Redis' clock now as this process last read it plus the time since; None when it was
        read longer than `CLOCK_TRUSTED_SECONDS` ago."""
        if self._clock is not None:
            return self._clock()
        server_time, read_at = self._clock_read
        elapsed = time.monotonic() - read_at
        return server_time + elapsed if elapsed <= CLOCK_TRUSTED_SECONDS else None

    def _time_read(self, server_time: Sequence[int | bytes]) -> float:
        """Redis' `TIME`, answered just now, in seconds (remembered: `_now`)."""
        if self._clock is not None:
            return self._clock()
        now = _seconds(server_time)
        self._clock_read = (now, time.monotonic())
        return now

    def _read(self, key: str) -> tuple[bytes | None, float]:
        """The state's raw value and the store's clock, in one round trip."""
        if self._clock is not None:
            return self.client.get(key), self._clock()  # type: ignore[return-value]
        pipe = self.client.pipeline(transaction=False)
        pipe.get(key)
        pipe.time()
        raw, server_time = pipe.execute()
        return raw, self._time_read(server_time)

    def _hand(self, key: str, waiter: str, slot: str) -> None:
        box = f"{key}:handed:{waiter}"
        try:
            pipe = self.client.pipeline()
            pipe.rpush(box, slot)
            pipe.expire(box, HANDOFF_TTL_SECONDS)
            pipe.execute()
        except redis.RedisError:
            logger.warning("upstream limiter: Redis unreachable; a slot was not handed over")

    def handed(self, key: str, waiter: str, timeout: float) -> str | None:
        box = f"{key}:handed:{waiter}"
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raw = self.client.lpop(box)
                    return _text(raw) if raw is not None else None
                # Each wait shorter than the client's socket timeout.
                popped = self.client.blpop([box], timeout=min(left, BLOCK_SECONDS))
                if popped is not None:
                    return _text(popped[1])
        except redis.RedisError:
            return None


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _seconds(server_time: Sequence[int | bytes]) -> float:
    """Redis' `TIME` (seconds, microseconds; bytes in a script's answer) in seconds."""
    return int(server_time[0]) + int(server_time[1]) / 1_000_000


def _encoded(state: State) -> str:
    # Its fields are numbers, strings and flat containers of them: no deep copy (`asdict`).
    return json.dumps({name: getattr(state, name) for name in _STATE_FIELD_NAMES})


def _decoded(raw: bytes | str | None) -> State:
    if raw is None:
        return State()
    # A field a newer or older release wrote and this one does not know is dropped.
    return State(**{k: v for k, v in json.loads(raw).items() if k in _STATE_FIELDS})


_STATE_FIELD_NAMES = tuple(f.name for f in fields(State))
_STATE_FIELDS = frozenset(_STATE_FIELD_NAMES)
