"""Async activate of a `pending` brand with `brandDomain` (SPEC §10.2): one chain,
provision-workspace → activate-markets, whose step flips the status first; the result is the
sync path's answer."""

from __future__ import annotations

from serenity.models import Brand
from tests.chains.helpers import serenity_path, without_ids
from tests.conftest import poll_job
from tests.factories import BrandFactory


def pending_brand(caller, name: str) -> Brand:  # type: ignore[no-untyped-def]
    return BrandFactory(
        organization=caller.org,
        name=name,
        status="pending",
        base_url="https://example.com",
        semrush_sub_workspace_id=None,
    )


def test_async_activate_of_a_pending_brand_with_domain_equals_sync(sw_writer, sim, worker):
    # given two pending brands
    a = pending_brand(sw_writer, "Alpha")
    b = pending_brand(sw_writer, "Beta")
    body = {"brandDomain": "example.com", "markets": [{"market": "US", "languageCode": "en"}]}
    # when one is activated synchronously, the other asynchronously
    sync = sw_writer.post(f"{serenity_path(sw_writer, str(a.id))}/activate", body)
    accepted = sw_writer.post(
        f"{serenity_path(sw_writer, str(b.id))}/activate", {**body, "async": True}
    )
    # then
    assert sync.status_code == 200, sync.json()
    assert accepted.status_code == 202, accepted.json()
    final = poll_job(sw_writer, accepted["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["result"]["status"] == 200
    assert final["result"]["body"]["status"] == "active"
    assert [m["status"] for m in final["result"]["body"]["markets"]] == [201]
    assert without_ids(final["result"]["body"]) == without_ids(sync.json())
    assert [s["step"] for s in final["steps"]][-1] == "activateMarkets"
    assert Brand.objects.get(pk=b.pk).status == "active"
