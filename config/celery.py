"""The Celery application. Configuration lives in Django settings under the CELERY_ prefix."""

from __future__ import annotations

import logging
import os

from celery import Celery
from celery.worker.consumer import Consumer

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger("serenity.jobs")


class BrokerLossTolerantConsumer(Consumer):
    """The worker's consumer, surviving the loss of a Redis broker while it holds messages.

    On a lost connection Celery 5.7 first collects the connection (which releases the
    transport) and then closes it. When the worker held unacknowledged messages (a running
    `acks_late` task, countdown messages waiting for their ETA) and kombu's Redis channel
    failed to close during the collect (its pending BRPOP read raises first), the close
    re-enters the channel to restore those messages through the released transport and
    raises AttributeError — which is not a connection error, so the worker exits
    ("Unrecoverable error") instead of reconnecting. Found by the chaos suite (Redis restarted
    while chains were mid-flight). Nothing is lost by carrying on: the messages cannot be
    restored without a broker anyway, and the dispatcher re-publishes every job whose message
    is gone (SPEC §6.4).
    """

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        try:
            super().on_connection_error_after_connected(exc)
        except AttributeError:
            logger.warning(
                "broker connection cleanup failed after a connection loss; reconnecting",
                exc_info=True,
            )


app = Celery("serenity")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
