"""Deploy settings from the environment take effect (SPEC §10.5): the SSL redirect (probes
exempt), HSTS behind a proxy that says https, and throttle rates checked at start."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from config.env import env_rate


@pytest.fixture
def https_settings(settings):  # type: ignore[no-untyped-def]
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.SECURE_HSTS_PRELOAD = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    return settings


def test_plain_http_is_redirected_to_https_except_the_probes(https_settings, writer, db):
    # given a client made after the settings (middleware reads them when it is built)
    client = Client()
    # when
    api = client.get(f"/v2/orgs/{writer.org.id}/brands")
    probe = client.get("/healthz")
    # then
    assert api.status_code == 301
    assert api.headers["Location"] == f"https://testserver/v2/orgs/{writer.org.id}/brands"
    assert probe.status_code == 200


def test_https_through_the_proxy_gets_hsts(https_settings, writer, db):
    # given
    client = Client()
    # when
    response = client.get(
        f"/v2/orgs/{writer.org.id}/brands",
        HTTP_AUTHORIZATION=f"Bearer {writer.token}",
        HTTP_X_FORWARDED_PROTO="https",
    )
    # then
    assert response.status_code == 200
    assert (
        response.headers["Strict-Transport-Security"]
        == "max-age=31536000; includeSubDomains; preload"
    )
    assert response.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("raw", ["30/s", "30/min", "100/hour", "1000/day", " 5/m "])
def test_throttle_rates_are_read(monkeypatch, raw):
    # given
    monkeypatch.setenv("SERENITY_TEST_RATE", raw)
    # then
    assert env_rate("SERENITY_TEST_RATE", "1/s") == raw.strip()


@pytest.mark.parametrize("raw", ["30", "0/s", "thirty/s", "30/fortnight", "30/s/2"])
def test_a_bad_throttle_rate_refuses_to_start(monkeypatch, raw):
    # given
    monkeypatch.setenv("SERENITY_TEST_RATE", raw)
    # then
    with pytest.raises(ImproperlyConfigured, match="SERENITY_TEST_RATE must be a rate"):
        env_rate("SERENITY_TEST_RATE", "1/s")
