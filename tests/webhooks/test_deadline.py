"""The attempt's deadline holds on https and counts the name's resolution (SPEC §13.6): a
receiver that drips its answer over TLS is cut off at the deadline (the TLS socket is the one
shut down), and a resolver that does not answer in time ends the attempt as a timeout."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.webhooks.helpers import register, run_delivery
from tests.webhooks.receiver import Receiver
from tests.webhooks.tls import HOST_NAME, self_signed
from webhooks.models import WebhookAttempt, WebhookDelivery
from webhooks.services import webhook_event_publish

pytestmark = pytest.mark.django_db


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Client contexts trust the tests' self-signed certificate (besides the system's)."""
    real = ssl.create_default_context
    cert = self_signed().cert_pem

    def create(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = real(*args, **kwargs)
        context.load_verify_locations(cadata=cert)
        return context

    monkeypatch.setattr(ssl, "create_default_context", create)


@dataclass
class TlsDripper:
    """An https receiver that completes the handshake, reads the request, then answers
    `200 OK` with one header whose value comes one byte every `interval` seconds (one header:
    `http.client`'s limit of 100 headers never ends the exchange for it)."""

    port: int
    handshakes: int = 0
    cut_off: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/hook"


@contextmanager
def tls_dripping_receiver(*, interval: float, drips: int) -> Iterator[TlsDripper]:
    server = socket.create_server(("127.0.0.1", 0))
    dripper = TlsDripper(port=server.getsockname()[1])
    context = self_signed().server_context()

    def serve() -> None:
        with server:
            raw, _ = server.accept()
            try:
                with context.wrap_socket(raw, server_side=True) as conn:
                    dripper.handshakes += 1
                    _request_read(conn)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                    for _ in range(drips):
                        time.sleep(interval)
                        conn.sendall(b"d")
                    conn.sendall(b"\r\nContent-Length: 0\r\n\r\n")
                    dripper.finished.set()
            except (OSError, ssl.SSLError):
                dripper.cut_off.set()  # the sender shut the connection

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield dripper
    thread.join(timeout=30)


def _request_read(conn: ssl.SSLSocket) -> None:
    """The whole request (headers, then the body its Content-Length announces): a socket
    closed with unread bytes resets the connection under the client's read."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)


def publish(org: Any) -> WebhookDelivery:
    [delivery_id] = webhook_event_publish(
        organization_id=org.id, type="onboarding.completed", data={"status": "COMPLETED"}
    )
    return WebhookDelivery.objects.get(pk=delivery_id)


def test_a_receiver_dripping_over_tls_is_cut_off_at_the_deadline(
    writer, allow_private, trusting, published_jobs, settings
):
    # given an https receiver that would drip headers for 20 s, and a 0.5 s deadline
    settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS = 0.5
    with tls_dripping_receiver(interval=0.1, drips=200) as dripper:
        register(writer, dripper.url)
        # when the attempt runs
        delivery = run_delivery(publish(writer.org))
        # then the TLS connection was shut while headers were still coming
        assert dripper.cut_off.wait(timeout=30)
        assert not dripper.finished.is_set()
    assert dripper.handshakes == 1
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, None)
    assert delivery.last_error == "timeout"
    assert list(WebhookAttempt.objects.values_list("status_code", "error")) == [(None, "timeout")]


def test_an_https_receiver_that_answers_at_once_delivers(
    writer, allow_private, trusting, published_jobs, settings
):
    # the same receiver with nothing to drip: the TLS path delivers (what the test above cuts)
    with tls_dripping_receiver(interval=0.0, drips=0) as dripper:
        register(writer, dripper.url)
        delivery = run_delivery(publish(writer.org))
        assert dripper.finished.wait(timeout=10)
    assert (delivery.status, delivery.last_status_code, delivery.last_error) == (
        "delivered",
        200,
        None,
    )


def test_the_name_resolution_counts_inside_the_deadline(
    writer, allow_private, receiver: Receiver, published_jobs, settings, monkeypatch
):
    # given a resolver that answers only when released (a slow DNS), and a 0.5 s deadline
    settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS = 0.5
    port = receiver.server.server_address[1]
    release = threading.Event()
    asked = threading.Event()
    real = socket.getaddrinfo

    def slow(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != HOST_NAME:
            return real(host, *args, **kwargs)
        asked.set()
        release.wait(timeout=30)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    url = f"http://{HOST_NAME}:{port}/hook"
    monkeypatch.setattr(
        "webhooks.addresses.socket.getaddrinfo",
        lambda *a, **k: real("127.0.0.1", port, type=socket.SOCK_STREAM),
    )
    register(writer, url)  # registration resolves it at once
    monkeypatch.setattr("webhooks.addresses.socket.getaddrinfo", slow)
    try:
        # when the attempt runs
        delivery = run_delivery(publish(writer.org))
        # then it ended as a timeout while the resolver had still not answered
        assert asked.is_set() and not release.is_set()
    finally:
        release.set()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("pending", 1, "timeout")
    assert receiver.arrivals == []
