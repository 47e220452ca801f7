"""The admin login locks out repeated failures (SPEC §10.5, django-axes): after
AXES_FAILURE_LIMIT wrong passwords for one user name from one address, even the right password
is refused until the cool-off passes or an operator runs `manage.py axes_reset`; and after
AXES_ADDRESS_FAILURE_LIMIT failures from one address across user names, that address is
(SPEC §11.4); and after AXES_USERNAME_FAILURE_LIMIT failures for one user name from any mix of
addresses, that user name is (SPEC §13.6)."""

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


def test_failures_from_one_address_across_user_names_lock_the_address_out(superuser, settings):
    # given one address trying many user names, each fewer times than the per-name limit
    settings.AXES_ADDRESS_FAILURE_LIMIT = 8
    client = Client()
    codes = [_login(client, "wrong", username=f"user-{n}").status_code for n in range(8)]
    # then the address is locked out once it reaches its own limit
    assert codes == [200] * 7 + [429]
    # even for the right password of another user name
    response = _login(client, "right-pw")
    assert response.status_code == 429
    assert "sessionid" not in response.cookies


def test_another_address_is_not_locked_out_by_them(superuser, settings):
    # given one address locked out across user names
    settings.AXES_ADDRESS_FAILURE_LIMIT = 3
    for n in range(3):
        _login(Client(REMOTE_ADDR="10.0.0.7"), "wrong", username=f"user-{n}")
    # when another address logs in
    response = _login(Client(REMOTE_ADDR="10.0.0.8"), "right-pw")
    # then
    assert response.status_code == 302


def test_failures_for_one_user_name_from_many_addresses_lock_the_name_out(superuser, settings):
    """SPEC §13.6: one wrong password from each of many addresses (of one IPv6 range, say):
    no pair and no address reaches its limit, the user name does."""
    # given
    settings.AXES_USERNAME_FAILURE_LIMIT = 6
    # when each address tries one wrong password
    codes = [
        _login(Client(REMOTE_ADDR=f"2001:db8::{n + 1:x}"), f"wrong-{n}").status_code
        for n in range(6)
    ]
    # then the user name is locked out once it reaches its own limit
    assert codes == [200] * 5 + [429]
    # even for the right password from yet another address
    response = _login(Client(REMOTE_ADDR="2001:db8::ff"), "right-pw")
    assert response.status_code == 429
    assert "sessionid" not in response.cookies
    # while another user name from those addresses is not locked out
    get_user_model().objects.create_superuser("ops", "ops@example.com", "ops-pw")
    assert _login(Client(REMOTE_ADDR="2001:db8::1"), "ops-pw", username="ops").status_code == 302


def test_fewer_failures_for_a_user_name_than_its_limit_do_not_lock_it_out(superuser, settings):
    settings.AXES_USERNAME_FAILURE_LIMIT = 6
    for n in range(5):
        _login(Client(REMOTE_ADDR=f"2001:db8::{n + 1:x}"), f"wrong-{n}")
    assert _login(Client(REMOTE_ADDR="2001:db8::ff"), "right-pw").status_code == 302
