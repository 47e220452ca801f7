"""Issue 23: a bulk onboarding survives its workers. SIGKILL both workers in the middle of an
onboarding of 24 brands (chains in settle waits, market creates in flight), start new ones:
every item ends, nothing is lost or orphaned upstream, and the counts cover every item."""

from __future__ import annotations

import time

import pytest

from tests.chaos.support import assert_converged
from tests.harness import wait_for

pytestmark = pytest.mark.chaos

BRANDS = 24


def test_workers_killed_in_the_middle_of_an_onboarding(make_stack):
    # given an onboarding of 24 brands with a market, whose workspaces settle in 1.5 s and
    # whose project creates take 0.3 s
    stack = make_stack(workers=2, worker_pool="threads", concurrency=16, settle_seconds=1.5)
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    stack.sim_fault(method="POST", path_regex=r"/projects$", delay_ms=300, times=1000)
    accepted = api.post(
        f"/v2/orgs/{org_id}/serenity/onboardings",
        {
            "brands": [
                {
                    "name": f"Onboarded {n}",
                    "baseUrl": f"https://onboarded-{n}.example",
                    "markets": [{"market": "US", "languageCode": "en"}],
                }
                for n in range(BRANDS)
            ]
        },
    )
    assert accepted.status == 202, accepted.body
    path = f"/v2/orgs/{org_id}/serenity/onboardings/{accepted.body['onboardingId']}?limit=500"

    def completed() -> int:
        return int(api.get(path).body["counts"]["completed"])

    # when some items have completed and others are under way, both workers die
    wait_for(lambda: completed() >= 3, timeout=60, what="the first items to complete")
    stack.kill_worker(0)
    stack.kill_worker(1)
    during = completed()
    stack.restart_worker(0)
    stack.restart_worker(1)
    # then every item ends: completed, each with its market created once
    deadline = time.monotonic() + 120
    body = api.get(path).body
    while body["status"] == "IN_PROGRESS" and time.monotonic() < deadline:
        time.sleep(0.5)
        body = api.get(path).body
    assert body["status"] == "COMPLETED", body["counts"]
    assert body["counts"] == {"inProgress": 0, "completed": BRANDS, "failed": 0, "cancelled": 0}
    assert during < BRANDS, "the kill came after the end: nothing was tested"
    assert {item["result"]["status"] for item in body["items"]} == {201}
    assert len(stack.sim_state()["projects"]) == BRANDS
    # and nothing is lost or orphaned upstream, no attempt stale, no slice twice
    assert_converged(stack)
