"""Bulk onboarding through a real worker (SPEC §11.2): every item's chain runs as a single
create's does, the family is listed once per group of items (not once per item) for
create-or-adopt and for the settle reads (SPEC §12.5), a cancel in the middle ends what has not
ended, and the counts add up."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from provisioning.models import AttemptStatus, OnboardingFamily, ProvisioningAttempt
from serenity.models import Market
from tests.support import calls

pytestmark = pytest.mark.django_db(transaction=True)


def url(caller: Any, rest: str = "") -> str:
    return f"/v2/orgs/{caller.org.id}/serenity/onboardings{rest}"


def item(name: str, *markets: tuple[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "baseUrl": f"https://{name.lower().replace(' ', '-')}.example",
        "markets": [{"market": m, "languageCode": lang} for m, lang in markets],
    }


def poll(caller: Any, onboarding_id: str, *, timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = caller.get(url(caller, f"/{onboarding_id}?limit=500")).json()
        if body["status"] != "IN_PROGRESS" or time.monotonic() > deadline:
            return dict(body)
        time.sleep(0.2)


def test_an_onboarding_runs_every_item_and_lists_the_family_once_per_group(sw_writer, sim, worker):
    # given twelve brands with a market (two groups of items), and one with two markets
    brands = [item(f"Onboarded {n}", ("US", "en")) for n in range(12)]
    brands.append(item("Two Markets", ("DE", "de"), ("FR", "fr")))
    response = sw_writer.post(url(sw_writer), {"brands": brands})
    assert response.status_code == 202, response.json()
    # when the worker has run every chain
    body = poll(sw_writer, response.json()["onboardingId"])
    # then the onboarding is COMPLETED and every item too, each with its chain's answer
    assert body["status"] == "COMPLETED", body
    assert body["counts"] == {"inProgress": 0, "completed": 13, "failed": 0, "cancelled": 0}
    assert {i["result"]["status"] for i in body["items"][:12]} == {201}
    two = body["items"][12]
    assert two["status"] == "COMPLETED" and two["result"] is not None, two
    assert (two["result"]["status"], [m["status"] for m in two["result"]["body"]["markets"]]) == (
        200,
        [201, 201],
    ), two
    assert Market.objects.filter(status="live").count() == 14
    assert set(ProvisioningAttempt.objects.values_list("status", flat=True)) == {
        AttemptStatus.READY
    }
    # and the family was listed for create-or-adopt once per group of ten items, not per item
    # (the group's other items waited a moment for its listing)
    assert [f.entries is not None for f in OnboardingFamily.objects.order_by("group")] == [
        True,
        True,
    ]
    creates = [c for c in calls(sim) if c[0] == "POST" and c[1].endswith("/child")]
    assert len(creates) == 13
    # and the settle reads went through shared listings (SPEC §12.5): a workspace's own
    # status is read at most once (the first hop's read, made at once without a learned settle
    # time), however many reads it took to settle
    own_reads = Counter(c[1] for c in calls(sim) if c[1].endswith("/status"))
    assert set(own_reads.values()) <= {1}, own_reads


def test_a_cancel_in_the_middle_ends_every_item_that_has_not_ended(sw_writer, sim, worker):
    # given an onboarding of ten brands whose workspaces take 3 s to settle
    sim.configure({"settleSeconds": 3})
    response = sw_writer.post(
        url(sw_writer), {"brands": [item(f"Cancelled {n}", ("US", "en")) for n in range(10)]}
    )
    onboarding_id = response.json()["onboardingId"]
    time.sleep(1.0)
    # when it is cancelled while its chains wait for their workspaces
    cancelled = sw_writer.post(url(sw_writer, f"/{onboarding_id}/cancel"))
    assert cancelled.status_code == 200, cancelled.json()
    body = poll(sw_writer, onboarding_id)
    # then every item has ended, the counts cover them all, and it is CANCELLED
    assert body["status"] == "CANCELLED", body
    counts = body["counts"]
    assert counts["inProgress"] == 0 and sum(counts.values()) == 10
    assert counts["cancelled"] >= 1, counts
    # and no attempt is left pending, no reservation left behind
    assert not ProvisioningAttempt.objects.filter(status=AttemptStatus.PENDING).exists()
    assert not Market.objects.filter(status="creating").exists()
