"""A database that refuses connections is a 503 (SPEC §13.6): found from outside, job polls
answered 500 on "too many clients" with several stacks on one PostgreSQL. The refusal here is
PostgreSQL's own: the requests connect as a role whose connection limit is 0 ("too many
connections for role"), or to a port where nothing listens. Each answers 503
`databaseUnavailable` with `Retry-After`, the envelope, and one WARNING line naming the failure
beside Django's line of every 5xx, with no traceback."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connections
from django.test import Client

UNAVAILABLE = {
    "error": "databaseUnavailable",
    "message": "The database is not accepting connections; retry later.",
}
ORG, BRAND, JOB = (str(uuid.uuid4()) for _ in range(3))


def _admin_url() -> str:
    settings_dict = connections["default"].settings_dict
    return (
        f"postgresql://{settings_dict['USER']}@{settings_dict['HOST'] or '127.0.0.1'}:"
        f"{settings_dict['PORT'] or 5432}/postgres"
    )


@pytest.fixture
def full_role() -> Iterator[str]:
    """A login role PostgreSQL lets no connection in for (CONNECTION LIMIT 0)."""
    name = f"test_full_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_admin_url(), autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN CONNECTION LIMIT 0')
    yield name
    with psycopg.connect(_admin_url(), autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{name}"')


@pytest.fixture(params=["too many connections", "connection refused"])
def refusing_database(request, full_role, django_db_blocker) -> Iterator[None]:
    """The default connection, pointed where PostgreSQL refuses it, for the test's requests."""
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    with django_db_blocker.unblock():
        connection.close()
        if request.param == "too many connections":
            connection.settings_dict.update(USER=full_role, PASSWORD="")
        else:
            connection.settings_dict.update(HOST="127.0.0.1", PORT="1")
        try:
            yield
        finally:
            connection.close()
            connection.settings_dict.clear()
            connection.settings_dict.update(saved)


def _warnings_only(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, object]]:
    return [
        (r.levelname, r.getMessage(), r.exc_info)
        for r in caplog.records
        if r.levelno >= logging.WARNING
    ]


def test_a_job_poll_answers_503_database_unavailable(refusing_database, caplog):
    # when a poll comes in (its token is read from the database first)
    with caplog.at_level(logging.INFO):
        response = Client().get(
            f"/v2/orgs/{ORG}/brands/{BRAND}/serenity/jobs/{JOB}",
            HTTP_AUTHORIZATION="Bearer some-token",
        )
    # then
    assert response.status_code == 503
    assert response.json() == UNAVAILABLE
    assert response["Retry-After"] == "5"
    assert _warnings_only(caplog) == [
        ("WARNING", "database unavailable", None),
        # Django's line of every 5xx (upstreamBusy's too), without a traceback
        (
            "ERROR",
            f"Service Unavailable: /v2/orgs/{ORG}/brands/{BRAND}/serenity/jobs/{JOB}",
            None,
        ),
    ]


def test_the_admin_answers_503_database_unavailable(refusing_database, caplog):
    # when a signed-in page reads its session
    with caplog.at_level(logging.INFO):
        response = Client(HTTP_COOKIE="sessionid=" + "a" * 32).get("/admin/")
    # then
    assert response.status_code == 503
    assert response.json() == UNAVAILABLE
    assert response["Retry-After"] == "5"
    assert [r.exc_info for r in caplog.records] == [None] * len(caplog.records)
    assert "Traceback" not in caplog.text


def test_metrics_answer_503_database_unavailable(refusing_database, caplog):
    # when a loopback scrape reads the job counts
    with caplog.at_level(logging.INFO):
        response = Client().get("/metrics")
    # then
    assert response.status_code == 503
    assert response.json() == UNAVAILABLE
    assert response["Retry-After"] == "5"
    assert [r.exc_info for r in caplog.records] == [None] * len(caplog.records)
