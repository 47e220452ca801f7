"""Metrics, process tuning, logging."""

from __future__ import annotations

import os

from config.env import env_secret, env_str
from config.sections.core import VAR_DIR

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
