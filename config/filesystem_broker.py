"""kombu's filesystem transport (the embedded default broker of ./scripts/run), answering a
worker's shutdown promptly.

Celery's loop for transports without an event loop (`synloop`) blocks in
`Transport.drain_events(timeout=2.0)` and looks at its shutdown flag only between two calls, so
a warm shutdown (SIGTERM, Ctrl-C on ./scripts/run) waited up to 2 s before it began. A
shorter wait per call (the public `drain_events` of the transport, overridden) lets it begin
within a quarter of a second; the directory is polled at the transport's `polling_interval`
either way.

The defect fixed in `Channel._put` (kombu 5.x): kombu writes a message file in place under its
final name, and a worker polling the folder can move and read it before the write ends; the
empty or partial JSON then stops the worker ("Unrecoverable error: JSONDecodeError"). The file
is written under a name the readers skip and renamed into place (atomic on one filesystem).
`_put` is the hook kombu's virtual transports document for a channel subclass to implement.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem as kombu_filesystem
from kombu.utils.json import dumps

DRAIN_TIMEOUT_SECONDS = 0.25


class Channel(kombu_filesystem.Channel):
    # kombu names the argument `payload` here and `message` in its base class: mypy sees both.
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        # kombu's own name (the readers sort on it and match its `.<queue>.msg` suffix).
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.partial"
        try:
            with open(partial, "wb") as file:
                file.write(dumps(payload).encode())
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc


class Transport(kombu_filesystem.Transport):
    Channel = Channel

    def drain_events(self, connection: Any, timeout: Any = None, **kwargs: Any) -> Any:
        bounded = DRAIN_TIMEOUT_SECONDS if timeout is None else min(timeout, DRAIN_TIMEOUT_SECONDS)
        return super().drain_events(connection, timeout=bounded, **kwargs)
