"""API throttles (SPEC §10.5), DRF's `SimpleRateThrottle` on the shared `throttle` cache.

- `WriteRateThrottle`: per API token on mutating methods (SERENITY_THROTTLE_WRITES, e.g. 30/s).
- `AuthFailureThrottle`: failed authentications per client address
  (SERENITY_THROTTLE_AUTH_FAILURES, e.g. 30/min). Only failures are counted and only failures
  are refused: past the limit a wrong token gets 429 instead of 401, while a valid token is
  never refused by it (one bad script behind a NAT must not lock out everyone behind it).
  `BearerTokenAuthentication` drives it.

Both answer 429 `rateLimited` with `Retry-After` (api/errors.py). Rates are read from
settings at each request (DRF's own throttles read them once, at import). The counts live in
Redis when the broker is Redis; when Redis cannot be reached a throttle lets the request
through: the throttle protects the service, it must not take it down with the cache. After
one failure the process leaves the cache alone for a few seconds (`CACHE_OUTAGE`), so an
unreachable Redis costs one short timeout per process now and then, not two per request (the
async accept path must answer within its ~1 s publish bound while the broker is down).
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

import redis
from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from serenity.models import ApiToken

logger = logging.getLogger("api.throttling")

# What a cache that cannot be reached raises (redis-py's family; sockets below it).
CACHE_UNAVAILABLE_ERRORS = (redis.RedisError, OSError)


class CacheOutage:
    """This process' view of the throttle cache: after a failure, throttles let requests
    through without touching the cache for `pause_seconds`."""

    pause_seconds = 5.0

    def __init__(self) -> None:
        self.until = 0.0

    @property
    def active(self) -> bool:
        return time.monotonic() < self.until

    def begin(self) -> None:
        self.until = time.monotonic() + self.pause_seconds
        logger.warning(
            "throttle cache unavailable; requests go through unthrottled for %.0f s",
            self.pause_seconds,
            exc_info=True,
        )

    def end(self) -> None:
        self.until = 0.0


CACHE_OUTAGE = CacheOutage()


class SharedCacheRateThrottle(SimpleRateThrottle):
    rate_setting: ClassVar[str]
    # Set by SimpleRateThrottle.__init__ from the parsed rate.
    num_requests: int
    duration: int

    def __init__(self) -> None:
        self.cache = caches["throttle"]
        super().__init__()

    def get_rate(self) -> str:
        return str(getattr(settings, self.rate_setting))

    def allow_request(self, request: Request, view: Any) -> bool:
        if CACHE_OUTAGE.active:
            return True
        try:
            return super().allow_request(request, view)
        except CACHE_UNAVAILABLE_ERRORS:
            CACHE_OUTAGE.begin()
            return True


class WriteRateThrottle(SharedCacheRateThrottle):
    """Mutating requests per API token."""

    scope = "writes"
    rate_setting = "SERENITY_THROTTLE_WRITES"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if request.method in SAFE_METHODS or not isinstance(request.auth, ApiToken):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}


class AuthFailureThrottle(SharedCacheRateThrottle):
    """Failed authentications per client address (the socket peer unless NUM_PROXIES says
    how many proxies append to X-Forwarded-For)."""

    scope = "auth_failures"
    rate_setting = "SERENITY_THROTTLE_AUTH_FAILURES"

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def refusal_wait(self, request: Request) -> float | None:
        """Seconds until this address may try again, or None when it is under the limit.
        Records nothing."""
        self.key = None
        if CACHE_OUTAGE.active:
            return None
        try:
            key = self.get_cache_key(request, None)
            self.history = self.cache.get(key, [])
        except CACHE_UNAVAILABLE_ERRORS:
            CACHE_OUTAGE.begin()
            return None
        self.key = key
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) >= self.num_requests:
            return self.wait()
        return None

    def record_failure(self) -> None:
        """Count one failure of the address `refusal_wait` just checked."""
        if self.key is None:
            return
        try:
            self.throttle_success()
        except CACHE_UNAVAILABLE_ERRORS:
            CACHE_OUTAGE.begin()


def client_address(request: HttpRequest) -> str:
    """The client address as the API throttles count it, for the admin's login lockout too
    (AXES_CLIENT_IP_CALLABLE): one rule for which proxy headers are believed."""
    return BaseThrottle().get_ident(request)  # type: ignore[arg-type]
