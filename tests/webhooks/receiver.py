"""A real webhook receiver on the loopback: `http.server` in a thread, recording every request
and answering from a script (status codes in order, then the default; an optional delay)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)  # wall clock of the arrival


@dataclass
class Receiver:
    server: ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)
    # Every request as it arrives (before any hold): an attempt in flight is here already.
    arrivals: list[Received] = field(default_factory=list)
    script: list[int] = field(default_factory=list)
    # Seconds to hold each request before answering, in order (then `delay_seconds`).
    holds: list[float] = field(default_factory=list)
    default_status: int = 204
    delay_seconds: float = 0.0
    extra_headers: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def answer(self) -> int:
        with self.lock:
            return self.script.pop(0) if self.script else self.default_status

    def wait_for(
        self, count: int, timeout: float = 20.0, *, arrived: bool = False
    ) -> list[Received]:
        """The first `count` requests answered (`arrived`: arrived, answered or not)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                seen = self.arrivals if arrived else self.received
                if len(seen) >= count:
                    return list(seen)
            time.sleep(0.02)
        raise AssertionError(f"{len(self.received)} requests received, {count} expected")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def receiver_start(**options: Any) -> Receiver:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            receiver = holder["receiver"]
            request = Received(path=self.path, headers=dict(self.headers.items()), body=body)
            with receiver.lock:
                receiver.arrivals.append(request)
                hold = receiver.holds.pop(0) if receiver.holds else receiver.delay_seconds
            if hold:
                time.sleep(hold)
            with receiver.lock:
                receiver.received.append(request)
            status = receiver.answer()
            self.send_response(status)
            for name, value in receiver.extra_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = Receiver(server=server, **options)
    holder["receiver"] = receiver
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver
