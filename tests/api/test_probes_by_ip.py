"""Probes by IP (SPEC §12.4): `/healthz` and `/readyz` answer whatever the `Host`, HTTPS
redirect on included (a probe speaks plain HTTP to the loopback); any other request for a host
not allowed answers the JSON envelope, 400, with one WARNING line (Django's line of every 400)
and no traceback; the refused host is on an INFO line. Found from outside: a 400 HTML page and
an ERROR traceback in the log."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from serenity.models import Organization


@pytest.mark.parametrize("host", ["10.20.30.40:8000", "127.0.0.1:8000", "[::1]:8000"])
def test_healthz_answers_a_probe_by_ip(db, settings, caplog, host):
    # given the production switches: an allowed name only, HTTPS redirect on
    settings.ALLOWED_HOSTS = ["serenity.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    # when
    with caplog.at_level(logging.INFO):
        response = Client().get("/healthz", HTTP_HOST=host)
    # then
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_readyz_answers_a_probe_by_ip(db, settings):
    # given
    settings.ALLOWED_HOSTS = ["serenity.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    # when
    response = Client().get("/readyz", HTTP_HOST="10.20.30.40")
    # then
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


def test_a_probe_still_refuses_other_methods_by_ip(db, settings):
    # given
    settings.ALLOWED_HOSTS = ["serenity.example.com"]
    # when
    response = Client().post("/healthz", HTTP_HOST="10.20.30.40")
    # then
    assert response.status_code == 405
    assert response.json() == {"error": "methodNotAllowed", "message": "Method not allowed."}


NO_ORG = "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize("path", [f"/v2/orgs/{NO_ORG}/brands", "/admin/"])
def test_a_host_not_allowed_elsewhere_gets_the_envelope_and_one_warning(db, settings, caplog, path):
    # given
    settings.ALLOWED_HOSTS = ["serenity.example.com"]
    # when
    with caplog.at_level(logging.INFO):
        response = Client().post(path, {"name": "x"}, HTTP_HOST="evil.example")
    # then
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": "invalidRequest",
        "message": "This host is not served here.",
    }
    assert [(r.name, r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("serenity.health", "INFO", "request refused: host not allowed", None),
        ("django.request", "WARNING", f"Bad Request: {path}", None),
    ]
    assert caplog.records[0].host == "evil.example"
    assert Organization.objects.count() == 0


def test_an_allowed_host_is_served_as_before(db, settings):
    # given
    settings.ALLOWED_HOSTS = ["serenity.example.com"]
    # when
    response = Client().get("/nowhere", HTTP_HOST="serenity.example.com")
    # then
    assert response.status_code == 404
    assert response.json() == {"error": "notFound", "message": "Not found."}


@pytest.mark.parametrize("host", ["10.20.30.40:8000", "127.0.0.1:8000", "[::1]:8000"])
def test_metrics_answer_a_scrape_by_ip_with_the_token(db, settings, host):
    # given the production switches and a metrics token (SPEC §13.6: found from outside, 400)
    settings.ALLOWED_HOSTS = ["serenity.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    settings.SERENITY_METRICS_TOKEN = "scrape-token"
    # when
    response = Client().get("/metrics", HTTP_HOST=host, HTTP_AUTHORIZATION="Bearer scrape-token")
    # then
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert b"# TYPE " in response.content


def test_metrics_by_ip_still_want_the_token(db, settings):
    # given
    settings.ALLOWED_HOSTS = ["serenity.example.com"]
    settings.SERENITY_METRICS_TOKEN = "scrape-token"
    # when
    response = Client().get("/metrics", HTTP_HOST="10.20.30.40", HTTP_AUTHORIZATION="Bearer no")
    # then
    assert response.status_code == 401
    assert response.json() == {
        "error": "authenticationRequired",
        "message": "Authentication credentials were not provided or are invalid.",
    }
