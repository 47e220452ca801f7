"""A chunked request body is read, within SERENITY_MAX_BODY_BYTES (else 413), or refused with
411; never taken for an empty body (SPEC §11.4). The requests go through the WSGI application
gunicorn serves (config.wsgi), as gunicorn hands them over: de-chunked, with
`wsgi.input_terminated`, and no Content-Length."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.core import signals
from django.db import close_old_connections

from config.wsgi import application
from serenity.models import Brand
from tests.support import calls


@contextmanager
def _same_connection() -> Iterator[None]:
    """As Django's test client does: the request runs inside the test's transaction."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def _chunked(
    token: str, path: str, body: bytes, content_type: str, *, terminated: bool = True
) -> tuple[int, dict[str, Any]]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "testserver",
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "CONTENT_TYPE": content_type,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if terminated:
        environ["wsgi.input_terminated"] = True
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        answer["status"] = int(status.split()[0])

    with _same_connection():
        chunks = application(environ, start_response)
        content = b"".join(chunks)
        getattr(chunks, "close", lambda: None)()
    return answer["status"], json.loads(content)


def test_a_chunked_text_body_on_deactivate_is_415_and_deactivates_nothing(
    sw_writer, sim, active_brand
):
    # given
    setup = len(calls(sim))
    path = f"/v2/orgs/{sw_writer.org.id}/brands/{active_brand.id}/serenity/deactivate"
    # when
    status, body = _chunked(sw_writer.token, path, b"deactivate please", "text/plain")
    # then: as the same body with a Content-Length (tests/api/test_bad_input.py)
    assert status == 415
    assert body["error"] == "unsupportedMediaType"
    active_brand.refresh_from_db()
    assert active_brand.status == "active"
    assert calls(sim)[setup:] == []


def test_a_chunked_json_body_is_read(sw_writer, sim):
    # when
    status, body = _chunked(
        sw_writer.token,
        f"/v2/orgs/{sw_writer.org.id}/brands",
        json.dumps({"name": "Chunked", "status": "pending"}).encode(),
        "application/json",
    )
    # then
    assert status == 201, body
    assert body["name"] == "Chunked"
    assert Brand.objects.get().name == "Chunked"


def test_a_chunked_body_over_the_limit_is_413_and_writes_nothing(sw_writer, sim, settings):
    # given
    settings.SERENITY_MAX_BODY_BYTES = 64
    payload = json.dumps({"name": "x" * 100, "status": "pending"}).encode()
    # when
    status, body = _chunked(
        sw_writer.token, f"/v2/orgs/{sw_writer.org.id}/brands", payload, "application/json"
    )
    # then
    assert status == 413
    assert body == {"error": "requestTooLarge", "message": "The body is larger than 64 bytes."}
    assert Brand.objects.count() == 0


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_a_chunked_body_the_server_did_not_dechunk_is_411(sw_writer, sim, content_type):
    # when (a server without `wsgi.input_terminated`: the development server)
    status, body = _chunked(
        sw_writer.token,
        f"/v2/orgs/{sw_writer.org.id}/brands",
        b'{"name": "Raw", "status": "pending"}',
        content_type,
        terminated=False,
    )
    # then
    assert status == 411
    assert body["error"] == "lengthRequired"
    assert Brand.objects.count() == 0
