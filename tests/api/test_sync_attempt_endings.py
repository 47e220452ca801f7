"""Sync work ends its attempt on every exit (SPEC §11.5; since §13.5 its chain, run at once,
ends it): an unexpected exception from the upstream client (not a domain error) answers 500,
leaves no pending attempt behind, and the brand can be provisioned again at once (no 409 until
the stale threshold)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import pytest

from provisioning.models import AttemptReason, AttemptStatus, ProvisioningAttempt
from provisioning.semrush import SemrushClient
from serenity.models import Brand, Market
from tests.support import assert_error


@contextmanager
def client_raises(method: str) -> Iterator[mock.MagicMock]:
    """Every call of the Semrush client's `method` raises a RuntimeError (a bug, not an upstream
    answer: nothing translates it into a domain error)."""
    with mock.patch.object(
        SemrushClient, method, autospec=True, side_effect=RuntimeError("boom")
    ) as patched:
        yield patched


def serenity_path(caller, brand, route: str) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}/serenity/{route}"


def attempts_of(brand_id) -> list[tuple[str, str | None]]:  # type: ignore[no-untyped-def]
    return [
        (a.status, a.reason)
        for a in ProvisioningAttempt.objects.filter(brand_id=brand_id).order_by("created_at")
    ]


@pytest.mark.parametrize(
    ("body", "failing"),
    [
        # branch B: the pointer's one status read raises
        ({}, "get_workspace_status"),
        # branch C: the settle read raises, before the workspace is confirmed
        (
            {"brandDomain": "acme.example", "markets": [{"market": "US", "languageCode": "en"}]},
            "get_workspace_status",
        ),
    ],
)
def test_an_unexpected_error_in_sync_activate_ends_its_attempt(
    sw_writer, sim, active_brand, body, failing
):
    # given the upstream client raising an unexpected error
    with client_raises(failing) as raised:
        # when
        response = sw_writer.post(serenity_path(sw_writer, active_brand, "activate"), body)
    # then 500, and the attempt is failed/unexpected, not pending
    assert raised.called
    assert_error(response, 500, "internalServerError")
    assert attempts_of(active_brand.id) == [(AttemptStatus.FAILED, AttemptReason.UNEXPECTED)]
    # and the brand activates again right after (no 409)
    again = sw_writer.post(serenity_path(sw_writer, active_brand, "activate"), body)
    assert again.status_code == 200, again.json()
    assert attempts_of(active_brand.id)[-1] == (AttemptStatus.READY, None)


def test_an_unexpected_error_after_the_workspace_is_in_place_leaves_the_attempt_ready(
    sw_writer, sim, active_brand
):
    # given branch C whose project create raises (the workspace has been confirmed ready)
    body = {"brandDomain": "acme.example", "markets": [{"market": "US", "languageCode": "en"}]}
    with client_raises("create_project"):
        # when
        response = sw_writer.post(serenity_path(sw_writer, active_brand, "activate"), body)
    # then 500; the attempt is ready (the workspace is valid), the slice is free again
    assert_error(response, 500, "internalServerError")
    assert attempts_of(active_brand.id) == [(AttemptStatus.READY, None)]
    assert not Market.objects.filter(brand=active_brand).exists()
    # and the activation succeeds when repeated
    again = sw_writer.post(serenity_path(sw_writer, active_brand, "activate"), body)
    assert again.status_code == 200, again.json()
    assert [m.status for m in Market.objects.filter(brand=active_brand)] == ["live"]


def test_an_unexpected_error_in_sync_deactivate_ends_its_attempt(sw_writer, sim, active_brand):
    # given the workspace's project listing raising an unexpected error
    with client_raises("list_projects"):
        # when
        response = sw_writer.post(serenity_path(sw_writer, active_brand, "deactivate"))
    # then 500, pointer untouched, the attempt failed/unexpected
    assert_error(response, 500, "internalServerError")
    assert attempts_of(active_brand.id) == [(AttemptStatus.FAILED, AttemptReason.UNEXPECTED)]
    active_brand.refresh_from_db()
    assert active_brand.semrush_sub_workspace_id is not None
    # and the brand deactivates right after (no 409)
    again = sw_writer.post(serenity_path(sw_writer, active_brand, "deactivate"))
    assert again.status_code == 200, again.json()
    assert attempts_of(active_brand.id)[-1] == (AttemptStatus.READY, None)


@pytest.mark.parametrize(
    ("failing", "attempt"),
    [
        # the pointer's settle read raises: before promotion, the attempt fails
        ("get_workspace_status", (AttemptStatus.FAILED, AttemptReason.UNEXPECTED)),
        # the project create raises once the workspace is promoted: the attempt is ready, as
        # a chain's is (SPEC §6.3; the request runs the chain's steps, §12.3)
        ("create_project", (AttemptStatus.READY, None)),
    ],
)
def test_an_unexpected_error_in_sync_market_create_ends_its_attempt(
    sw_writer, sim, active_brand, failing, attempt
):
    # given the upstream client raising an unexpected error
    path = serenity_path(sw_writer, active_brand, "markets")
    with client_raises(failing):
        # when
        response = sw_writer.post(path, {"market": "US", "languageCode": "en"})
    # then 500, the attempt ended, the reservation freed
    assert_error(response, 500, "internalServerError")
    assert attempts_of(active_brand.id) == [attempt]
    assert not Market.objects.filter(brand=active_brand).exists()
    # and the market is created right after (no 409)
    again = sw_writer.post(path, {"market": "US", "languageCode": "en"})
    assert again.status_code == 201, again.json()
    assert attempts_of(active_brand.id)[-1] == (AttemptStatus.READY, None)


def test_an_unexpected_error_in_sync_brand_create_leaves_nothing(sw_writer, sim):
    # given the sub-workspace create raising an unexpected error
    path = f"/v2/orgs/{sw_writer.org.id}/brands"
    body = {
        "name": "Acme",
        "baseUrl": "https://acme.example",
        "semrushMarket": {"market": "US", "languageCode": "en"},
    }
    with client_raises("create_subworkspace"):
        # when
        response = sw_writer.post(path, body)
    # then 500, and the brand is gone with its attempt and reservation
    assert_error(response, 500, "internalServerError")
    assert not Brand.objects.exists()
    assert not ProvisioningAttempt.objects.exists()
    assert not Market.objects.exists()
    # and the same brand is created right after (no 409 brandExists)
    again = sw_writer.post(path, body)
    assert again.status_code == 201, again.json()
    [brand] = Brand.objects.all()
    assert attempts_of(brand.pk) == [(AttemptStatus.READY, None)]
