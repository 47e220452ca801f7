"""The async accept path's SQL budget (issue 6: at most 12 queries per accepted request,
counting BEGIN/SAVEPOINT/COMMIT). A count, not a time: it cannot flake."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.chains.helpers import brands_path, create_brand, serenity_path

pytestmark = pytest.mark.django_db(transaction=True)

BUDGET = 12


def count_queries(call):  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as captured:
        response = call()
    assert response.status_code == 202, response.json()
    return len(captured.captured_queries)


def test_async_accepts_stay_within_the_query_budget(sw_writer, sim):
    # given a ready brand, and a token already used (its last-used stamp is written at most
    # once a minute)
    brand = create_brand(sw_writer, "Alpha")
    draft = create_brand(sw_writer, "Draft", status="pending")
    base = serenity_path(sw_writer, brand["id"])
    # when / then
    assert (
        count_queries(
            lambda: sw_writer.post(
                f"{base}/markets", {"market": "US", "languageCode": "en", "async": True}
            )
        )
        <= BUDGET
    )
    assert (
        count_queries(
            lambda: sw_writer.post(
                brands_path(sw_writer),
                {
                    "name": "Beta",
                    "baseUrl": "https://b.example",
                    "async": True,
                    "semrushMarket": {"market": "US", "languageCode": "en"},
                },
            )
        )
        # token, org + role, BEGIN, four INSERTs, COMMIT: the 202 renders the rows in hand
        <= 8
    )
    assert (
        count_queries(
            lambda: sw_writer.post(
                f"{serenity_path(sw_writer, draft['id'])}/activate", {"async": True}
            )
        )
        <= BUDGET
    )
