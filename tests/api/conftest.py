"""A safety net under every API test of this package: no response body, success or error,
carries an upstream URL, token or error text, and no error body carries any upstream id
(SPEC §4, §7; issue 3 acceptance 6). Tests still assert their error envelopes with
`tests.support.assert_error`, which also knows the ids a caller legitimately owns. (That every
answer conforms to the served OpenAPI document is checked under every test of the suite:
tests/conftest.py.)

Also the brand most API tests start from: active, its pointer a settled workspace."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from serenity.models import Brand
from tests.factories import BrandFactory
from tests.support import assert_clean, sim_create_workspace, upstream_ids


@pytest.fixture(autouse=True)
def no_upstream_leaks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    sim = request.getfixturevalue("sim") if "sim" in request.fixturenames else None
    original = APIClient.request

    def checked(self: APIClient, **kwargs: Any) -> Any:
        response = original(self, **kwargs)
        if response.get("Content-Type", "").startswith("application/json") and response.content:
            failed = response.status_code >= 400
            assert_clean(response, forbidden=upstream_ids(sim) if failed and sim else ())
        return response

    monkeypatch.setattr(APIClient, "request", checked)


@pytest.fixture
def workspace(sim: Any) -> str:
    """A settled sub-workspace titled like the brands below."""
    return sim_create_workspace(sim, "Acme")


@pytest.fixture
def active_brand(sw_writer: Any, workspace: str) -> Brand:
    """An active sub-workspace brand whose pointer is `workspace`."""
    return BrandFactory(
        organization=sw_writer.org,
        name="Acme",
        status="active",
        base_url="https://acme.example",
        semrush_sub_workspace_id=workspace,
    )
