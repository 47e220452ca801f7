"""The admin login locks out repeated failures (SPEC §10.5, django-axes): after
AXES_FAILURE_LIMIT wrong passwords for one user name from one address, even the right password
is refused until the cool-off passes or an operator runs `manage.py axes_reset`."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture
def superuser(db):  # type: ignore[no-untyped-def]
    return get_user_model().objects.create_superuser("root", "root@example.com", "right-pw")


def _login(client: Client, password: str, username: str = "root"):  # type: ignore[no-untyped-def]
    return client.post(LOGIN, {"username": username, "password": password})


def test_after_the_failure_limit_the_right_password_is_refused(superuser, settings):
    # given
    limit = settings.AXES_FAILURE_LIMIT
    client = Client()
    # when N wrong passwords are tried
    failures = [_login(client, f"wrong-{n}").status_code for n in range(limit)]
    # then the last one locks the account out for this address
    assert failures == [200] * (limit - 1) + [429]
    # when the right password follows
    response = _login(client, "right-pw")
    # then it is refused, and no session is opened
    assert response.status_code == 429
    assert "sessionid" not in response.cookies
    assert client.get("/admin/").status_code == 302


def test_fewer_failures_than_the_limit_do_not_lock_out(superuser, settings):
    # given
    client = Client()
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, f"wrong-{n}")
    # when
    response = _login(client, "right-pw")
    # then
    assert response.status_code == 302
    assert response.headers["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_axes_reset_lifts_the_lockout(superuser, settings):
    # given a locked-out user
    client = Client()
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login(client, f"wrong-{n}")
    assert _login(client, "right-pw").status_code == 429
    # when the operator resets it
    call_command("axes_reset", verbosity=0)
    # then
    assert _login(client, "right-pw").status_code == 302
