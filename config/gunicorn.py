"""gunicorn settings for the documented deploy (`gunicorn -c config/gunicorn.py config.wsgi`).

gunicorn's own lines (its error log and the access log) are JSON objects, one per line, like
every other line of the service (SPEC §10.4). Its control socket lives in SERENITY_VAR_DIR
(settings.VAR_DIR), beside the service's other state, not in the home of the user running it
(gunicorn's default, shared by every gunicorn of that user: SPEC §12.4). Everything else (bind,
workers, threads) comes from the command line or GUNICORN_CMD_ARGS.
"""

from __future__ import annotations

from typing import Any

from config.settings import VAR_DIR

control_socket = str(VAR_DIR / "gunicorn.ctl")

accesslog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(L)ss request_id=%({x-request-id}o)s'

logconfig_dict: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "kernel.logging.JsonFormatter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json"},
        "access": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "stream": "ext://sys.stdout",
        },
    },
    "loggers": {
        "gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
    },
}
