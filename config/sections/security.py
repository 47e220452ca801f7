"""Caches and throttles, and the deploy security that follows from SERENITY_TLS."""

from __future__ import annotations

from typing import Any

from config.sections.api import REST_FRAMEWORK
from config.sections.core import ALLOWED_HOSTS, SERENITY_TLS
from config.sections.workers import CELERY_BROKER_URL

# --- Caches and throttles (SPEC §10.5) --------------------------------------------------------
# Throttles (serenity/throttling.py) count in a cache every process shares: Redis when the
# broker is Redis, this process' memory for the embedded default (one process serves there).
# The throttle cache is its own alias so that nothing ever clears it along with other caches;
# its socket timeouts are short because a throttle that cannot reach Redis lets the request
# through rather than failing it (the broker outage is handled by the dispatcher, SPEC §6.4).
SERENITY_THROTTLE_CACHE_URL = (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else ""
)
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": SERENITY_THROTTLE_CACHE_URL,
            "KEY_PREFIX": "serenity-throttle",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
        if SERENITY_THROTTLE_CACHE_URL
        else {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "serenity-throttle",
        }
    ),
}
# Writes per API token, and failed authentications per client address (DRF rates).
SERENITY_THROTTLE_WRITES = "30/s"
SERENITY_THROTTLE_AUTH_FAILURES = "30/min"

# --- Deploy security (SPEC §10.5; `manage.py check --deploy` is clean with production.env) ----
# All of it follows from SERENITY_TLS: served over https, plain http is redirected (the probes
# excepted), HSTS for a year (subdomains and preload included), cookies only over https.
SECURE_SSL_REDIRECT = SERENITY_TLS
SECURE_HSTS_SECONDS = 31536000 if SERENITY_TLS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SERENITY_TLS
SECURE_HSTS_PRELOAD = SERENITY_TLS
# /healthz, /readyz and /metrics are probed and scraped over plain http from inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = SERENITY_TLS
CSRF_COOKIE_SECURE = SERENITY_TLS
# The admin's forms are posted from the hosts this service answers for (`.example.com` allows
# its subdomains), over the scheme it is served with.
CSRF_TRUSTED_ORIGINS = [
    f"{'https' if SERENITY_TLS else 'http'}://{'*' + host if host.startswith('.') else host}"
    for host in ALLOWED_HOSTS
    if host != "*"
]
if SERENITY_TLS and REST_FRAMEWORK["NUM_PROXIES"]:
    # TLS ends at the declared proxy, which must set (never pass on) X-Forwarded-Proto on
    # every request it forwards (README, "Production deploy"): that header says https.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
