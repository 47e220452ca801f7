"""Issue 5, acceptance 6: the same message delivered twice, concurrently, to two workers → one
execution. A delivery that cannot claim (claimed under a live lease, not due, or finished) does
nothing (SPEC §6.4)."""

from __future__ import annotations

import pytest

from tests.chaos.support import (
    assert_converged,
    create_market_async,
    create_ready_brand,
    poll_until_finished,
    projects_in,
    wait_in_flight_upstream,
    workspace_of,
)
from tests.harness import ApiClient, Stack, wait_for

pytestmark = pytest.mark.chaos

PROVISION = "serenity.step.provisionWorkspace"
CREATE_MARKET = "serenity.step.createMarket"


def ignored(stack: Stack, job_id: str) -> int:
    """Deliveries of `job_id` that did not run it: ignored, or run another due job in its place
    (one waiting for its own message, `jobs.runner.run_step`)."""
    own = f'"step_job_id":"{job_id}"'
    return len(stack.worker_log_lines('"delivery ignored', own)) + len(
        stack.worker_log_lines('"delivery ran a due job in place of its own', own)
    )


def test_a_message_delivered_twice_to_two_workers_runs_once(make_stack):
    # given two single-slot workers, paused, and market-create chains whose first message is
    # published three times (the service's own publish and two duplicates)
    stack = make_stack(workers=2, concurrency=1, settle_seconds=0.5)
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    brands = [create_ready_brand(api, f"Twice {n}") for n in range(4)]
    stack.pause_workers()
    chains = [create_market_async(api, brand_id, ("US", "en")) for brand_id in brands]
    for chain in chains:
        stack.send_task(PROVISION, chain.job_id)
        stack.send_task(PROVISION, chain.job_id)
        # and the chained job, before it is runnable: not due, so nothing
        create = next(r for r in stack.chain(chain.job_id) if r["step"] == "createMarket")
        stack.send_task(CREATE_MARKET, str(create["id"]))
    # when both workers take the copies at once
    stack.resume_workers()
    # then each chain ran once: every row claimed once, one project per slice
    for chain in chains:
        final = poll_until_finished(api, chain.brand_id, chain.job_id)
        assert final["status"] == "COMPLETED", final
        assert final["result"]["status"] == 201, final
    for chain in chains:
        rows = stack.chain(chain.job_id)
        assert [(r["step"], r["status"], r["run_count"]) for r in rows][-1] == (
            "createMarket",
            "COMPLETED",
            1,
        )
        assert {r["run_count"] for r in rows} == {1}
        assert len(projects_in(stack, workspace_of(stack, chain.brand_id))) == 1
        wait_for(
            lambda chain=chain: ignored(stack, chain.job_id) >= 2,
            timeout=10,
            what="the duplicates to be ignored",
        )
    creates = [
        r for r in stack.sim_requests() if r["method"] == "POST" and "/projects" in r["path"]
    ]
    assert len([r for r in creates if r["path"].endswith("/projects")]) == len(chains)
    assert_converged(stack)

    # and on the same stack: duplicates of a running job, then of finished ones
    a_duplicate_of_a_running_or_finished_job_does_nothing(stack, api)


def a_duplicate_of_a_running_or_finished_job_does_nothing(stack: Stack, api: ApiClient) -> None:
    # given a chained market create held inside its upstream project create by one worker
    brand_id = create_ready_brand(api, "Running")
    stack.sim_fault(method="POST", path_regex=r"/projects$", delay_ms=1500)
    chain = create_market_async(api, brand_id, ("DE", "de"))
    wait_in_flight_upstream(stack, "POST", "/projects")
    create = next(r for r in stack.chain(chain.job_id) if r["step"] == "createMarket")
    create_id = str(create["id"])
    # when its message is delivered twice more while it runs (the other worker is idle)
    stack.send_task(CREATE_MARKET, create_id)
    stack.send_task(CREATE_MARKET, create_id)
    wait_for(lambda: ignored(stack, create_id) >= 2, timeout=10, what="both copies ignored")
    # then the running claim finishes alone
    final = poll_until_finished(api, brand_id, chain.job_id)
    assert final["status"] == "COMPLETED", final
    assert final["result"]["status"] == 201, final
    assert stack.job(create_id)["run_count"] == 1
    # and copies of every finished row of the chain change nothing and call nothing upstream
    before = {str(r["id"]): (r["status"], r["run_count"]) for r in stack.chain(chain.job_id)}
    calls = len(stack.sim_requests())
    for job_id in before:
        stack.send_task(CREATE_MARKET if job_id == create_id else PROVISION, job_id)
    wait_for(
        lambda: (
            all(ignored(stack, job_id) >= 1 for job_id in before if job_id != create_id)
            and ignored(stack, create_id) >= 3
        ),
        timeout=10,
        what="the copies of finished jobs to be ignored",
    )
    after = {str(r["id"]): (r["status"], r["run_count"]) for r in stack.chain(chain.job_id)}
    assert after == before
    assert len(stack.sim_requests()) == calls
    assert len(projects_in(stack, workspace_of(stack, brand_id))) == 1
    assert_converged(stack)
