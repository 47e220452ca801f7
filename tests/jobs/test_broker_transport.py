"""The broker transport (`config.celery.RedisTransport`) against the test Redis."""

from __future__ import annotations

import uuid

from kombu import Connection

from config.celery import RedisTransport
from tests.conftest import TEST_BROKER_URL


def test_a_channel_builds_its_synchronous_client_once_per_connection_pool():
    # given
    queue = f"transport-test-{uuid.uuid4().hex}"
    with Connection(TEST_BROKER_URL, transport=RedisTransport) as connection:
        channel = connection.default_channel
        # when: publishing, reading and acknowledging go through one client
        first = channel._create_client()
        channel._put(queue, {"body": "one"})
        assert channel._create_client() is first
        assert channel._size(queue) == 1
        assert channel._get(queue) == {"body": "one"}
        # then the pool kombu drops when the broker is lost is not reused: the next use builds
        # a new pool and a client on it
        channel._disconnect_pools()
        second = channel._create_client()
        assert second is not first
        assert second.connection_pool is channel.pool
        assert second.connection_pool is not first.connection_pool
        channel._put(queue, {"body": "two"})
        assert channel._get(queue) == {"body": "two"}
        assert channel._size(queue) == 0
        # and the consumer's asynchronous client is still its own
        assert channel.client is not second
