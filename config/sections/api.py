"""Static files, the API (DRF, the OpenAPI document), request bounds, idempotency."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from config.env import env_int
from config.sections.core import VAR_DIR

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
        "JobModeEnum": "jobs.models.JobMode",
        "WebhookEventTypeEnum": "webhooks.models.WebhookEventType",
        "OnboardingStatusEnum": "provisioning.models.OnboardingStatus",
        "ReconciliationStatusEnum": "provisioning.reconcile.models.ReconciliationStatus",
        "ReconciliationItemStatusEnum": "provisioning.reconcile.models.ItemStatus",
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
