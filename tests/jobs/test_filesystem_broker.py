"""The embedded default's broker (config/filesystem_broker.py): a message file appears in the
queue folder only once it is whole, so a polling worker never reads a partial one."""

from __future__ import annotations

import os
from queue import Empty
from unittest import mock

import pytest
from kombu import Connection


@pytest.fixture
def channel(tmp_path):
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path)}
    with Connection(
        "filesystem://", transport="config.filesystem_broker:Transport", transport_options=options
    ) as connection:
        yield connection.default_channel


def test_a_message_is_invisible_to_readers_until_it_is_whole(channel, tmp_path):
    seen_while_writing: list[object] = []
    real_replace = os.replace

    def replace(source: str, target: str) -> None:
        # the moment before the rename: the file is written, under a name readers skip
        seen_while_writing.append(sorted(os.listdir(tmp_path)))
        with pytest.raises(Empty):
            channel._get("jobs")
        real_replace(source, target)

    with mock.patch("config.filesystem_broker.os.replace", side_effect=replace):
        channel._put("jobs", {"body": "x" * 10_000})

    [listing] = seen_while_writing
    assert len(listing) == 1 and listing[0].endswith(".jobs.msg.partial")
    assert channel._get("jobs") == {"body": "x" * 10_000}
    assert os.listdir(tmp_path) == []
