"""Django's applications, middleware, authentication (the admin's lockout), templates."""

from __future__ import annotations

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
    # Reconciliations (SPEC §13.1): their own app.
    "provisioning.reconcile",
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
    # A view whose database connection cannot be made answers 503 `databaseUnavailable` with
    # Retry-After (the DRF views get it from api.errors).
    "api.database_unavailable.DatabaseUnavailableMiddleware",
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

# Admin login lockout (django-axes, api/lockout.py): AXES_FAILURE_LIMIT failed logins for
# one user name from one address lock that pair out, and AXES_ADDRESS_FAILURE_LIMIT failed
# logins from one address across user names lock the address out, AXES_USERNAME_FAILURE_LIMIT
# from any addresses lock the user name out, for AXES_COOLOFF_TIME hours;
# `manage.py axes_reset` lifts it.
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = 1.0
AXES_ADDRESS_FAILURE_LIMIT = 20
AXES_USERNAME_FAILURE_LIMIT = 10
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address", "username"]
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
