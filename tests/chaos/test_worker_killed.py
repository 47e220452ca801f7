"""Issue 5, acceptance 1: SIGKILL the worker in the middle of a chain — during a settle wait,
and during the chained market create — then start a new one: each job completes exactly once
(one project per slice upstream)."""

from __future__ import annotations

import pytest

from tests.chaos.support import (
    MARKETS,
    assert_converged,
    create_brand_async,
    create_market_async,
    create_ready_brand,
    poll_until_finished,
    wait_in_flight_upstream,
    workspace_of,
)
from tests.harness import wait_for

pytestmark = pytest.mark.chaos


def test_worker_killed_during_settle_wait_then_replaced(make_stack):
    # given chains waiting for their workspaces to settle (2.5 s; reads every 0.5-2 s)
    stack = make_stack(workers=1, settle_seconds=2.5)
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    chains = [create_brand_async(api, f"Settle {n}", MARKETS[n % len(MARKETS)]) for n in range(4)]
    wait_for(
        lambda: all(len(stack.chain(c.job_id)) >= 3 for c in chains),
        timeout=20,
        what="every chain in a settle wait",
    )
    # when the worker dies (its countdown messages die with it) and a new one starts
    stack.kill_worker(0)
    stack.restart_worker(0)
    # then every chain completes, once
    for chain in chains:
        final = poll_until_finished(api, chain.brand_id, chain.job_id)
        assert final["status"] == "COMPLETED", final
        assert final["result"]["status"] == 201, final
    for chain in chains:
        create = [row for row in stack.chain(chain.job_id) if row["step"] == "createMarket"]
        assert [(row["status"], row["run_count"]) for row in create] == [("COMPLETED", 1)]
    assert_converged(stack)


def test_worker_killed_inside_the_chained_market_create_then_replaced(make_stack):
    # given a ready brand, and the upstream project create held for 1.5 s (under the 2 s
    # client timeout: the simulator creates the project when the delay ends)
    stack = make_stack(workers=1)
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    brand_id = create_ready_brand(api, "Held")
    stack.sim_fault(method="POST", path_regex=r"/projects$", delay_ms=1500)
    chain = create_market_async(api, brand_id, ("US", "en"))
    wait_in_flight_upstream(stack, "POST", "/projects")
    # when the worker dies while the create is in flight, and a new one starts
    stack.kill_worker(0)
    stack.restart_worker(0)
    # then the new worker resumes the project the dead one created: one project, live market
    final = poll_until_finished(api, brand_id, chain.job_id)
    assert final["status"] == "COMPLETED", final
    assert final["result"]["status"] == 201, final
    workspace = workspace_of(stack, brand_id)
    projects = [p for p in stack.sim_state()["projects"] if p["workspaceId"] == workspace]
    assert len(projects) == 1
    assert final["result"]["body"]["projectId"] == projects[0]["id"]
    create = [row for row in stack.chain(chain.job_id) if row["step"] == "createMarket"]
    assert [row["status"] for row in create] == ["COMPLETED"]
    assert create[0]["run_count"] == 2  # the killed run and the one that finished
    assert_converged(stack)
