"""Issue 5, acceptance 2 and 3: Redis unreachable (frozen, then stopped) when async requests
arrive, and Redis restarted with all its data lost while chains are mid-flight. The job rows
are the source of truth: the dispatcher re-publishes whatever the broker lost, and every chain
completes."""

from __future__ import annotations

import pytest

from tests.chaos.support import (
    MARKETS,
    accepted,
    assert_converged,
    brand_body,
    create_brand_async,
    create_market_async,
    create_ready_brand,
    poll_until_finished,
    wait_in_flight_upstream,
)
from tests.harness import wait_for

pytestmark = pytest.mark.chaos


def test_requests_accepted_while_redis_is_unreachable_complete_after_it_returns(make_stack):
    stack = make_stack(workers=1)
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    ready = [create_ready_brand(api, f"Ready {n}") for n in range(4)]

    # given a broker that accepts connections but answers nothing (frozen)
    stack.freeze_redis()
    try:
        # when async requests arrive
        frozen = [
            accepted(
                api.post(api.brands_path, brand_body("Frozen", MARKETS[0], **{"async": True}))
            ),
            create_market_async(api, ready[3], MARKETS[1]),
        ]
        ready_answer = api.get("/readyz")
    finally:
        stack.thaw_redis()
    # then each answered 202 within the publish bound (about 1 s), readiness said 503
    assert [a.response.elapsed < 2.0 for a in frozen] == [True, True]
    assert ready_answer.status == 503
    # and once the broker answers again, the jobs complete
    for answer in frozen:
        final = poll_until_finished(api, answer.brand_id, answer.job_id)
        assert final["status"] == "COMPLETED", final
        assert final["result"]["outcome"] == "succeeded", final

    # given the broker gone (connections refused)
    stack.stop_redis()
    assert api.get("/readyz").status == 503
    # when async requests arrive: brand creates (with and without a market), market creates,
    # an activation
    answers = [
        accepted(api.post(api.brands_path, brand_body(f"Down {n}", market, **{"async": True})))
        for n, market in enumerate([MARKETS[0], MARKETS[1], None])
    ]
    answers += [create_market_async(api, brand_id, MARKETS[2]) for brand_id in ready[:2]]
    answers.append(
        accepted(
            api.post(
                api.serenity_path(ready[2], "activate"),
                {
                    "brandDomain": "ready-2.example",
                    "markets": [{"market": "DE", "languageCode": "de"}],
                    "async": True,
                },
            ),
            ready[2],
        )
    )
    # then each answered 202 promptly (publishing is bounded; nothing was sent)
    slow = [round(a.response.elapsed, 2) for a in answers if a.response.elapsed > 2.0]
    assert slow == []
    assert [
        row["id"] for a in answers for row in stack.chain(a.job_id) if row["published_at"]
    ] == []
    # and when Redis comes back, empty, every accepted job completes
    stack.start_redis()
    for answer in answers:
        final = poll_until_finished(api, answer.brand_id, answer.job_id)
        assert final["status"] == "COMPLETED", final
        assert final["result"]["outcome"] == "succeeded", final
    assert api.get("/readyz").status == 200
    assert [w.name for w in stack.workers if not w.alive] == []
    assert_converged(stack)


def test_redis_restarted_empty_while_chains_are_in_flight(make_stack):
    # given chains mid-flight: some in settle waits (countdown messages in the broker), one
    # inside its chained market create, which will finish (and be acknowledged) only after
    # Redis is back (a 3 s upstream call, under a 5 s client timeout)
    stack = make_stack(workers=2, settle_seconds=2.0, settings={"SEMRUSH_TIMEOUT_SECONDS": 5})
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    brand_id = create_ready_brand(api, "Held")
    chains = [create_brand_async(api, f"Flight {n}", MARKETS[n % len(MARKETS)]) for n in range(5)]
    wait_for(
        lambda: all(len(stack.chain(c.job_id)) >= 2 for c in chains),
        timeout=20,
        what="chains in settle waits",
    )
    stack.sim_fault(method="POST", path_regex=r"/projects$", delay_ms=3000)
    chains.append(create_market_async(api, brand_id, ("US", "en")))
    wait_in_flight_upstream(stack, "POST", "/projects")
    wait_for(
        lambda: all(len(stack.chain(c.job_id)) >= 2 for c in chains[:5]),
        timeout=20,
        what="chains in settle waits",
    )
    # when Redis restarts with every queued, unacknowledged and countdown message lost
    stack.restart_redis()
    # then the workers reconnect (none exited) and every chain completes
    for chain in chains:
        final = poll_until_finished(api, chain.brand_id, chain.job_id)
        assert final["status"] == "COMPLETED", final
        assert final["result"]["status"] == 201, final
    assert [w.name for w in stack.workers if not w.alive] == []
    assert_converged(stack)
