"""kombu's Redis transport with one defect fixed, and one client per connection pool instead of
one per use, through its public extension points (a transport's `Channel` class and the
channel's public `conn_or_acquire`).

The defect (kombu/Celery 5.7): when a worker loses its Redis connection, Celery collects the
connection (the transport's `client` becomes None) and then closes it. Closing a channel
restores the messages the worker still holds (countdown messages, a running `acks_late` task)
through `conn_or_acquire`, and a task that finishes afterwards acknowledges through it too;
either builds a client from the released connection (or from a closed channel's, None) and
raises AttributeError ("'NoneType' object has no attribute 'hostname'" or "... 'client'").
That is not a connection error, so the worker exits ("Unrecoverable error") instead of
reconnecting. Found by the chaos suite (Redis restarted while chains were mid-flight).

Here such a use raises a connection error, which kombu and Celery already handle. The messages
concerned stay unacknowledged in the broker, or are gone with it; either way the dispatcher
re-publishes their jobs and a late duplicate does nothing (SPEC §6.4).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    # The client kombu builds when the caller gives none (every publish, acknowledgement and
    # prefetch record): a `redis.Redis` over this channel's connection `pool`, ~550 Python calls
    # to construct (its response-callback table). A redis-py client holds no connection of its
    # own and may be shared between threads, so the one built over the current pool is used
    # again while kombu keeps that pool; a new pool (kombu drops it after a lost broker) gets a
    # new client, built by kombu as before.
    pool_client: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        transport = self.connection
        built = client is None
        if built:
            if transport is None or transport.client is None:
                raise kombu_redis.get_redis_ConnectionError()(
                    "the broker connection of this channel was released"
                )
            reused = self.pool_client
            if reused is not None and reused.connection_pool is self.pool:
                client, built = reused, False
        with super().conn_or_acquire(client) as acquired:
            if built:
                self.pool_client = acquired
            yield acquired


class Transport(kombu_redis.Transport):
    Channel = Channel
