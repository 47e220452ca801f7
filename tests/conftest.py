"""Shared fixtures. The suite runs against real PostgreSQL and Redis (see pyproject's env)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from serenity.models import Organization, Role
from tests.factories import MembershipFactory, OrganizationFactory, UserFactory, make_token


@dataclass
class Caller:
    """An authenticated API client bound to one org."""

    client: APIClient
    org: Organization
    token: str
    user: Any

    def get(self, path: str, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.get(path, **kw)

    def post(self, path: str, data: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.post(path, data, format="json", **kw)

    def patch(self, path: str, data: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.patch(path, data, format="json", **kw)

    def delete(self, path: str, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.delete(path, **kw)


def make_caller(org: Organization, role: str = Role.WRITER) -> Caller:
    membership = MembershipFactory(organization=org, role=role)
    token = make_token(membership.user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return Caller(client=client, org=org, token=token, user=membership.user)


@pytest.fixture
def org(db) -> Organization:  # type: ignore[no-untyped-def]
    return OrganizationFactory()


@pytest.fixture
def writer(org: Organization) -> Caller:
    return make_caller(org, Role.WRITER)


@pytest.fixture
def reader(org: Organization) -> Caller:
    return make_caller(org, Role.READER)


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture
def staff_user(db):  # type: ignore[no-untyped-def]
    return UserFactory(is_staff=True)


# --- The Semrush simulator over real HTTP ----------------------------------------------------

SIM_TOKEN = "dev-token"


@pytest.fixture(scope="session")
def simulator():  # type: ignore[no-untyped-def]
    from provisioning.simulator import SemrushSimulator

    sim = SemrushSimulator(port=0, token=SIM_TOKEN, parents=[]).start()
    yield sim
    sim.stop()


@pytest.fixture
def sim(simulator, settings):  # type: ignore[no-untyped-def]
    """A freshly reset simulator with one parent workspace (`sim.parent_id`), fast settling,
    and the service pointed at it."""
    import uuid as _uuid

    from django.core.cache import cache

    parent_id = f"parent-{_uuid.uuid4()}"
    simulator.reset(parents=[parent_id], token=SIM_TOKEN)
    simulator.configure({"settleSeconds": 0.2})
    simulator.parent_id = parent_id
    settings.SEMRUSH_BASE_URL = simulator.base_url
    settings.SEMRUSH_API_TOKEN = SIM_TOKEN
    settings.SEMRUSH_TIMEOUT_SECONDS = 2.0
    settings.SERENITY_SETTLE_POLL_INTERVAL_MS = 50
    settings.SERENITY_SETTLE_POLL_ATTEMPTS = 30
    cache.clear()
    return simulator


@pytest.fixture
def serenity_org(db, sim) -> Organization:  # type: ignore[no-untyped-def]
    return OrganizationFactory(
        serenity_enabled=True, semrush_parent_workspace_id=sim.parent_id,
        workspace_mode="subworkspace",
    )


@pytest.fixture
def sw_writer(serenity_org: Organization) -> Caller:
    """A writer of a Serenity org in sub-workspace mode, against the simulator."""
    return make_caller(serenity_org, Role.WRITER)


def upstream_calls(sim) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """(method, path) of every upstream request since the last reset, oldest first."""
    return [(r["method"], r["path"]) for r in sim.requests_log()]
