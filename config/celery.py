"""The Celery application. Configuration lives in Django settings under the CELERY_ prefix."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_process_init, worker_ready
from kombu.transport import redis as kombu_redis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


class _RedisChannel(kombu_redis.Channel):
    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        """kombu builds a new synchronous `redis.Redis` for every publish, acknowledgement
        and prefetch bookkeeping (`conn_or_acquire`): ~135 µs of CPU each (its response
        callback table), six or more per chain. The client is only a front to the channel's
        connection pool and is thread-safe, so it is built once per pool: when kombu drops the
        pool (a lost broker), the next use builds both anew."""
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool
        client = self._sync_client
        if client is None or client.connection_pool is not pool:
            client = self._sync_client = super()._create_client(asynchronous=False)
        return client

    def _connparams(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            raise kombu_redis.get_redis_ConnectionError()(
                "the broker connection of this channel was released"
            )
        return super()._connparams(asynchronous=asynchronous)


class RedisTransport(kombu_redis.Transport):
    """kombu's Redis transport, with a channel that survives the loss of its broker.

    When a worker loses its Redis connection, Celery 5.7 collects the connection (releasing
    the transport) and then closes it. A channel used after that — to restore the messages the
    worker held (countdown messages, a running `acks_late` task) while closing, or to
    acknowledge a task that finishes after the reconnect — rebuilt its connection pool from
    the released transport and raised AttributeError, which is not a connection error: the
    worker exited ("Unrecoverable error") instead of reconnecting. Found by the chaos suite
    (Redis restarted while chains were mid-flight). Here such a use raises a connection error,
    which kombu and Celery already handle (ignored on close; "couldn't ack" logged). The
    messages concerned stay unacknowledged in the broker, or are gone with it; either way the
    dispatcher re-publishes their jobs and a late duplicate does nothing (SPEC §6.4).
    """

    Channel = _RedisChannel


app = Celery("serenity")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
