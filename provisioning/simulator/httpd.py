"""The simulator's HTTP server: a threading server that can close its kept-alive connections,
and the handler that hands control requests and API requests to the simulator."""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from provisioning.simulator.wire import CONTROL_PREFIX, _json, _Response


class _Simulator(Protocol):
    """What the handler asks of the simulator (`server.SemrushSimulator`)."""

    def handle_control(self, method: str, path: str, body: bytes) -> _Response: ...

    def handle_api(
        self, method: str, path: str, query: str, authorization: str | None, body: bytes
    ) -> _Response: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        simulator: _Simulator,
    ) -> None:
        self.simulator = simulator
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keep-alive: every response carries Content-Length (204 excepted, it has no body).
    protocol_version = "HTTP/1.1"
    # The headers and the body leave in two writes: with Nagle on, the body of every answer on
    # a kept-alive connection waits for the client's delayed ACK of the headers (~40 ms).
    disable_nagle_algorithm = True
    server_version = "SemrushSimulator/1.0"
    timeout = 120  # an idle keep-alive connection is closed after this many seconds
    server: _Server

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: GET /__sim/requests is the access log."""

    def _handle(self, method: str) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            self._send(_json(411, {"message": "Content-Length required"}))
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._send(_json(400, {"message": "bad Content-Length"}))
            return
        # Always consume the body, so the connection stays usable whatever the answer.
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        simulator = self.server.simulator
        if split.path.startswith(CONTROL_PREFIX):
            response = simulator.handle_control(method, split.path, body)
        else:
            response = simulator.handle_api(
                method, split.path, split.query, self.headers.get("Authorization"), body
            )
        self._send(response)

    def _send(self, response: _Response) -> None:
        if response.drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            if response.content_type is not None:
                self.send_header("Content-Type", response.content_type)
            if response.status != 204:
                self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            if response.body and response.status != 204:
                self.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (its timeout fired during a scripted delay): nothing to do.
            self.close_connection = True
