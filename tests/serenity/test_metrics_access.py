"""`/metrics` is not open to anyone (SPEC §11.4): it answers only
`Authorization: Bearer <SERENITY_METRICS_TOKEN>`, or, with no token set, loopback clients only
(the client as the throttles see it: behind the proxy, the address it appended), else 401/403
in the JSON envelope; its labels are bounded (unknown methods count as `other`, org ids only
with SERENITY_METRICS_PER_ORG)."""

from __future__ import annotations

import pytest
from django.test import Client

from provisioning.limiter import MemoryStore
from provisioning.quota import CredentialPermits, Limits

TOKEN = "metrics-token-of-the-scraper-0123456789"
UNAUTHENTICATED = {
    "error": "authenticationRequired",
    "message": "Authentication credentials were not provided or are invalid.",
}
FORBIDDEN = {"error": "forbidden", "message": "You are not allowed to do this."}


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"]
)
def test_with_a_token_set_only_that_token_is_answered(db, settings, authorization):
    # given
    settings.SERENITY_METRICS_TOKEN = TOKEN
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    # when (even from loopback)
    response = Client().get("/metrics", **headers)
    # then
    assert response.status_code == 401
    assert response.json() == UNAUTHENTICATED
    assert response["WWW-Authenticate"] == "Bearer"


def test_with_a_token_set_the_token_is_answered_from_anywhere(db, settings):
    # given
    settings.SERENITY_METRICS_TOKEN = TOKEN
    # when
    response = Client(REMOTE_ADDR="203.0.113.9").get(
        "/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"
    )
    # then
    assert response.status_code == 200
    assert "serenity_jobs_runnable" in response.content.decode()


@pytest.mark.parametrize("address", ["203.0.113.9", "10.0.0.5"])
def test_without_a_token_other_clients_than_loopback_are_refused(db, settings, address):
    # given
    settings.SERENITY_METRICS_TOKEN = ""
    # when
    response = Client(REMOTE_ADDR=address).get("/metrics")
    # then
    assert response.status_code == 403
    assert response.json() == FORBIDDEN


def test_without_a_token_loopback_clients_are_answered(db, settings):
    settings.SERENITY_METRICS_TOKEN = ""
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200


def test_behind_the_proxy_a_relayed_client_is_not_loopback(db, settings):
    # given gunicorn behind a proxy on the same machine (every peer is 127.0.0.1)
    settings.SERENITY_METRICS_TOKEN = ""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    client = Client(REMOTE_ADDR="127.0.0.1")
    # when a remote client's request is relayed (even one claiming to be loopback itself)
    relayed = client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9")
    forged = client.get("/metrics", HTTP_X_FORWARDED_FOR="127.0.0.1, 203.0.113.9")
    # and a local scraper asks directly
    local = client.get("/metrics")
    # then
    assert (relayed.status_code, forged.status_code, local.status_code) == (403, 403, 200)


def test_unknown_methods_are_counted_as_other(db, anonymous):
    # given requests with made-up methods
    for method in ("FOO", "BAR", "PROPFIND"):
        Client().generic(method, "/healthz")
    # when
    text = anonymous.get("/metrics").content.decode()
    # then
    assert 'serenity_http_requests_total{method="other",status="405"}' in text
    for method in ("FOO", "BAR", "PROPFIND"):
        assert f'method="{method}"' not in text


def _permit(org_id: str) -> None:
    permits = CredentialPermits(
        key="k-metrics",
        limits=Limits(rate=1000.0, burst=10),
        org_id=org_id,
        in_step=False,
        store=MemoryStore(),
    )
    permits.acquire("op")


def test_org_ids_appear_only_when_asked_for(db, settings, anonymous):
    # given
    settings.SERENITY_METRICS_PER_ORG = False
    _permit("org-hidden-1")
    settings.SERENITY_METRICS_PER_ORG = True
    _permit("org-shown-2")
    # when
    text = anonymous.get("/metrics").content.decode()
    # then
    assert "org-hidden-1" not in text
    assert 'serenity_upstream_permits_total{org_id="all"}' in text
    assert 'serenity_upstream_permits_total{org_id="org-shown-2"}' in text
