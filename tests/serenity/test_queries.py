"""`serenity.core.queries.unique_or_none`."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from serenity.core.queries import unique_or_none
from serenity.models import Organization
from tests.factories import OrganizationFactory

pytestmark = pytest.mark.django_db


def test_a_unique_lookup_returns_its_row_in_one_unordered_query():
    # given
    organization = OrganizationFactory()
    # when
    with CaptureQueriesContext(connection) as queries:
        found = unique_or_none(Organization.objects.filter(pk=organization.pk))
    # then: the row, with no ORDER BY (Organization is ordered by name)
    assert found == organization
    assert len(queries) == 1
    assert "ORDER BY" not in queries[0]["sql"]
    assert queries[0]["sql"].endswith("LIMIT 1")


def test_a_lookup_that_matches_nothing_returns_none():
    assert unique_or_none(Organization.objects.filter(pk=uuid.uuid4())) is None
