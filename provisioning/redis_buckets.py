"""The credential buckets of :mod:`provisioning.buckets` in Redis (the broker's server by
default): one atomic Lua script call per permit, on Redis' clock, so that every process and
host of a deployment shares one state. The script is :func:`provisioning.buckets.gcra` and
:func:`provisioning.buckets.paused`, line for line."""

from __future__ import annotations

import logging
import time

import redis
from django.conf import settings

from provisioning.buckets import (
    DECAY_AT,
    IDLE_TTL_SECONDS,
    LANE_SECONDS,
    REDIS_RETRY_AFTER_SECONDS,
    SLOW_DECAY,
    SLOW_MAX,
    SLOW_STEP,
    TRUSTED_FROM,
    Reservation,
)

logger = logging.getLogger("serenity.quota")

# KEYS[1]: the bucket (a hash {tat, queue, grants, starts, pause, slow, slow_at, lane,
# lane_org, and q:<org> per waiting org}). ARGV: interval, tolerance, max_wait (reserve) or
# seconds (pause), mode ("reserve" | "pause"), idle TTL, first ("1"), decay threshold,
# trusted-from, the slow-down step, maximum and decay, the org, the patience of an org with
# nothing waiting, the lane's length. Floats travel as strings: a Lua number returned to Redis
# would be truncated to an integer.
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
  'slow', 'slow_at', 'lane', 'lane_org')
local tat = tonumber(state[1] or '')
local queue = tonumber(state[2] or '') or 0
local grants = tonumber(state[3] or '') or 0
local starts = tonumber(state[4] or '') or 0
local paused = tonumber(state[5] or '') or 0
local slow_set = tonumber(state[6] or '') or 0
local slow_at = tonumber(state[7] or '') or 0
local lane = tonumber(state[8] or '') or 0
local lane_org = state[9] or ''
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
  local org_field = 'q:' .. ARGV[12]
  local own = 0
  local idle_wait = tonumber(ARGV[13])
  local idle = (tonumber(redis.call('HGET', KEYS[1], org_field) or '') or 0) <= now
  if idle then
    amount = math.max(amount, idle_wait)
  elseif idle_wait > 0 and lane > now and lane_org ~= ARGV[12] then
    amount = math.min(amount, interval)
  end
  local permit_at = tat + interval - tolerance
  wait = math.max(permit_at - now, 0)
  if wait <= amount then
    granted = 1
    if idle then
      lane = now + tonumber(ARGV[14])
      lane_org = ARGV[12]
    end
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
  'slow', tostring(slow_set), 'slow_at', tostring(slow_at), 'lane', tostring(lane),
  'lane_org', lane_org)
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
            repr(DECAY_AT),
            repr(TRUSTED_FROM),
            repr(SLOW_STEP),
            repr(SLOW_MAX),
            repr(SLOW_DECAY),
            org,
            repr(idle_wait),
            repr(LANE_SECONDS),
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
