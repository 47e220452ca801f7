"""Deploy settings take effect (SPEC §10.5): the SSL redirect (probes exempt), HSTS behind a
proxy that says https; all of them follow from one switch, SERENITY_TLS (SPEC §12.3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]

_PRINT_DEPLOY_SETTINGS = """
import json
from django.conf import settings as s
print(json.dumps({name: getattr(s, name, None) for name in (
    "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
    "CSRF_TRUSTED_ORIGINS", "SECURE_PROXY_SSL_HEADER")}))
"""


def _deploy_settings(**variables: str) -> dict[str, object]:
    """The deploy settings of a process started with the production settings module and
    these variables (beside the secrets it needs)."""
    completed = subprocess.run(
        [sys.executable, "-c", _PRINT_DEPLOY_SETTINGS],
        cwd=str(ROOT),
        env={
            "PATH": os.environ.get("PATH", ""),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "SECRET_KEY": "deploy-settings-test-secret-key",
            "FIELD_ENCRYPTION_KEY": "deploy-settings-test-field-encryption-key",
            "SERENITY_VAR_DIR": os.environ["SERENITY_VAR_DIR"],
            **variables,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def test_tls_on_behind_a_proxy_derives_every_deploy_security_setting():
    # when
    derived = _deploy_settings(
        SERENITY_TLS="true",
        SERENITY_NUM_PROXIES="1",
        ALLOWED_HOSTS="serenity.example.com,.example.org",
    )
    # then
    assert derived == {
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "CSRF_TRUSTED_ORIGINS": ["https://serenity.example.com", "https://*.example.org"],
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
    }


def test_tls_off_derives_plain_http_and_no_proxy_header():
    # when: TLS on but no declared proxy, and TLS off
    direct = _deploy_settings(SERENITY_TLS="true", ALLOWED_HOSTS="serenity.example.com")
    plain = _deploy_settings(ALLOWED_HOSTS="serenity.example.com")
    # then a forged X-Forwarded-Proto is never believed without a proxy
    assert direct["SECURE_PROXY_SSL_HEADER"] is None
    assert direct["SECURE_HSTS_SECONDS"] == 31536000
    assert plain == {
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "CSRF_TRUSTED_ORIGINS": ["http://serenity.example.com"],
        "SECURE_PROXY_SSL_HEADER": None,
    }


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
