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
