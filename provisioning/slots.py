"""Upstream calls in flight (SPEC §11.1): a per-credential concurrency limit shared by every
process.

Semrush allows a credential 10 requests per second *and* 10 requests in flight at once. The rate
is :mod:`provisioning.quota`'s bucket; this module is the second limit. Every upstream attempt
holds one slot from just before it is sent until its answer (or failure) is in, taken by
:class:`provisioning.quota.CredentialPermits` after the rate's permit and released by
:class:`~provisioning.semrush.calls.SemrushCaller` in a ``finally``.

A slot is a member of a per-credential set with an expiry (``SEMRUSH_TIMEOUT_SECONDS`` + 5 s,
longer than any one attempt can take): a process killed in the middle of a call leaks nothing,
its slot is ignored once expired. Taking one is one atomic operation: drop the expired members,
count, add ours if the count is under the limit.

Where the slots live follows the bucket (:func:`provisioning.quota.backend_name`): a sorted set
in Redis (score = expiry, Redis' clock), rows of :class:`~provisioning.models.UpstreamSlot`
counted under the credential's bucket row lock in PostgreSQL, or a dict in this process for the
embedded default. A Redis that cannot be reached lets the call through, as the bucket does.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Protocol

import redis
from django.conf import settings
from django.db import transaction

from provisioning.models import UpstreamBucket, UpstreamSlot

logger = logging.getLogger("serenity.quota")

# After Redis failed, slots are not asked for for this long (the call goes through).
REDIS_RETRY_AFTER_SECONDS = 5.0
# The grace beyond the client's timeout after which a slot expires on its own.
EXPIRY_GRACE_SECONDS = 5.0


def slot_ttl() -> float:
    """How long a slot lives at most: longer than any one attempt (its timeout) can take."""
    return float(settings.SEMRUSH_TIMEOUT_SECONDS) + EXPIRY_GRACE_SECONDS


class Slots(Protocol):
    """Where slots live. `take` is atomic across every process sharing the store: it returns
    the new slot's id, or None when `limit` unexpired slots are held already."""

    def take(self, key: str, *, limit: int, ttl: float) -> str | None: ...

    def give_back(self, key: str, slot: str) -> None: ...

    def held(self, key: str) -> int:
        """Unexpired slots held now (for tests and the admin)."""
        ...


class MemorySlots:
    """Slots in this process (the embedded default)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._slots: dict[str, dict[str, float]] = {}

    def _live(self, key: str, now: float) -> dict[str, float]:
        slots = self._slots.setdefault(key, {})
        for slot, expires in list(slots.items()):
            if expires <= now:
                del slots[slot]
        return slots

    def take(self, key: str, *, limit: int, ttl: float) -> str | None:
        with self._lock:
            now = self._clock()
            slots = self._live(key, now)
            if len(slots) >= limit:
                return None
            slot = uuid.uuid4().hex
            slots[slot] = now + ttl
            return slot

    def give_back(self, key: str, slot: str) -> None:
        with self._lock:
            self._slots.get(key, {}).pop(slot, None)

    def held(self, key: str) -> int:
        with self._lock:
            return len(self._live(key, self._clock()))


class DatabaseSlots:
    """Slots as rows of :class:`UpstreamSlot`, counted under the credential's bucket row lock
    (``select_for_update``, one short transaction; no transaction spans an upstream call)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock

    def take(self, key: str, *, limit: int, ttl: float) -> str | None:
        now = self._clock()
        with transaction.atomic():
            UpstreamBucket.objects.select_for_update().get_or_create(key=key)
            UpstreamSlot.objects.filter(key=key, expires_at__lte=now).delete()
            if UpstreamSlot.objects.filter(key=key).count() >= limit:
                return None
            return str(UpstreamSlot.objects.create(key=key, expires_at=now + ttl).id)

    def give_back(self, key: str, slot: str) -> None:
        UpstreamSlot.objects.filter(pk=slot, key=key).delete()

    def held(self, key: str) -> int:
        return UpstreamSlot.objects.filter(key=key, expires_at__gt=self._clock()).count()


# KEYS[1]: the credential's slot set (member = slot id, score = expiry on Redis' clock).
# ARGV: limit, ttl, slot id.
_TAKE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local limit = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tostring(now))
if redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], tostring(now + ttl), ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(ttl * 1000) + 1000)
return 1
"""

_HELD_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
return redis.call('ZCOUNT', KEYS[1], '(' .. tostring(now), '+inf')
"""


class RedisSlots:
    """Slots in Redis: one atomic script call to take, one ZREM to give back."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._take = client.register_script(_TAKE_SCRIPT)
        self._held = client.register_script(_HELD_SCRIPT)
        self._down_until = 0.0

    @staticmethod
    def _set(key: str) -> str:
        return f"{key}:slots"

    def take(self, key: str, *, limit: int, ttl: float) -> str | None:
        slot = uuid.uuid4().hex
        if time.monotonic() < self._down_until:
            return slot
        try:
            taken = self._take(keys=[self._set(key)], args=[limit, repr(ttl), slot])
        except redis.RedisError:
            # Fail open, as the bucket does: upstream's own 429 is the backstop.
            logger.warning("upstream concurrency: Redis unreachable; calls go unmetered for now")
            self._down_until = time.monotonic() + REDIS_RETRY_AFTER_SECONDS
            return slot
        return slot if int(taken) else None

    def give_back(self, key: str, slot: str) -> None:
        with contextlib.suppress(redis.RedisError):  # it expires on its own
            self._client.zrem(self._set(key), slot)

    def held(self, key: str) -> int:
        return int(self._held(keys=[self._set(key)]))
