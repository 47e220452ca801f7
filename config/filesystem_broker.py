"""kombu's filesystem transport (the embedded default broker of ./scripts/run), answering a
worker's shutdown promptly.

Celery's loop for transports without an event loop (`synloop`) blocks in
`Transport.drain_events(timeout=2.0)` and looks at its shutdown flag only between two calls, so
a warm shutdown (SIGTERM, Ctrl-C on ./scripts/run) waited up to 2 s before it began. A
shorter wait per call (the public `drain_events` of the transport, overridden) lets it begin
within a quarter of a second; the directory is polled at the transport's `polling_interval`
either way.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import filesystem as kombu_filesystem

DRAIN_TIMEOUT_SECONDS = 0.25


class Transport(kombu_filesystem.Transport):
    def drain_events(self, connection: Any, timeout: Any = None, **kwargs: Any) -> Any:
        bounded = DRAIN_TIMEOUT_SECONDS if timeout is None else min(timeout, DRAIN_TIMEOUT_SECONDS)
        return super().drain_events(connection, timeout=bounded, **kwargs)
