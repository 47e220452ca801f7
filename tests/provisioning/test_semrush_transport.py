"""The Semrush client's pooled transport over real HTTP (`_SemrushAdapter`): a local server
stands in for Semrush, so the adapter's own steps run (the `responses` mocks replace them)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from provisioning.semrush import SemrushClient
from provisioning.semrush.client import _PooledSessions, _SemrushAdapter


class _Origin(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.cookies_seen: list[str | None] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Origin

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:
        self.server.cookies_seen.append(self.headers.get("Cookie"))
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


def test_exchanges_reuse_one_pool_and_one_connection_per_origin(origin: _Origin) -> None:
    # given: a thread's pooled session, as the workers use it
    session = _PooledSessions().get()
    adapter = session.get_adapter("http://example.test/")
    base = f"http://127.0.0.1:{origin.server_address[1]}"
    client = SemrushClient(base_url=base, token="t", timeout=5, session=session)
    # when
    statuses = [client.get_workspace_status(workspace_id=f"ws-{i}") for i in range(5)]
    # then: the answers are read, through one pool and one kept-alive connection
    assert isinstance(adapter, _SemrushAdapter)
    assert statuses == ["created"] * 5
    assert len(adapter._origin_pools) == 1
    assert origin.connections == 1


def test_a_cookie_an_answer_sets_never_travels_with_the_next_request(origin: _Origin) -> None:
    # given
    session = _PooledSessions().get()
    base = f"http://127.0.0.1:{origin.server_address[1]}"
    client = SemrushClient(base_url=base, token="t", timeout=5, session=session)
    # when: two exchanges, the first answer setting a cookie
    client.get_workspace_status(workspace_id="ws-1")
    client.get_workspace_status(workspace_id="ws-2")
    # then
    assert origin.cookies_seen == [None, None]
    assert len(session.cookies) == 0


def test_a_closed_adapter_opens_anew(origin: _Origin) -> None:
    # given: an exchange made, then the adapter closed (its pools and their connections)
    session = _PooledSessions().get()
    adapter = session.get_adapter("http://example.test/")
    assert isinstance(adapter, _SemrushAdapter)
    base = f"http://127.0.0.1:{origin.server_address[1]}"
    client = SemrushClient(base_url=base, token="t", timeout=5, session=session)
    client.get_workspace_status(workspace_id="ws-1")
    first = next(iter(adapter._origin_pools.values()))
    adapter.close()
    # when
    status = client.get_workspace_status(workspace_id="ws-2")
    # then
    assert status == "created"
    assert next(iter(adapter._origin_pools.values())) is not first
    assert origin.connections == 2


def _prepared_by_requests(
    client: SemrushClient,
    method: str,
    url: str,
    params: dict[str, str] | None,
    data: bytes | None,
    headers: dict[str, str],
) -> requests.PreparedRequest:
    prepared = requests.PreparedRequest()
    prepared.prepare(
        method=method,
        url=url,
        headers={**client._session.headers, **headers},
        data=data,
        params=params,
    )
    return prepared


@pytest.mark.parametrize(
    ("method", "path", "params", "data"),
    [
        ("GET", "/enterprise/users/api/v1/workspaces/a%2Fb%20c/status", None, None),
        ("GET", "/enterprise/projects/api/v1/workspaces/w/projects", {"page": "2"}, None),
        ("POST", "/enterprise/projects/api/v1/workspaces/w/projects", {"draft": "true"}, b"{}"),
        ("POST", "/enterprise/projects/api/v1/workspaces/w/projects/p/publish", None, None),
        ("PATCH", "/enterprise/projects/api/v1/workspaces/w/projects/p", None, b'{"u": 1}'),
        ("DELETE", "/enterprise/users/api/v1/workspaces/%C3%A9t%C3%A9", {"q": "a b&c"}, None),
    ],
)
@pytest.mark.parametrize(
    "base", ["https://api.semrush.com", "http://127.0.0.1:8765/prefix", "https://bücher.example"]
)
def test_a_request_is_prepared_as_requests_prepares_it(
    base: str,
    method: str,
    path: str,
    params: dict[str, str] | None,
    data: bytes | None,
) -> None:
    # given
    client = SemrushClient(base_url=base, token="t")
    headers = {"Authorization": "Bearer t", "Accept": "application/json"}
    url = client.base_url + path
    # when
    ours = client._prepare(method, url, params=params, data=data, headers=headers)
    theirs = _prepared_by_requests(client, method, url, params, data, headers)
    # then: what goes on the wire is the same
    assert (ours.method, ours.url, ours.body) == (theirs.method, theirs.url, theirs.body)
    assert dict(ours.headers) == dict(theirs.headers)
    assert list(ours.headers) == list(theirs.headers)
    assert ours.hooks == theirs.hooks


def test_only_a_base_url_requests_sends_as_it_is_takes_the_short_way() -> None:
    assert SemrushClient(base_url="https://api.semrush.com", token="t")._plain_base is True
    assert SemrushClient(base_url="https://bücher.example", token="t")._plain_base is False
    assert SemrushClient(base_url="https://x.example/a b", token="t")._plain_base is False
