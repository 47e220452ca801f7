"""Issue 5, acceptance 1: SIGKILL the worker in the middle of chains — some in a settle wait,
one inside its chained market create (its upstream project create held by a simulator
`delayMs` fault) — then start a new one: each job completes exactly once (one project per slice
upstream)."""

from __future__ import annotations

import pytest

from tests.chaos.support import (
    MARKETS,
    assert_converged,
    create_brand_async,
    create_market_async,
    create_ready_brand,
    poll_until_finished,
    projects_in,
    wait_in_flight_upstream,
    workspace_of,
)
from tests.harness import wait_for

pytestmark = pytest.mark.chaos


def test_worker_killed_mid_chain_then_replaced(make_stack):
    # given a ready brand (its workspace settles in 1 s) ...
    stack = make_stack(workers=1, settle_seconds=1.0)
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    held_brand = create_ready_brand(api, "Held")
    # ... chains whose new workspaces take 3.5 s to settle (status reads 0.5-2 s apart) ...
    stack.sim_config(settleSeconds=3.5)
    settling = [create_brand_async(api, f"Settle {n}", MARKETS[n % len(MARKETS)]) for n in range(3)]
    # ... and a market create whose upstream project create is held for 1.5 s (under the 2 s
    # client timeout: the simulator creates the project when the delay ends)
    stack.sim_fault(method="POST", path_regex=r"/projects$", delay_ms=1500)
    held = create_market_async(api, held_brand, ("US", "en"))
    wait_in_flight_upstream(stack, "POST", "/projects")
    wait_for(
        lambda: all(len(stack.chain(c.job_id)) >= 2 for c in settling),
        timeout=10,
        what="the chains in settle waits",
    )
    for chain in settling:
        # not promoted yet: the chained create is not runnable
        create = stack.chain(chain.job_id)[-1]
        assert (create["step"], create["run_after"]) == ("createMarket", None), create
    # when the worker dies (with its countdown messages and the running create) and a new one
    # starts
    stack.kill_worker(0)
    stack.restart_worker(0)
    # then every chain completes, once
    for chain in [*settling, held]:
        final = poll_until_finished(api, chain.brand_id, chain.job_id)
        assert final["status"] == "COMPLETED", final
        assert final["result"]["status"] == 201, final
    for chain in settling:
        create = [row for row in stack.chain(chain.job_id) if row["step"] == "createMarket"]
        assert [(row["status"], row["run_count"]) for row in create] == [("COMPLETED", 1)]
    # and the held create was resumed, not repeated: one project, the market's
    create = [row for row in stack.chain(held.job_id) if row["step"] == "createMarket"]
    assert [(row["status"], row["run_count"]) for row in create] == [("COMPLETED", 2)]
    final = poll_until_finished(api, held_brand, held.job_id)
    projects = projects_in(stack, workspace_of(stack, held_brand))
    assert [p["id"] for p in projects] == [final["result"]["body"]["projectId"]]
    assert_converged(stack)
