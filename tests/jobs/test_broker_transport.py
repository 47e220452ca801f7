"""The broker transport (`config.broker.Transport`) against the test Redis: a channel used after
its connection was released raises a connection error (which kombu and Celery handle), not an
AttributeError that stops the worker."""

from __future__ import annotations

import uuid

import pytest
import redis
from kombu import Connection

from config.broker import Transport
from tests.conftest import TEST_BROKER_URL


def test_a_live_channel_publishes_and_acknowledges_through_its_client():
    queue = f"transport-test-{uuid.uuid4().hex}"
    with Connection(TEST_BROKER_URL, transport=Transport) as connection:
        channel = connection.default_channel
        with channel.conn_or_acquire() as client:
            client.lpush(queue, "one")
            assert client.llen(queue) == 1
            client.delete(queue)


@pytest.mark.parametrize("released", ["transport client", "channel connection"])
def test_a_channel_whose_connection_was_released_raises_a_connection_error(released):
    # given a channel whose connection Celery collected (the broker was lost), or a closed one
    connection = Connection(TEST_BROKER_URL, transport=Transport)
    channel = connection.default_channel
    if released == "transport client":
        channel.connection.client = None
    else:
        channel.connection = None
    # when / then: restoring or acknowledging through it is a connection error
    with pytest.raises(redis.exceptions.ConnectionError), channel.conn_or_acquire():
        pass


def test_a_client_given_by_the_caller_is_used_as_it_is():
    connection = Connection(TEST_BROKER_URL, transport=Transport)
    channel = connection.default_channel
    given = redis.Redis.from_url(TEST_BROKER_URL)
    channel.connection.client = None
    with channel.conn_or_acquire(given) as client:
        assert client is given


def test_the_client_built_for_the_channel_s_pool_is_used_again_while_that_pool_stands():
    with Connection(TEST_BROKER_URL, transport=Transport) as connection:
        channel = connection.default_channel
        with channel.conn_or_acquire() as first:
            pass
        with channel.conn_or_acquire() as second:
            assert second is first
            assert second.connection_pool is channel.pool
        # when kombu drops the pool (as after a lost broker), the next use builds a new client
        # over the new pool
        channel._disconnect_pools()
        with channel.conn_or_acquire() as third:
            assert third is not first
            assert third.connection_pool is channel.pool
            assert third.ping()
