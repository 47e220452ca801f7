"""`details.jobId` of the 409 `semrush_provisioning_in_progress` is the canonical lower-case
hyphenated UUID of the blocking job, on every path (SPEC §10.2)."""

from __future__ import annotations

import re

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
