"""Django settings for serenity.

An operator configures the service with the few environment variables of the README's
configuration table, read through `config.env` (the one module that reads the environment);
what follows from them is derived here (cookies and HSTS from SERENITY_TLS, the caches and the
limiter's store from the broker's Redis). Every other value is an internal knob: a plain
setting with a comment, which the tests change through `config.settings_test`, never through
the environment. The defaults run the whole service on one laptop (SQLite, a filesystem broker,
the simulator). With DEBUG off the process refuses to start without SECRET_KEY and
FIELD_ENCRYPTION_KEY(S).

One section per concern, read top to bottom; each setting is defined once, whole (nothing is
appended to or inserted into a list further down).
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any

import dj_database_url
from kombu import Queue

from config.env import (
    env_allowed_hosts,
    env_bool,
    env_field_encryption_keys,
    env_float,
    env_int,
    env_secret,
    env_secret_key,
    env_str,
    refuse_placeholders,
)

# --- Paths and mode ---------------------------------------------------------------------------
BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("SERENITY_VAR_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", False)
# Served over https (through a TLS-terminating proxy or not): the SSL redirect, HSTS, secure
# cookies and the trusted origins follow from it ("Deploy security" below).
SERENITY_TLS = env_bool("SERENITY_TLS", False)

# --- Secrets and hosts (SPEC §10.5) -----------------------------------------------------------
# With DEBUG off each reader stops the process when its value is missing or whitespace only (or,
# for the key that encrypts, shorter than 32 characters); with DEBUG on, development values stand
# in (config/env.py).
SECRET_KEY = env_secret_key(debug=DEBUG)
FIELD_ENCRYPTION_KEYS = env_field_encryption_keys(debug=DEBUG)
FIELD_ENCRYPTION_KEY = FIELD_ENCRYPTION_KEYS[0]
# No variable of deploy/production.env may still hold its placeholder.
refuse_placeholders()
ALLOWED_HOSTS = env_allowed_hosts(debug=DEBUG)

# --- Applications, middleware, authentication -------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "serenity",
    "provisioning",
    "jobs",
    "webhooks",
    "api",
    # Swagger UI and Redoc from static files of their own (no CDN): SPECTACULAR_SETTINGS.
    "drf_spectacular_sidecar",
    # Admin login lockout (AXES_* below).
    "axes",
]

MIDDLEWARE = [
    # Binds the request id (and the tenant, once known) for every log line that follows.
    "kernel.middleware.RequestContextMiddleware",
    # Right after the request id is bound, before anything reads the path or the body:
    # bodies over SERENITY_MAX_BODY_BYTES (chunked or not) answer 413 `requestTooLarge`.
    "kernel.request_limits.RequestLimitsMiddleware",
    "kernel.middleware.RequestMetricsMiddleware",
    # /healthz and /readyz whatever the Host; a host not allowed elsewhere: the JSON envelope.
    "api.health.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS and JS) served by the app itself, with DEBUG off under
    # gunicorn as well; right after SecurityMiddleware, as whitenoise documents.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Authenticated JSON answers must not be kept by any cache (kernel/security.py).
    "kernel.security.NoStoreMiddleware",
    # Answers a locked-out admin login; it must come last.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    # First, so a locked-out login is refused before the password is even checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []

# Admin login lockout (django-axes, serenity/lockout.py): AXES_FAILURE_LIMIT failed logins for
# one user name from one address lock that pair out, and AXES_ADDRESS_FAILURE_LIMIT failed
# logins from one address across user names lock the address out, for AXES_COOLOFF_TIME hours;
# `manage.py axes_reset` lifts it.
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = 1.0
AXES_ADDRESS_FAILURE_LIMIT = 20
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_HANDLER = "api.lockout.AdminLoginLockoutHandler"
AXES_RESET_ON_SUCCESS = True
# The client address as the API's throttles see it: the peer, unless proxies are declared
# (SERENITY_NUM_PROXIES, REST_FRAMEWORK below).
AXES_CLIENT_IP_CALLABLE = "api.throttling.client_address"
AXES_VERBOSE = False

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- Database ---------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'serenity.sqlite3'}"
# A connection is kept this long (seconds) by a web or worker thread, with health checks.
DB_CONN_MAX_AGE = 60
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=DB_CONN_MAX_AGE)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the writer; IMMEDIATE makes a transaction take the write lock
    # at BEGIN, so conditional updates serialize instead of failing with "database is locked".
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = 5
    if env_bool("DB_PREPARED_STATEMENTS", True):
        # The hot paths send the same few dozen statements over and over, and PostgreSQL
        # parses and plans each anew: ~40 % of its CPU per chain. With server-side binding,
        # psycopg prepares a statement once it has run 5 times on a connection, and PostgreSQL
        # then skips both. Off for a pooler that does not keep prepared statements across
        # transactions (PgBouncer in transaction mode before 1.21).
        DATABASES["default"]["OPTIONS"].update(server_side_binding=True, prepare_threshold=5)
# Django reads ATOMIC_REQUESTS per database, here (a top-level setting of that name is ignored).
# Off: no request is one transaction; the flows open their own, commit before every upstream
# call, and the blocks that must be outermost say so with `transaction.atomic(durable=True)`.
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Static files (SPEC §10.4) ----------------------------------------------------------------
# Served by whitenoise (MIDDLEWARE above): from STATIC_ROOT after `manage.py collectstatic` (the
# documented deploy), and from the apps' own folders when it has not run (scripts/run, tests).
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Compressed copies (gzip) made by collectstatic; no manifest, so that a process whose
    # collectstatic has not run still renders every page.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# From the apps' folders too, so a process whose collectstatic has not run still has them.
WHITENOISE_USE_FINDERS = True
STATIC_ROOT.mkdir(parents=True, exist_ok=True)

# --- API --------------------------------------------------------------------------------------
REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["api.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON nested deeper than 64 levels → 400 `invalidRequest`, for every route (SPEC §10.2).
    "DEFAULT_PARSER_CLASSES": ["api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    # Rates and the cache they count in: "Caches and throttles" below.
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.WriteRateThrottle"],
    # How many proxies in front of gunicorn append to X-Forwarded-For: 0 means the client
    # address is the socket's peer (REMOTE_ADDR), so a forged X-Forwarded-For cannot dodge the
    # throttle (or the admin lockout).
    "NUM_PROXIES": env_int("SERENITY_NUM_PROXIES", 0),
}
# One version: the package's (pyproject.toml) is the OpenAPI document's.
SERENITY_VERSION = importlib.metadata.version("serenity")
SPECTACULAR_SETTINGS = {
    "TITLE": "Serenity provisioning API",
    "DESCRIPTION": "Brands and markets provisioned in Semrush, synchronously or as polled jobs.",
    "VERSION": SERENITY_VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schemas.postprocess_schema",
    ],
    "GET_LIB_DOC_EXCLUDES": "api.schemas.doc_excludes",
    # Several bodies have a `status` field with different choice sets: name each set once.
    "ENUM_NAME_OVERRIDES": {
        "BrandStatusEnum": "serenity.models.BrandStatus",
        "UndeletedBrandStatusEnum": ["active", "pending"],
        "JobStatusEnum": "jobs.models.JobStatus",
        "WebhookEventTypeEnum": "webhooks.models.WebhookEventType",
        "OnboardingStatusEnum": "provisioning.models.OnboardingStatus",
    },
    # Swagger UI and Redoc from drf-spectacular-sidecar's static files (no CDN).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
# Bodies over this size answer 413 `requestTooLarge` before any view reads them
# (kernel.request_limits); Django's own limit on reading a body agrees with it.
SERENITY_MAX_BODY_BYTES = 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = SERENITY_MAX_BODY_BYTES
# Pagination of the brand, market and job lists: `?limit=` bounds and default.
SERENITY_PAGE_SIZE_DEFAULT = 100
SERENITY_PAGE_SIZE_MAX = 500
# Retry-After on a job in progress: seconds until its next scheduled step, within these bounds.
SERENITY_RETRY_AFTER_MAX_SECONDS = 60
# Idempotency-Key answers (SPEC §10.3) are kept this long after the answer; beat deletes expired
# ones every IDEMPOTENCY_PURGE_INTERVAL_SECONDS.
IDEMPOTENCY_TTL_SECONDS = 86400
# A claimed key never answered (its process died) is taken over after this long: above any
# request's own bound (a sync settle: poll attempts x interval, plus upstream timeouts).
IDEMPOTENCY_IN_FLIGHT_SECONDS = 600
IDEMPOTENCY_PURGE_INTERVAL_SECONDS = 3600.0

# --- Semrush upstream -------------------------------------------------------------------------
SEMRUSH_BASE_URL = env_str("SEMRUSH_BASE_URL", "http://127.0.0.1:8765").rstrip("/")
SEMRUSH_API_TOKEN = env_str("SEMRUSH_API_TOKEN", "dev-token")
# Every upstream call's own bound (connect and each read).
SEMRUSH_TIMEOUT_SECONDS = 15.0
# The upstream limiter (SPEC §10.6, provisioning.quota / provisioning.limiter): one bucket per
# credential, in the broker's Redis (in-process for the embedded default); an org may override
# rate and burst. A rate of 0 turns the limiter off.
SEMRUSH_RATE_LIMIT_PER_SECOND = env_float("SEMRUSH_RATE_LIMIT_PER_SECOND", 10.0)
# Permits granted at once after an idle spell. 1: none beyond the pace. Semrush counts requests
# over a second, so a burst above the pace is answered 429 and pauses the credential.
SEMRUSH_RATE_LIMIT_BURST = 1
# A sync request waits at most this in all for its permits, else 503 upstreamBusy.
SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 5.0
# Upstream calls in flight at once per credential (SPEC §11.1, provisioning.limiter); 0: none.
SEMRUSH_CONCURRENCY_LIMIT = env_int("SEMRUSH_CONCURRENCY_LIMIT", 10)
# The language catalogue is read at most once per this, per process (SPEC §11.1).
SEMRUSH_LANGUAGES_CACHE_SECONDS = 86400.0

# --- Provisioning (SPEC §9) -------------------------------------------------------------------
# A sync request polls a new workspace's status this many times, this far apart (§4's settle).
SERENITY_SETTLE_POLL_ATTEMPTS = 30
SERENITY_SETTLE_POLL_INTERVAL_MS = 1000.0
# The chain's settle reads are these far apart (the last repeats).
SERENITY_PROVISION_BACKOFF_SECONDS: tuple[float, ...] = (5.0, 10.0, 20.0, 40.0, 80.0)
# An attempt pending this long ends stale; beat's sweep looks every interval.
SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900.0
SERENITY_STALE_SWEEP_INTERVAL_SECONDS = 60.0
# A chain's first status read waits the median settle time of the parent's last this many
# workspaces (SPEC §11.1); 0: read at once, as §6.3.
SERENITY_SETTLE_HISTORY = 20
# Publishing confirmed (SPEC §12.1, provisioning.publishing). A publish still running after
# the timeout ends the market `publish_failed` (`publishTimeout`); reads after the first are at
# least the back-off apart (then doubling); a sync request waits at most this long in all
# (3 reads) before a background job takes over.
SERENITY_PUBLISH_TIMEOUT_SECONDS = 900.0
SERENITY_PUBLISH_BACKOFF_SECONDS = 2.0
SERENITY_PUBLISH_SYNC_WAIT_SECONDS = 10.0
# Bounds of one request: markets of one activate, prompts of one push, markets of a brand.
SERENITY_MAX_ACTIVATE_MARKETS = 50
SERENITY_MAX_PROMPTS = 500
SERENITY_MAX_MARKETS_PER_BRAND = 50
# `provisioning_audit` takes at most this share of a credential's rate ...
SERENITY_AUDIT_RATE_SHARE = 0.5
# ... and reports its progress at least this often (seconds), on stderr.
SERENITY_AUDIT_PROGRESS_SECONDS = 10.0
# Work one org can queue (SPEC §12.4): onboarding items in progress at once per org (an org's
# own `onboarding_open_items_max` overrides it), markets in one onboarding, and the wait a
# refused onboarding is told (429 onboardingLimit, Retry-After).
SERENITY_ONBOARDING_OPEN_ITEMS_MAX = 5000
SERENITY_ONBOARDING_MARKETS_MAX = 5000
SERENITY_ONBOARDING_LIMIT_RETRY_SECONDS = 60
# An onboarding's items read their workspaces' statuses through shared family listings (SPEC
# §12.5): a listing is made this long after the first read it answers was due, and answers
# every read of the onboarding due until then.
SERENITY_ONBOARDING_STATUS_GATHER_SECONDS = 2.0

# --- Jobs (SPEC §9; JOBS_COUNTDOWN_MAX_SECONDS follows the broker: Celery below) --------------
# Finished jobs are purged after this many days.
JOBS_RETENTION_DAYS = 7.0
# Beat's dispatcher publishes due and lost jobs every interval.
JOBS_DISPATCH_INTERVAL_SECONDS = 2.0
# A claimed job not finished or renewed by then is re-published.
JOBS_LEASE_SECONDS = 120.0
# A step whose claim expired this many times (its worker died each time) ends FAILED jobFailed.
JOBS_MAX_DELIVERIES = 10
# Publishing a job to the broker from the request path gives up after this (the dispatcher
# publishes it later).
JOBS_PUBLISH_TIMEOUT_SECONDS = 1.0
# A worker that promotes a workspace runs the chain's next step itself, right after, instead of
# sending it through the broker to any worker (one task, message and claim round trip fewer
# per chain). Off: every step is its own message.
JOBS_HAND_OVER_INLINE = True

# --- Webhooks (SPEC §11.3) --------------------------------------------------------------------
# Deliveries to loopback, private, link-local, multicast and reserved addresses (and http://
# URLs) are refused unless this is on: with DEBUG (./scripts/run's receivers listen on the
# loopback) and in tests only.
SERENITY_WEBHOOK_ALLOW_PRIVATE = DEBUG
# A webhook URL names its scheme's standard port (443 for https, 80 for http) or none. Lifted
# with the address rule (development: a local receiver on any port) and in the test settings.
WEBHOOK_STANDARD_PORTS_ONLY = not SERENITY_WEBHOOK_ALLOW_PRIVATE
# Every attempt ends within this many seconds of wall clock, connect to status line (SPEC §12.4);
# before it starts, the attempt's job lease is renewed past it (webhooks.delivery).
WEBHOOK_ATTEMPT_DEADLINE_SECONDS = 10.0
# An org's pending deliveries; past it, the oldest pending end `failed` with `overflow`.
WEBHOOK_PENDING_MAX_PER_ORG = 10_000
# An endpoint whose every attempt failed for this long is disabled, with the reason shown.
WEBHOOK_FAILING_DISABLE_SECONDS = 86_400.0

# --- Celery -----------------------------------------------------------------------------------
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
# The steps' queue (each test run and each test stack has its own: config.settings_test).
CELERY_TASK_DEFAULT_QUEUE = "serenity"


def periodic_queue(default_queue: str) -> str:
    """Beat's periodic tasks (dispatcher, sweeps, purges) have their own queue, so that they
    never wait behind a backlog of steps, and each expires after its interval: with no worker
    consuming, they do not pile up into a burst of identical runs when one comes back."""
    return f"{default_queue}.periodic"


def task_queues(*names: str) -> tuple[Queue, ...]:
    """Each queue bound by its own name: a queue declared without a routing key would be bound
    by the default one and receive a copy of every step too. A worker started without -Q
    consumes every queue listed."""
    return tuple(Queue(name, routing_key=name) for name in names)


def webhook_queue(default_queue: str) -> str:
    """Webhook deliveries have their own queue (config.celery routes them), so a flood of slow
    receivers never queues provisioning steps behind it: production runs a worker for it alone."""
    return f"{default_queue}.webhooks"


CELERY_PERIODIC_QUEUE = periodic_queue(CELERY_TASK_DEFAULT_QUEUE)
CELERY_WEBHOOK_QUEUE = webhook_queue(CELERY_TASK_DEFAULT_QUEUE)
CELERY_TASK_QUEUES = task_queues(
    CELERY_TASK_DEFAULT_QUEUE, CELERY_PERIODIC_QUEUE, CELERY_WEBHOOK_QUEUE
)
# The longest delay we schedule is the last settle backoff; the visibility timeout must exceed
# it (and any lease), or Redis would redeliver a countdown message while it is still waiting.
_LONGEST_DELAY = max((*SERENITY_PROVISION_BACKOFF_SECONDS, JOBS_LEASE_SECONDS))
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": max(3600.0, 4 * _LONGEST_DELAY),
}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The embedded default: a worker's warm shutdown begins within 0.25 s of the signal instead
    # of up to 2 s (config/filesystem_broker.py), and the folder is polled every 0.2 s instead of
    # every second, so Ctrl-C on ./scripts/run stops everything well under 5 s.
    CELERY_BROKER_TRANSPORT = "config.filesystem_broker:Transport"
    _BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        data_folder_in=str(_BROKER_DIR),
        data_folder_out=str(_BROKER_DIR),
        control_folder=str(_BROKER_DIR / "control"),
        store_processed=False,
        polling_interval=0.2,
    )
else:
    if CELERY_BROKER_URL.startswith("redis://"):
        # Survives a broker lost while the worker holds messages (see config/broker.py).
        CELERY_BROKER_TRANSPORT = "config.broker:Transport"
    # Publishing in the request path is bounded: fail fast, the dispatcher re-publishes.
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        socket_connect_timeout=JOBS_PUBLISH_TIMEOUT_SECONDS,
        socket_timeout=max(JOBS_PUBLISH_TIMEOUT_SECONDS, 5.0),
        max_retries=0,
    )
# A job re-scheduled further out than this (a webhook retry hours later) gets no countdown
# message: the broker would redeliver it after its visibility timeout; the dispatcher publishes
# it when due.
JOBS_COUNTDOWN_MAX_SECONDS = float(CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]) / 2  # type: ignore[arg-type]
CELERY_BROKER_CONNECTION_TIMEOUT = JOBS_PUBLISH_TIMEOUT_SECONDS
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_PUBLISH_RETRY = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_SEND_TASK_EVENTS = False
# Task events (received, started, succeeded: three Redis publishes per task) are off, Celery's
# own default: they cost a worker ~0.6 ms of CPU per task (a sixth of Celery's cost per task
# here), and the job rows already record every step's claim, finish and error. Turn them on
# for Celery monitoring tools with the worker's `-E`. The extra
# `task-sent` event per publish would cost the request path a Redis round trip.
CELERY_TASK_SEND_SENT_EVENT = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# No task time limits: the documented pool (-P threads) does not enforce them, so they would
# only pretend to. A step is bounded by its own means instead: every upstream call has a
# timeout, and a step whose lease expires is re-published by the dispatcher (JOBS_LEASE_SECONDS).
# Without this, Celery's Django fix-up closes every database connection before and after each
# task, so every step paid a new PostgreSQL connection (a backend start: ~25 ms on the
# benchmark machine, three per chain). With it a worker thread keeps its connection, and
# config/celery.py applies Django's own rules (DB_CONN_MAX_AGE, health checks after an error)
# around each task, as for a web request.
CELERY_DB_REUSE_MAX = 1000


def beat_schedule(
    queue: str,
    *,
    dispatch: float,
    stale_sweep: float,
    idempotency_purge: float,
    credential_recheck: float = 60.0,
) -> dict[str, dict[str, Any]]:
    """Beat's entries, each on the periodic queue and expiring after its interval (see
    periodic_queue); the intervals are the settings that say so."""
    every = {
        "jobs-dispatch": ("jobs.dispatch_due_jobs", dispatch),
        "provisioning-stale-sweep": ("provisioning.sweep_stale_attempts", stale_sweep),
        "jobs-purge": ("jobs.purge_finished_jobs", 3600.0),
        "serenity-idempotency-purge": ("serenity.purge_idempotency_keys", idempotency_purge),
        # SPEC §13.2: held credentials read again (SERENITY_CREDENTIAL_RECHECK_SECONDS).
        "provisioning-credential-recheck": (
            "provisioning.recheck_credentials",
            credential_recheck,
        ),
    }
    return {
        name: {"task": task, "schedule": seconds, "options": {"queue": queue, "expires": seconds}}
        for name, (task, seconds) in every.items()
    }


CELERY_BEAT_SCHEDULE = beat_schedule(
    CELERY_PERIODIC_QUEUE,
    dispatch=JOBS_DISPATCH_INTERVAL_SECONDS,
    stale_sweep=SERENITY_STALE_SWEEP_INTERVAL_SECONDS,
    idempotency_purge=IDEMPOTENCY_PURGE_INTERVAL_SECONDS,
)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

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

# --- Metrics (SPEC §11.4) ---------------------------------------------------------------------
# Prometheus multiprocess mode in every run mode, with nothing to set: counters and histograms
# of every process (gunicorn workers, Celery pool processes) are files in this folder, which
# every process of one deployment must share (and which should be emptied when the whole
# deployment restarts: scripts/run does). prometheus_client reads the variable when it is
# first imported, which is after the settings in every process of ours.
PROMETHEUS_MULTIPROC_DIR = VAR_DIR / "prometheus"
PROMETHEUS_MULTIPROC_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(PROMETHEUS_MULTIPROC_DIR)
# /metrics answers only `Authorization: Bearer <SERENITY_METRICS_TOKEN>`; with none set, only
# loopback clients (api/health.py). Org ids label the quota metrics only when asked:
# one series per org is a cardinality (and a list of ids) the operator chooses.
SERENITY_METRICS_TOKEN = env_secret("SERENITY_METRICS_TOKEN")
SERENITY_METRICS_PER_ORG = False

# --- Process tuning (config/runtime.py) -------------------------------------------------------
# A server process freezes its startup heap and raises the young generation's threshold to
# this many allocations; SERVER_GC_FREEZE = False leaves the collector as Python sets it.
SERVER_GC_FREEZE = True
SERVER_GC_THRESHOLD = 10_000

# --- Logging: one JSON object per line --------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
# Celery's per-task "received" / "succeeded" lines (see below); INFO brings them back.
CELERY_TASK_LOG_LEVEL = "WARNING"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "kernel.logging.ContextFilter"},
        # Beat's "Sending due task" line of every tick is a DEBUG line.
        "beat_ticks": {"()": "kernel.logging.BeatTickFilter"},
    },
    "formatters": {"json": {"()": "kernel.logging.JsonFormatter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
        # Celery's "Task … received" and "Task … succeeded in …" lines: two per task, each with
        # the task's arguments and result repr'd, beside the "step ended" line the runner
        # already writes with the outcome, duration and tenant ids. Failures are still logged
        # (at ERROR).
        "celery.app.trace": {"level": CELERY_TASK_LOG_LEVEL},
        "celery.worker.strategy": {"level": CELERY_TASK_LOG_LEVEL},
        "celery.beat": {"filters": ["beat_ticks"]},
    },
}

# --- quota (revision 7) -----------------------------------------------------------------------
# The adaptive rate (SPEC §13.3, provisioning.limiter): SEMRUSH_RATE_LIMIT_PER_SECOND is the
# ceiling; a 429 without Retry-After multiplies a credential's rate by the factor (at most once a
# second, never below 0.5/s); each spell of this many seconds without a 429 adds the step.
SEMRUSH_RATE_DECREASE_FACTOR = 0.8
SEMRUSH_RATE_INCREASE_STEP = 0.15
SEMRUSH_RATE_INCREASE_SPELL_SECONDS = 2.0
# A refused credential (SPEC §13.2, provisioning.credential_hold): a held credential is read
# again this often (beat), and a hold older than the max fails the work that waited.
SERENITY_CREDENTIAL_RECHECK_SECONDS = 60.0
SERENITY_CREDENTIAL_HOLD_MAX_SECONDS = 6 * 3600.0
CELERY_BEAT_SCHEDULE = beat_schedule(
    CELERY_PERIODIC_QUEUE,
    dispatch=JOBS_DISPATCH_INTERVAL_SECONDS,
    stale_sweep=SERENITY_STALE_SWEEP_INTERVAL_SECONDS,
    idempotency_purge=IDEMPOTENCY_PURGE_INTERVAL_SECONDS,
    credential_recheck=SERENITY_CREDENTIAL_RECHECK_SECONDS,
)
