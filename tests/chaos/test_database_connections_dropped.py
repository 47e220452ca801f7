"""Issue 5, acceptance 4: PostgreSQL connections dropped mid-chain (`pg_terminate_backend` on
every backend of the stack's database but the harness's own) → the workers recover and the
chains complete."""

from __future__ import annotations

import time

import pytest

from tests.chaos.support import (
    MARKETS,
    assert_converged,
    create_brand_async,
    create_market_async,
    create_ready_brand,
    poll_until_finished,
    wait_in_flight_upstream,
)
from tests.harness import wait_for

pytestmark = pytest.mark.chaos


def test_database_connections_dropped_mid_chain(make_stack):
    # given chains mid-flight: settle waits, and a market create held inside its upstream call
    stack = make_stack(workers=2, settle_seconds=2.0)
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    brand_id = create_ready_brand(api, "Held")
    chains = [create_brand_async(api, f"Dropped {n}", MARKETS[n % len(MARKETS)]) for n in range(5)]
    stack.sim_fault(method="POST", path_regex=r"/projects$", delay_ms=1500)
    chains.append(create_market_async(api, brand_id, ("US", "en")))
    wait_in_flight_upstream(stack, "POST", "/projects")
    # when every connection of the workers, beat and the API is terminated, three times over
    # the next seconds (in the middle of steps, claims and hand-overs)
    terminated = []
    for _ in range(3):
        terminated.append(stack.terminate_db_backends())
        time.sleep(1.0)
    assert terminated[0] > 0
    # then the API answers again, the workers are alive, and every chain completes
    wait_for(lambda: api.get("/readyz").status == 200, timeout=10, what="the API to recover")
    for chain in chains:
        final = poll_until_finished(api, chain.brand_id, chain.job_id)
        assert final["status"] == "COMPLETED", final
        assert final["result"]["status"] == 201, final
    assert [w.name for w in stack.workers if not w.alive] == []
    assert_converged(stack)
