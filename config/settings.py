"""Django settings for serenity.

Every value that varies between machines comes from the environment through `config.env`;
the defaults run the whole service on one laptop (SQLite, a filesystem broker, the simulator).
With DEBUG off the process refuses to start without SECRET_KEY and FIELD_ENCRYPTION_KEY.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_float_list, env_int, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("SERENITY_VAR_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", False)

_DEV_SECRET_KEY = "dev-only-insecure-secret-key-never-use-in-production"
_DEV_FIELD_ENCRYPTION_KEY = "dev-only-field-encryption-key"

SECRET_KEY = env_str("SECRET_KEY") or (_DEV_SECRET_KEY if DEBUG else "")
FIELD_ENCRYPTION_KEY = env_str("FIELD_ENCRYPTION_KEY") or (
    _DEV_FIELD_ENCRYPTION_KEY if DEBUG else ""
)
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off; refusing to start.")
if not FIELD_ENCRYPTION_KEY:
    raise ImproperlyConfigured(
        "FIELD_ENCRYPTION_KEY must be set when DEBUG is off; refusing to start."
    )

ALLOWED_HOSTS = [h.strip() for h in env_str("ALLOWED_HOSTS", "*").split(",") if h.strip()]

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
]

MIDDLEWARE = [
    "kernel.middleware.RequestContextMiddleware",
    "kernel.middleware.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'serenity.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))
}
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
ATOMIC_REQUESTS = False
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- API ------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["serenity.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "serenity.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Serenity provisioning API",
    "DESCRIPTION": "Brands and markets provisioned in Semrush, synchronously or as polled jobs.",
    "VERSION": "2.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "serenity.api.schemas.postprocess_schema",
    ],
    "GET_LIB_DOC_EXCLUDES": "serenity.api.schemas.doc_excludes",
    # Several bodies have a `status` field with different choice sets: name each set once.
    "ENUM_NAME_OVERRIDES": {
        "BrandStatusEnum": "serenity.models.BrandStatus",
        "UndeletedBrandStatusEnum": ["active", "pending"],
        "JobStatusEnum": "jobs.models.JobStatus",
    },
}

# --- Semrush ------------------------------------------------------------------------------
SEMRUSH_BASE_URL = env_str("SEMRUSH_BASE_URL", "http://127.0.0.1:8765").rstrip("/")
SEMRUSH_API_TOKEN = env_str("SEMRUSH_API_TOKEN", "dev-token")
SEMRUSH_TIMEOUT_SECONDS = env_float("SEMRUSH_TIMEOUT_SECONDS", 15.0)
# The upstream quota (SPEC §10.6, provisioning.quota): one shared bucket per credential; an org
# may override rate and burst. A rate of 0 turns the limiter off.
SEMRUSH_RATE_LIMIT_PER_SECOND = env_float("SEMRUSH_RATE_LIMIT_PER_SECOND", 10.0)
SEMRUSH_RATE_LIMIT_BURST = env_int("SEMRUSH_RATE_LIMIT_BURST", 20)
# A chained step's first permit within this, else it is re-scheduled; a sync request waits at
# most this in all, else 503 upstreamBusy.
SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS = env_float("SEMRUSH_RATE_LIMIT_STEP_WAIT_SECONDS", 1.0)
SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = env_float("SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS", 5.0)
# A step's first permit waits behind at most this many permits already reserved.
SEMRUSH_RATE_LIMIT_STEP_QUEUE = env_float("SEMRUSH_RATE_LIMIT_STEP_QUEUE", 10.0)
# The bucket paces this fraction below the configured rate (jitter against a sliding window).
SEMRUSH_RATE_LIMIT_MARGIN = env_float("SEMRUSH_RATE_LIMIT_MARGIN", 0.05)
# "" chooses: Redis when the broker is Redis, PostgreSQL otherwise, else in-process.
SEMRUSH_RATE_LIMIT_BACKEND = env_str("SEMRUSH_RATE_LIMIT_BACKEND", "")
SEMRUSH_RATE_LIMIT_REDIS_URL = env_str("SEMRUSH_RATE_LIMIT_REDIS_URL", "")
SEMRUSH_LANGUAGES_CACHE_SECONDS = env_float("SEMRUSH_LANGUAGES_CACHE_SECONDS", 3600.0)

# --- Provisioning tunables (SPEC §9) -----------------------------------------------------------
SERENITY_SETTLE_POLL_ATTEMPTS = env_int("SERENITY_SETTLE_POLL_ATTEMPTS", 30)
SERENITY_SETTLE_POLL_INTERVAL_MS = env_float("SERENITY_SETTLE_POLL_INTERVAL_MS", 1000.0)
SERENITY_PROVISION_BACKOFF_SECONDS = env_float_list(
    "SERENITY_PROVISION_BACKOFF_SECONDS", (5.0, 10.0, 20.0, 40.0, 80.0)
)
SERENITY_PROVISIONING_STALE_AFTER_SECONDS = env_float(
    "SERENITY_PROVISIONING_STALE_AFTER_SECONDS", 900.0
)
SERENITY_STALE_SWEEP_INTERVAL_SECONDS = env_float("SERENITY_STALE_SWEEP_INTERVAL_SECONDS", 60.0)
SERENITY_MAX_ACTIVATE_MARKETS = env_int("SERENITY_MAX_ACTIVATE_MARKETS", 50)
SERENITY_MAX_PROMPTS = env_int("SERENITY_MAX_PROMPTS", 500)
SERENITY_MAX_MARKETS_PER_BRAND = env_int("SERENITY_MAX_MARKETS_PER_BRAND", 50)
JOBS_RETENTION_DAYS = env_float("JOBS_RETENTION_DAYS", 7.0)
JOBS_DISPATCH_INTERVAL_SECONDS = env_float("JOBS_DISPATCH_INTERVAL_SECONDS", 2.0)
JOBS_LEASE_SECONDS = env_float("JOBS_LEASE_SECONDS", 120.0)
JOBS_PUBLISH_TIMEOUT_SECONDS = env_float("JOBS_PUBLISH_TIMEOUT_SECONDS", 1.0)
# A worker that promotes a workspace runs the chain's next step itself, right after, instead of
# sending it through the broker to any worker (one task, message and claim round trip fewer
# per chain). Off: every step is its own message.
JOBS_HAND_OVER_INLINE = env_bool("JOBS_HAND_OVER_INLINE", True)

# --- Celery ---------------------------------------------------------------------------------
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_QUEUE", "serenity")
# The longest delay we schedule is the last settle backoff; the visibility timeout must exceed
# it (and any lease), or Redis would redeliver a countdown message while it is still waiting.
_LONGEST_DELAY = max((*SERENITY_PROVISION_BACKOFF_SECONDS, JOBS_LEASE_SECONDS))
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": max(3600.0, 4 * _LONGEST_DELAY),
}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        data_folder_in=str(_BROKER_DIR),
        data_folder_out=str(_BROKER_DIR),
        control_folder=str(_BROKER_DIR / "control"),
        store_processed=False,
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
CELERY_WORKER_SEND_TASK_EVENTS = env_bool("CELERY_WORKER_SEND_TASK_EVENTS", False)
# Task events (received, started, succeeded: three Redis publishes per task) are off, Celery's
# own default: they cost a worker ~0.6 ms of CPU per task (a sixth of Celery's cost per task
# here), and the job rows already record every step's claim, finish and error. Turn them on
# for Celery monitoring tools with `-E` or CELERY_WORKER_SEND_TASK_EVENTS=true. The extra
# `task-sent` event per publish would cost the request path a Redis round trip.
CELERY_TASK_SEND_SENT_EVENT = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_SOFT_TIME_LIMIT = env_float("CELERY_TASK_SOFT_TIME_LIMIT", JOBS_LEASE_SECONDS * 2)
CELERY_TASK_TIME_LIMIT = env_float("CELERY_TASK_TIME_LIMIT", JOBS_LEASE_SECONDS * 2 + 30)
# Without this, Celery's Django fix-up closes every database connection before and after each
# task, so every step paid a new PostgreSQL connection (a backend start: ~25 ms on the
# benchmark machine, three per chain). With it a worker thread keeps its connection, and
# config/celery.py applies Django's own rules (DB_CONN_MAX_AGE, health checks after an error)
# around each task, as for a web request.
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000)
CELERY_BEAT_SCHEDULE = {
    "jobs-dispatch": {
        "task": "jobs.dispatch_due_jobs",
        "schedule": JOBS_DISPATCH_INTERVAL_SECONDS,
    },
    "provisioning-stale-sweep": {
        "task": "provisioning.sweep_stale_attempts",
        "schedule": SERENITY_STALE_SWEEP_INTERVAL_SECONDS,
    },
    "jobs-purge": {
        "task": "jobs.purge_finished_jobs",
        "schedule": 3600.0,
    },
}

# --- Issue 16 / SPEC §10.3: API consumers ---------------------------------------------------
# Idempotency-Key answers are kept this long after the answer; beat deletes expired ones.
IDEMPOTENCY_TTL_SECONDS = env_int("IDEMPOTENCY_TTL_SECONDS", 86400)
# A claimed key never answered (its process died) is taken over after this long: above any
# request's own bound (a sync settle: poll attempts x interval, plus upstream timeouts).
IDEMPOTENCY_IN_FLIGHT_SECONDS = env_int("IDEMPOTENCY_IN_FLIGHT_SECONDS", 600)
IDEMPOTENCY_PURGE_INTERVAL_SECONDS = env_float("IDEMPOTENCY_PURGE_INTERVAL_SECONDS", 3600.0)
CELERY_BEAT_SCHEDULE["serenity-idempotency-purge"] = {
    "task": "serenity.purge_idempotency_keys",
    "schedule": IDEMPOTENCY_PURGE_INTERVAL_SECONDS,
}
# Pagination of the brand, market and job lists: `?limit=` bounds and default.
SERENITY_PAGE_SIZE_DEFAULT = 100
SERENITY_PAGE_SIZE_MAX = 500
# Retry-After on a job in progress: seconds until its next scheduled step, within these bounds.
SERENITY_RETRY_AFTER_MAX_SECONDS = 60
# Swagger UI and Redoc from drf-spectacular-sidecar's static files (no CDN).
INSTALLED_APPS.append("drf_spectacular_sidecar")
SPECTACULAR_SETTINGS.update(
    SWAGGER_UI_DIST="SIDECAR", SWAGGER_UI_FAVICON_HREF="SIDECAR", REDOC_DIST="SIDECAR"
)

CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- Logging: one JSON object per line -------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
CELERY_TASK_LOG_LEVEL = env_str("CELERY_TASK_LOG_LEVEL", "WARNING")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "kernel.logging.ContextFilter"}},
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
        # (at ERROR). CELERY_TASK_LOG_LEVEL=INFO brings them back.
        "celery.app.trace": {"level": CELERY_TASK_LOG_LEVEL},
        "celery.worker.strategy": {"level": CELERY_TASK_LOG_LEVEL},
    },
}

# --- Issue 15 / SPEC §10.2: bad input never answers 500 -----------------------------------------
# Bodies over this size answer 413 `requestTooLarge` before any view reads them
# (kernel.request_limits); Django's own limit on reading a body agrees with it.
SERENITY_MAX_BODY_BYTES = env_int("SERENITY_MAX_BODY_BYTES", 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = SERENITY_MAX_BODY_BYTES
# Right after the request id is bound, before anything reads the path or the body.
MIDDLEWARE.insert(
    MIDDLEWARE.index("kernel.middleware.RequestContextMiddleware") + 1,
    "kernel.request_limits.RequestLimitsMiddleware",
)
# JSON nested deeper than 64 levels → 400 `invalidRequest`, for every route.
REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] = ["serenity.api.parsers.BoundedJSONParser"]
