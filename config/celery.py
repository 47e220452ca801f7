"""The Celery application. Configuration lives in Django settings under the CELERY_ prefix."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import (
    beat_init,
    celeryd_after_setup,
    celeryd_init,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_ready,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("serenity")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger("serenity.celery")


@celeryd_init.connect
def quiet_worker_banner(instance: Any = None, **_: object) -> None:
    """No start-up banner: the worker prints it (ASCII art, not a log line) unless quiet, and
    every line of every process is one JSON object (SPEC §12.4). `announce_worker` logs what
    it showed. (Beat has no such hook: its command lines pass `-q`.)"""
    if instance is not None:
        instance.quiet = True
    # Warnings as log lines (JSON) from here on: Celery turns this on only once its logging
    # is set up, after its own start-up checks warned (e.g. a worker run as root).
    logging.captureWarnings(True)


@celeryd_after_setup.connect
def announce_worker(sender: str = "", instance: Any = None, conf: Any = None, **_: object) -> None:
    """The banner's facts, as one JSON line (the broker's URL without its password)."""
    from kombu.utils.url import maybe_sanitize_url

    logger.info(
        "worker starting",
        extra={
            "hostname": sender,
            "broker": maybe_sanitize_url(conf.broker_url) if conf is not None else None,
            "pool": getattr(getattr(instance, "pool_cls", None), "__name__", None),
            "concurrency": getattr(instance, "concurrency", None),
            "queues": sorted(app.amqp.queues.consume_from or {}),
        },
    )


@beat_init.connect
def announce_beat(sender: Any = None, **_: object) -> None:
    """Beat's banner facts, as one JSON line (its printed banner is off: `celery beat -q`)."""
    from kombu.utils.url import maybe_sanitize_url

    scheduler = getattr(sender, "scheduler", None)
    logger.info(
        "beat starting",
        extra={
            "broker": maybe_sanitize_url(app.conf.broker_url),
            "scheduler": type(scheduler).__name__ if scheduler is not None else None,
            "maxInterval": getattr(sender, "max_interval", None),
        },
    )


# Tasks with a queue of their own; every other task goes to CELERY_TASK_DEFAULT_QUEUE (beat's
# entries name the periodic queue themselves). Webhook deliveries run on their own workers, so a
# flood of slow receivers never queues a provisioning step behind it (SPEC §12.5).
QUEUE_SETTING_BY_TASK = {
    "serenity.step.deliverWebhook": "CELERY_WEBHOOK_QUEUE",
    # The events of many chains ended at once (an onboarding's cancel), written after it.
    "serenity.step.publishWebhookEvents": "CELERY_WEBHOOK_QUEUE",
}


def route_task(name: str, *_: object, **__: object) -> dict[str, str]:
    """Celery's router (`task_routes`): the task's queue, read from the settings when the
    message is sent (the tests give each run queues of its own)."""
    from django.conf import settings

    return {
        "queue": getattr(settings, QUEUE_SETTING_BY_TASK.get(name, "CELERY_TASK_DEFAULT_QUEUE"))
    }


app.conf.task_routes = (route_task,)


@worker_init.connect
def trace_worker(sender: Any = None, **_: object) -> None:
    """Tracing (kernel.tracing, when OTEL_EXPORTER_OTLP_ENDPOINT is set) in a worker whose
    pool runs tasks in this process (threads, solo); a prefork pool's processes set it up
    after the fork (`trace_pool_process`), where its exporter's thread lives."""
    if "prefork" not in str(getattr(sender, "pool_cls", "")).lower():
        from kernel.tracing import setup_tracing

        setup_tracing()


@worker_process_init.connect
def trace_pool_process(**_: object) -> None:
    from kernel.tracing import setup_tracing

    setup_tracing()


@worker_ready.connect
@worker_process_init.connect
def freeze_startup_heap(**_: object) -> None:
    """A worker (or, under prefork, each pool process) has loaded everything it needs:
    `config.runtime.ready_to_serve`."""
    from config.runtime import ready_to_serve

    ready_to_serve()


@task_prerun.connect
@task_postrun.connect
def recycle_database_connections(task: Any = None, **_: object) -> None:
    """Around each task, close this thread's database connections that are past
    DB_CONN_MAX_AGE or broke (a terminated backend): Django's request rules, since
    CELERY_DB_REUSE_MAX stops Celery from closing them all every time. Not for a task run
    in-process (`apply()`): its caller owns the connection, as Celery's fix-up also assumes."""
    if task is not None and getattr(task.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
