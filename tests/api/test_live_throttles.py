"""The throttles count in a cache every process shares (SPEC §10.5): against the API under
gunicorn with two worker processes, over HTTP on 127.0.0.1, each request on a new connection
(so that both workers serve some), with tiny per-minute rates. Bounded: a dozen requests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
import requests

from tests.harness import Stack, StackConfig

pytestmark = pytest.mark.live

RATE_LIMITED = {"error": "rateLimited", "message": "Too many requests."}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    config = StackConfig(
        workers=0,
        beat=False,
        api_workers=2,
        api_threads=1,
        settings={"SERENITY_THROTTLE_WRITES": "3/min", "SERENITY_THROTTLE_AUTH_FAILURES": "3/min"},
    )
    stack = Stack(config, name="throttles")
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def _request(method: str, url: str, token: str, body: object = None) -> requests.Response:
    # A new connection per request: gunicorn's two workers both take some.
    with requests.Session() as session:
        return session.request(
            method,
            url,
            json=body,
            headers={"Authorization": f"Bearer {token}", "Connection": "close"},
            timeout=10,
        )


# In file order: the writes first, since the failures test leaves 127.0.0.1 over its limit.


def test_writes_are_counted_per_token_across_workers(stack):
    # given two tokens of one org
    org_id, token = stack.create_org_and_token()
    other = stack.create_token(org_id)
    url = f"{stack.api_url}/v2/orgs/{org_id}/brands"
    # when one token writes five times (an invalid body: the throttle comes before validation,
    # so nothing is written either way)
    answers = [_request("POST", url, token, {}) for _ in range(5)]
    # then the fourth and later are refused, whichever worker served them
    assert [a.status_code for a in answers] == [400, 400, 400, 429, 429]
    assert answers[3].json() == RATE_LIMITED
    assert 1 <= int(answers[3].headers["Retry-After"]) <= 60
    # and reads of that token, and writes of another, go through
    assert _request("GET", url, token).status_code == 200
    assert _request("POST", url, other, {}).status_code == 400
    # and the counts are in the stack's Redis, where every process reads them
    keys = redis.Redis(port=stack.redis_port).keys("serenity-throttle:*throttle_writes_*")
    assert len(keys) == 2


def test_failed_authentications_are_counted_across_workers(stack):
    # given
    org_id, token = stack.create_org_and_token()
    url = f"{stack.api_url}/v2/orgs/{org_id}/brands"
    # when one address sends wrong tokens
    answers = [_request("GET", url, f"srn_wrong{n}") for n in range(5)]
    # then the fourth and later are refused, whichever worker served them
    assert [a.status_code for a in answers] == [401, 401, 401, 429, 429]
    assert answers[3].json() == RATE_LIMITED
    assert 1 <= int(answers[3].headers["Retry-After"]) <= 60
    assert answers[3].headers["Cache-Control"] == "no-store"
    # but never the right token from that address (the limit refuses failures only)
    assert _request("GET", url, token).status_code == 200


def test_gunicorn_hands_a_chunked_body_over_read_and_bounded(stack):
    # (SPEC §11.4; tests/api/test_chunked_bodies.py has the cases, this is gunicorn's side.)
    # given a fresh token (the writes rate is per token)
    org_id, token = stack.create_org_and_token()
    url = f"{stack.api_url}/v2/orgs/{org_id}/brands"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def chunks(*parts: bytes) -> Iterator[bytes]:  # requests sends a generator chunked
        yield from parts

    # when
    created = requests.post(
        url,
        data=chunks(b'{"name": "Chunked", ', b'"status": "pending"}'),
        headers=headers,
        timeout=10,
    )
    too_large = requests.post(
        url,
        data=chunks(b'{"name": "', b"x" * (1024 * 1024), b'"}'),
        headers=headers,
        timeout=30,
    )
    # then
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "Chunked"
    assert too_large.status_code == 413
    assert too_large.json()["error"] == "requestTooLarge"
