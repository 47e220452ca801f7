"""The one HTTP client of webhooks: a signed POST to a checked address (SPEC §11.3, §12.4).

Signatures are the Standard Webhooks ones, made by the `standardwebhooks` package: headers
`webhook-id` (the event's id: the same on every retry), `webhook-timestamp` (this attempt's
time) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`).

The connection goes to the address `webhooks.addresses` checked, never to a second resolution
of the name: the socket is opened to that address, `Host` carries the name, and for https the
TLS handshake sends the name (SNI) and checks the certificate against it. Redirects are not
followed (a 3xx is a failed attempt), no proxy is used, and nothing is retried here: retries are
the delivery's schedule.

An attempt has a wall-clock deadline (`WEBHOOK_ATTEMPT_DEADLINE_SECONDS`, 10 s) from the name's
resolution to the answer's status line, whatever the receiver or the resolver does (SPEC §13.6):
a socket timeout alone bounds each read, so a receiver dripping a header (or a TLS record) every
few seconds would hold an attempt for minutes. A watchdog shuts down, at the deadline, the
socket that carries the exchange then (for https the TLS socket that replaced the TCP one:
wrapping detaches the TCP socket object), which ends any read blocked on it at once; the name
is resolved in a thread of its own that the attempt waits for until the deadline only. The
standard library's `http.client` speaks HTTP/1.1 over that socket (the answer's body is never
read).

What the client is told (`error`) is one of `timeout`, `connection failed`, `answered <status>`:
nothing that tells an open port from a closed or a filtered one, or what the network said.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from django.conf import settings
from standardwebhooks.webhooks import Webhook as StandardWebhook

from webhooks.addresses import (
    AddressRefusedError,
    IpAddress,
    Target,
    addresses_resolve,
    target_parse,
)

USER_AGENT = "serenity-webhooks/1"
TIMEOUT = "timeout"
CONNECTION_FAILED = "connection failed"


@dataclass(frozen=True)
class AttemptResult:
    status_code: int | None
    error: str | None
    # How long the attempt took, from the address check to the answer's status line.
    duration_ms: int = 0

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def signed_headers(*, secrets: list[str], message_id: str, body: str) -> dict[str, str]:
    """One signature per secret, space-separated (`v1,<sig-new> v1,<sig-old>` while a rotated
    secret is still valid), as Standard Webhooks allows: a receiver verifying with either
    secret accepts the message."""
    timestamp = datetime.now(UTC)
    signatures = [StandardWebhook(s).sign(message_id, timestamp, body) for s in secrets]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": " ".join(signatures),
    }


def webhook_post(*, url: str, secrets: list[str], message_id: str, body: str) -> AttemptResult:
    """One attempt, timed: see `_post`."""
    started = time.monotonic()
    result = _post(url=url, secrets=secrets, message_id=message_id, body=body)
    elapsed = round((time.monotonic() - started) * 1000)
    return replace(result, duration_ms=elapsed)


def _post(*, url: str, secrets: list[str], message_id: str, body: str) -> AttemptResult:
    """One attempt: check the URL and every address its host resolves to, then POST the signed
    body to the first address, all within the deadline. Never raises for the receiver's or the
    network's failures: they are the attempt's `error`."""
    deadline = time.monotonic() + settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS
    line = _Line()
    watchdog = threading.Timer(settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS, line.cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        code = _attempt(
            line, deadline=deadline, url=url, secrets=secrets, message_id=message_id, body=body
        )
    except _DeadlineError:
        return AttemptResult(status_code=None, error=TIMEOUT)
    except AddressRefusedError:
        return AttemptResult(status_code=None, error=CONNECTION_FAILED)
    except (OSError, http.client.HTTPException, ValueError):
        # Refused, unreachable or silent alike: a port's state is not the client's to learn.
        code = None
    finally:
        watchdog.cancel()
        line.close()
    if line.expired:
        # The shutdown reads as the end of the headers to `http.client`: an answer whose
        # headers the deadline cut is no answer.
        code = None
    if code is None:
        # Ended by the deadline (the watchdog's shutdown, or a timeout at the same time), or
        # before it by the receiver closing or breaking the exchange.
        timed_out = line.expired or time.monotonic() >= deadline
        return AttemptResult(status_code=None, error=TIMEOUT if timed_out else CONNECTION_FAILED)
    if 200 <= code < 300:
        return AttemptResult(status_code=code, error=None)
    return AttemptResult(status_code=code, error=f"answered {code}")


class _DeadlineError(Exception):
    """The name did not resolve before the deadline."""


class _Line:
    """The attempt's connection as it is now: the TCP socket, then the TLS socket that replaces
    it (wrapping detaches the TCP socket object: shutting that one down would do nothing). The
    watchdog's `cut` shuts down whichever carries the exchange at the deadline, and one carried
    after the deadline is shut at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.expired = False

    def carry(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            expired = self.expired
        if expired:
            _shut(sock)

    def cut(self) -> None:
        """The deadline: a read or write blocked on the connection returns at once."""
        with self._lock:
            self.expired = True
            sock = self._sock
        if sock is not None:
            _shut(sock)

    def close(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def _shut(sock: socket.socket) -> None:
    # The socket's own shutdown, not `SSLSocket.shutdown` (which also drops the TLS state under
    # a read in progress): the descriptor is the same.
    with contextlib.suppress(OSError):  # closed meanwhile
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _remaining(line: _Line, deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0 or line.expired:
        raise _DeadlineError()
    return left


def _attempt(
    line: _Line, *, deadline: float, url: str, secrets: list[str], message_id: str, body: str
) -> int:
    """Resolve and check, connect to the checked address, send, and read the status line."""
    target = target_parse(url)
    address = _resolve_within(target, timeout=_remaining(line, deadline))[0]
    headers = {
        **signed_headers(secrets=secrets, message_id=message_id, body=body),
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Host": target.host_header,
    }
    sock = socket.socket(socket.AF_INET6 if address.version == 6 else socket.AF_INET)
    line.carry(sock)
    sock.settimeout(_remaining(line, deadline))
    sock.connect((str(address), target.port))
    channel: socket.socket = sock
    if target.scheme == "https":
        channel = tls_context().wrap_socket(
            sock, server_hostname=target.host, do_handshake_on_connect=False
        )
        line.carry(channel)
        channel.do_handshake()
    return _exchange(channel, target, headers=headers, body=body.encode())


def tls_context() -> ssl.SSLContext:
    """The TLS client context: the system's trust store, hostname checked."""
    return ssl.create_default_context()


def _resolve_within(target: Target, *, timeout: float) -> list[IpAddress]:
    """`addresses_resolve` given at most `timeout` seconds: the system resolver cannot be
    interrupted, so it runs in a thread of its own that an attempt past its deadline leaves
    behind (it ends with the resolver's own timeout). Raises `_DeadlineError`,
    `AddressRefusedError`."""
    outcome: list[list[IpAddress] | AddressRefusedError] = []

    def resolve() -> None:
        try:
            outcome.append(addresses_resolve(target))
        except AddressRefusedError as refused:
            outcome.append(refused)

    thread = threading.Thread(target=resolve, name="webhook-resolve", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise _DeadlineError()
    found = outcome[0]
    if isinstance(found, AddressRefusedError):
        raise found
    return found


def _exchange(
    channel: socket.socket, target: Target, *, headers: dict[str, str], body: bytes
) -> int:
    """Send the request over `channel` (connected, TLS established for https) and read the
    status line."""
    connection = http.client.HTTPConnection(target.host, target.port)
    connection.sock = channel  # connected already: http.client does not connect again
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        with connection.getresponse() as response:
            return response.status
    finally:
        connection.close()
