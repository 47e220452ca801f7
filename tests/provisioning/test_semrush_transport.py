"""The Semrush transport over real HTTP: a local server stands in for Semrush, so requests'
own adapter and urllib3's pool run (the `responses` mocks replace them)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from provisioning.semrush import (
    SemrushClient,
    SemrushError,
    SemrushNetworkError,
    SemrushTimeoutError,
)
from provisioning.semrush.transport import PooledSessions, pooled_session

TOKEN = "tok-transport-test"


class _Origin(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.cookies_seen: list[str | None] = []
        self.authorizations: list[str | None] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Origin

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:
        self.server.cookies_seen.append(self.headers.get("Cookie"))
        self.server.authorizations.append(self.headers.get("Authorization"))
        if "/slow/" in self.path:
            time.sleep(1.0)
        if "/moved/" in self.path:
            self.send_response(302)
            self.send_header("Location", "/enterprise/users/api/v1/workspaces/ws-1/status")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"status": "created"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Set-Cookie", "session=tenant-a; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[_Origin]:
    server = _Origin()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _client(base_url: str, **kwargs: Any) -> SemrushClient:
    kwargs.setdefault("session", PooledSessions().get())
    return SemrushClient(base_url=base_url, token=TOKEN, timeout=5, sleep=lambda s: None, **kwargs)


def test_exchanges_on_a_pooled_session_reuse_one_connection(origin: _Origin) -> None:
    # given: a thread's pooled session, as the workers use it
    client = _client(origin.base_url)
    # when
    statuses = [client.get_workspace_status(workspace_id=f"ws-{i}") for i in range(5)]
    # then: the answers are read, over one kept-alive connection
    assert statuses == ["created"] * 5
    assert origin.connections == 1
    assert origin.authorizations == [f"Bearer {TOKEN}"] * 5


def test_a_cookie_an_answer_sets_never_travels_with_the_next_request(origin: _Origin) -> None:
    # given
    session = PooledSessions().get()
    client = _client(origin.base_url, session=session)
    # when: two exchanges, the first answer setting a cookie
    client.get_workspace_status(workspace_id="ws-1")
    client.get_workspace_status(workspace_id="ws-2")
    # then
    assert origin.cookies_seen == [None, None]
    assert len(session.cookies) == 0


def test_a_closed_session_opens_a_new_connection(origin: _Origin) -> None:
    # given: an exchange made, then the session's connections closed
    session = PooledSessions().get()
    client = _client(origin.base_url, session=session)
    client.get_workspace_status(workspace_id="ws-1")
    session.close()
    # when
    status = client.get_workspace_status(workspace_id="ws-2")
    # then
    assert status == "created"
    assert origin.connections == 2


def test_each_thread_has_its_own_pooled_session() -> None:
    # given
    seen: list[object] = []
    # when
    thread = threading.Thread(target=lambda: seen.append(pooled_session()))
    thread.start()
    thread.join()
    # then
    assert pooled_session() is pooled_session()
    assert seen[0] is not pooled_session()


def test_a_redirect_is_not_followed(origin: _Origin) -> None:
    # given
    client = _client(origin.base_url)
    # when / then: the 302 is an error of its own, not a second request
    with pytest.raises(SemrushError) as raised:
        client.get_workspace_status(workspace_id="moved")
    assert type(raised.value) is SemrushError
    assert raised.value.status == 302
    assert len(origin.authorizations) == 1


def test_a_refused_connection_is_a_network_error_and_a_post_is_not_ambiguous() -> None:
    # given: a port nobody listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}")
    # when / then: nothing reached a server, so the create is known not to have happened
    with pytest.raises(SemrushNetworkError) as raised:
        client.create_subworkspace(parent_id="p", title="Acme")
    assert type(raised.value) is SemrushNetworkError
    assert raised.value.ambiguous is False


def test_an_answer_later_than_the_timeout_is_a_timeout_error(origin: _Origin) -> None:
    # given
    client = SemrushClient(
        base_url=origin.base_url, token=TOKEN, timeout=0.2, max_retries=0, sleep=lambda s: None
    )
    # when / then
    with pytest.raises(SemrushTimeoutError) as raised:
        client.get_workspace_status(workspace_id="slow")
    assert raised.value.status is None
    assert raised.value.detail.startswith("ReadTimeout")
