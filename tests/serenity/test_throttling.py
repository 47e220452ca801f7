"""Throttles (SPEC §10.5): writes per token and failed authentications per client address
answer 429 `rateLimited` with `Retry-After`; authenticated JSON answers are `no-store`.

Each test sets tiny per-minute rates and its own key prefix in the throttle cache (a fresh
namespace, so neither an earlier run nor a concurrent one counts here). Requests go through
Django's test client only: no network traffic at all.
"""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from api.throttling import CACHE_OUTAGE
from serenity.models import Brand
from tests.conftest import make_caller
from tests.factories import OrganizationFactory
from tests.harness import free_port

RATE_LIMITED = {"error": "rateLimited", "message": "Too many requests."}
UNAUTHENTICATED = {
    "error": "authenticationRequired",
    "message": "Authentication credentials were not provided or are invalid.",
}


@pytest.fixture(autouse=True)
def no_cache_outage():  # type: ignore[no-untyped-def]
    CACHE_OUTAGE.end()
    yield
    CACHE_OUTAGE.end()


@pytest.fixture
def throttle_namespace(settings):  # type: ignore[no-untyped-def]
    settings.CACHES = {
        **settings.CACHES,
        "throttle": {**settings.CACHES["throttle"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"},
    }
    return settings


@pytest.fixture
def plain_org(db):  # type: ignore[no-untyped-def]
    return OrganizationFactory(serenity_enabled=False)


def _retry_after(response) -> int:  # type: ignore[no-untyped-def]
    return int(response.headers["Retry-After"])


def _create_brand(caller, name: str):  # type: ignore[no-untyped-def]
    return caller.post(
        f"/v2/orgs/{caller.org.id}/brands", {"name": name, "baseUrl": "https://acme.example"}
    )


def test_the_throttle_cache_is_redis_when_the_broker_is_redis(settings):
    # then (the suite's broker is Redis)
    assert settings.CACHES["throttle"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert settings.CACHES["throttle"]["LOCATION"].startswith("redis://127.0.0.1:")


def test_writes_over_the_rate_are_429_per_token_and_write_nothing(throttle_namespace, plain_org):
    # given a rate of 2 writes a minute per token
    throttle_namespace.SERENITY_THROTTLE_WRITES = "2/min"
    caller = make_caller(plain_org)
    other = make_caller(plain_org)
    # when the token writes three times
    answers = [_create_brand(caller, f"Brand {n}") for n in range(3)]
    # then the third is refused, with the envelope and Retry-After
    assert [a.status_code for a in answers] == [201, 201, 429]
    assert answers[2].json() == RATE_LIMITED
    assert 1 <= _retry_after(answers[2]) <= 60
    assert sorted(Brand.objects.values_list("name", flat=True)) == ["Brand 0", "Brand 1"]
    # and reads are not throttled, nor is another token
    assert caller.get(f"/v2/orgs/{plain_org.id}/brands").status_code == 200
    assert _create_brand(other, "Brand 3").status_code == 201


def test_failed_authentications_per_address_are_429_but_a_right_token_goes_through(
    throttle_namespace, plain_org
):
    # given a rate of 3 failed authentications a minute per address
    throttle_namespace.SERENITY_THROTTLE_AUTH_FAILURES = "3/min"
    path = f"/v2/orgs/{plain_org.id}/brands"
    guesser = APIClient()
    # when one address tries wrong tokens
    answers = [guesser.get(path, HTTP_AUTHORIZATION=f"Bearer srn_wrong{n}") for n in range(4)]
    # then the first three are 401 and the fourth is 429
    assert [a.status_code for a in answers] == [401, 401, 401, 429]
    assert answers[0].json() == UNAUTHENTICATED
    assert answers[0].headers["WWW-Authenticate"] == "Bearer"
    assert answers[3].json() == RATE_LIMITED
    assert "WWW-Authenticate" not in answers[3].headers
    assert 1 <= _retry_after(answers[3]) <= 60
    # and a right token from that address is never refused by the failure limit (SPEC §11.4:
    # one bad script behind a NAT must not lock out every client behind it)
    caller = make_caller(plain_org)
    right = guesser.get(path, HTTP_AUTHORIZATION=f"Bearer {caller.token}")
    assert right.status_code == 200
    # while wrong ones still are, and a forged X-Forwarded-For does not make it another address
    forged = guesser.get(
        path, HTTP_AUTHORIZATION="Bearer srn_wrong9", HTTP_X_FORWARDED_FOR="192.0.2.10"
    )
    assert forged.status_code == 429
    malformed = guesser.get(path, HTTP_AUTHORIZATION="Basic abc")
    assert malformed.status_code == 429


def test_successful_authentications_are_not_counted(throttle_namespace, plain_org):
    # given
    throttle_namespace.SERENITY_THROTTLE_AUTH_FAILURES = "1/min"
    caller = make_caller(plain_org)
    # when a right token is used more often than the failure rate
    answers = [caller.get(f"/v2/orgs/{plain_org.id}/brands") for _ in range(3)]
    # then
    assert [a.status_code for a in answers] == [200, 200, 200]


def test_an_unreachable_throttle_cache_lets_requests_through(settings, plain_org):
    # given a throttle cache nobody listens on (a free loopback port)
    settings.CACHES = {
        **settings.CACHES,
        "throttle": {
            **settings.CACHES["throttle"],
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
        },
    }
    settings.SERENITY_THROTTLE_WRITES = "1/min"
    caller = make_caller(plain_org)
    # when
    answers = [_create_brand(caller, f"Brand {n}") for n in range(2)]
    bad = APIClient().get(f"/v2/orgs/{plain_org.id}/brands", HTTP_AUTHORIZATION="Bearer srn_wrong")
    # then the service answers as without throttles
    assert [a.status_code for a in answers] == [201, 201]
    assert bad.status_code == 401
    # and the process leaves the cache alone for a while (one timeout, not two per request)
    assert CACHE_OUTAGE.active


def test_authenticated_json_answers_are_no_store(writer, anonymous):
    # when
    ok = writer.get(f"/v2/orgs/{writer.org.id}/brands")
    refused = anonymous.get(
        f"/v2/orgs/{writer.org.id}/brands", HTTP_AUTHORIZATION="Bearer srn_wrong"
    )
    health = anonymous.get("/healthz")
    # then
    assert ok.status_code == 200
    assert ok.headers["Cache-Control"] == "no-store"
    assert refused.status_code == 401
    assert refused.headers["Cache-Control"] == "no-store"
    assert "Cache-Control" not in health.headers
