"""The one HTTP client of webhooks: a signed POST to a checked address (SPEC §11.3, §12.4).

Signatures are the Standard Webhooks ones, made by the `standardwebhooks` package: headers
`webhook-id` (the event's id: the same on every retry), `webhook-timestamp` (this attempt's
time) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`).

The connection goes to the address `webhooks.addresses` checked, never to a second resolution
of the name: the socket is opened to that address, `Host` carries the name, and for https the
TLS handshake sends the name (SNI) and checks the certificate against it. Redirects are not
followed (a 3xx is a failed attempt), no proxy is used, and nothing is retried here: retries are
the delivery's schedule.

An attempt has a wall-clock deadline (`WEBHOOK_ATTEMPT_DEADLINE_SECONDS`, 10 s) from the connect
to the answer's status line, whatever the receiver does: a socket timeout alone bounds each read,
so a receiver dripping a header every few seconds would hold an attempt for minutes. A watchdog
shuts the socket down at the deadline, which ends any read blocked on it at once. The standard
library's `http.client` speaks HTTP/1.1 over that socket (the body of the answer is never read).

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

from webhooks.addresses import AddressRefusedError, Target, addresses_resolve, target_parse

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
    body to the first address, within the deadline. Never raises for the receiver's or the
    network's failures: they are the attempt's `error`."""
    try:
        target = target_parse(url)
        address = addresses_resolve(target)[0]
    except AddressRefusedError:
        return AttemptResult(status_code=None, error=CONNECTION_FAILED)
    headers = {
        **signed_headers(secrets=secrets, message_id=message_id, body=body),
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Host": target.host_header,
    }
    deadline = time.monotonic() + settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS
    try:
        sock = socket.create_connection(
            (str(address), target.port), timeout=max(deadline - time.monotonic(), 0.001)
        )
    except OSError:
        # Refused, unreachable or silent alike: a port's state is not the client's to learn.
        return AttemptResult(status_code=None, error=CONNECTION_FAILED)
    expired = threading.Event()
    watchdog = threading.Timer(deadline - time.monotonic(), _shut, args=(sock, expired))
    watchdog.daemon = True
    watchdog.start()
    try:
        code: int | None = _exchange(sock, target, headers=headers, body=body.encode())
    except (OSError, http.client.HTTPException):
        code = None
    finally:
        watchdog.cancel()
        sock.close()
    if expired.is_set():
        # The shutdown reads as the end of the headers to `http.client`: an answer whose
        # headers the deadline cut is no answer.
        code = None
    if code is None:
        # Ended by the deadline (the watchdog's shutdown, or a read timeout at the same time),
        # or before it by the receiver closing or breaking the exchange.
        timed_out = expired.is_set() or time.monotonic() >= deadline
        return AttemptResult(status_code=None, error=TIMEOUT if timed_out else CONNECTION_FAILED)
    if 200 <= code < 300:
        return AttemptResult(status_code=code, error=None)
    return AttemptResult(status_code=code, error=f"answered {code}")


def _exchange(sock: socket.socket, target: Target, *, headers: dict[str, str], body: bytes) -> int:
    """Send the request over `sock` (TLS first for https) and read the status line."""
    channel: socket.socket = sock
    if target.scheme == "https":
        channel = ssl.create_default_context().wrap_socket(sock, server_hostname=target.host)
    connection = http.client.HTTPConnection(target.host, target.port)
    connection.sock = channel  # connected already: http.client does not connect again
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        with connection.getresponse() as response:
            return response.status
    finally:
        connection.close()


def _shut(sock: socket.socket, expired: threading.Event) -> None:
    """The deadline: a read or write blocked on `sock` returns at once."""
    expired.set()
    with contextlib.suppress(OSError):  # closed meanwhile
        sock.shutdown(socket.SHUT_RDWR)
