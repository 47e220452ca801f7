"""`details.jobId` of the 409 `semrush_provisioning_in_progress` is the canonical lower-case
hyphenated UUID of the blocking job, on every path (SPEC §10.2)."""

from __future__ import annotations

import re
from unittest import mock

import pytest

from serenity.models import Brand
from tests.factories import AsyncJobFactory, BrandFactory, ProvisioningAttemptFactory
from tests.support import assert_error, calls, sim_create_workspace

CANONICAL = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.mark.parametrize("status", ["active", "pending"])
@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("markets", {"market": "US", "languageCode": "en"}),
        ("markets", {"market": "US", "languageCode": "en", "async": True}),
        ("activate", {}),
        ("activate", {"async": True}),
        ("activate", {"brandDomain": "acme.example"}),
        ("activate", {"brandDomain": "acme.example", "async": True}),
    ],
)
def test_in_progress_names_the_blocking_job_canonically(sw_writer, sim, status, route, body):
    # given a brand held by an async chain's pending attempt
    brand: Brand = BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status=status,
        base_url="https://acme.example",
        semrush_sub_workspace_id=sim_create_workspace(sim, "Acme"),
    )
    job = AsyncJobFactory(brand=brand)
    ProvisioningAttemptFactory(brand=brand, job=job)
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands/{brand.id}/serenity/{route}", body
    )
    # then
    answer = assert_error(response, 409, "semrush_provisioning_in_progress")
    assert answer["details"] == {"jobId": str(job.id)}
    assert CANONICAL.match(answer["details"]["jobId"])
    assert [c for c in calls(sim)[setup:] if "languages" not in c[1]] == []


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("markets", {"market": "GB", "languageCode": "en"}),
        ("markets", {"market": "GB", "languageCode": "en", "async": True}),
        ("activate", {}),
        ("activate", {"async": True}),
    ],
)
def test_work_on_a_brand_being_created_async_names_its_chain_canonically(
    sw_writer, sim, route, body
):
    # given a brand whose async create (workspace and a market) is still in flight
    with mock.patch("jobs.services.publish_job", return_value=True):
        accepted = sw_writer.post(
            f"/v2/orgs/{sw_writer.org.id}/brands",
            {
                "name": "Acme",
                "baseUrl": "https://acme.example",
                "async": True,
                "semrushMarket": {"market": "US", "languageCode": "en"},
            },
        )
    assert accepted.status_code == 202, accepted.json()
    created = accepted.json()
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands/{created['id']}/serenity/{route}", body
    )
    # then
    answer = assert_error(response, 409, "semrush_provisioning_in_progress")
    assert answer["details"] == {"jobId": created["jobId"]}
    assert CANONICAL.match(answer["details"]["jobId"])
    assert [c for c in calls(sim)[setup:] if "languages" not in c[1]] == []


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("markets", {"market": "US", "languageCode": "en"}),
        ("markets", {"market": "US", "languageCode": "en", "async": True}),
        ("activate", {}),
        ("activate", {"async": True}),
        ("deactivate", None),
    ],
)
def test_work_meeting_a_deactivates_sync_attempt_names_no_job(sw_writer, sim, route, body):
    # given a brand held by a sync deactivate in flight (no job behind it)
    brand: Brand = BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="active",
        base_url="https://acme.example",
        semrush_sub_workspace_id=sim_create_workspace(sim, "Acme"),
    )
    ProvisioningAttemptFactory(brand=brand, started_by="deactivate")
    setup = len(calls(sim))
    # when
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands/{brand.id}/serenity/{route}", body
    )
    # then
    answer = assert_error(response, 409, "semrush_provisioning_in_progress")
    assert answer["details"] == {"jobId": None}
    assert [c for c in calls(sim)[setup:] if "languages" not in c[1]] == []
