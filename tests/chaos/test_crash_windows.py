"""A worker killed between a chained step's last upstream call and the end of its job: the
window has no upstream call for a simulator fault to hold, so the test puts the rows back as
they were before the step's final transaction (job IN_PROGRESS with an expired claim, attempt
pending, the chain's markets still reserved by the attempt with their recorded projects: the
market rows' final writes are part of that transaction, SPEC §11.5) — exactly what a SIGKILL
there leaves — and lets the dispatcher re-deliver the job. The re-run must converge (SPEC §4.6:
a market whose project was already created is finished, not refused), never delete the project
its market points at, never leave the attempt pending."""

from __future__ import annotations

import uuid

import pytest

from tests.chaos.support import (
    accepted,
    assert_converged,
    create_market_async,
    create_ready_brand,
    poll_until_finished,
    projects_in,
    workspace_of,
)
from tests.harness import Stack

pytestmark = pytest.mark.chaos


def undo_the_last_transaction(stack: Stack, job_id: str) -> None:
    """The chained job as a worker killed just before ending it leaves it: unfinished, claimed
    under an expired lease; its attempt still pending; the markets it finished still reserved
    by the attempt (`creating`, their projects recorded)."""
    create = stack.chain(job_id)[-1]  # the chained job
    stack.query(
        "UPDATE jobs_asyncjob SET status = 'IN_PROGRESS', result = NULL, error = NULL,"
        " finished_at = NULL, claim_token = %s, lease_expires_at = now() - interval '1 second'"
        " WHERE id = %s",
        (str(uuid.uuid4()), create["id"]),
    )
    [attempt] = stack.query(
        "UPDATE provisioning_provisioningattempt SET status = 'pending', finished_at = NULL"
        " WHERE job_id = %s RETURNING id, brand_id",
        (job_id,),
    )
    stack.query(
        "UPDATE serenity_market SET status = 'creating', reserved_by = %s"
        " WHERE brand_id = %s AND deleted_at IS NULL AND semrush_project_id IS NOT NULL",
        (attempt["id"], attempt["brand_id"]),
    )


def test_market_create_rerun_after_a_crash_before_the_job_ended(make_stack):
    stack = make_stack(workers=1, settle_seconds=0.5)
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)

    # given a market made live, its job killed before it ended
    live_brand = create_ready_brand(api, "Live")
    live = create_market_async(api, live_brand, ("US", "en"))
    first = poll_until_finished(api, live_brand, live.job_id)
    assert first["result"]["status"] == 201, first
    undo_the_last_transaction(stack, live.job_id)
    # and a market whose publish failed upstream (kept publish_failed with its project), its
    # job killed before it ended
    failed_brand = create_ready_brand(api, "Failed")
    workspace = workspace_of(stack, failed_brand)
    stack.sim_fault(
        method="POST", path_regex=rf"/workspaces/{workspace}/projects/[^/]+/publish$", status=503
    )
    failed = create_market_async(api, failed_brand, ("DE", "de"))
    first_failed = poll_until_finished(api, failed_brand, failed.job_id)
    assert first_failed["result"]["status"] == 502, first_failed
    undo_the_last_transaction(stack, failed.job_id)

    # and an activation of two markets (activate C), its job killed before it ended
    activated_brand = create_ready_brand(api, "Activated")
    activated = accepted(
        api.post(
            api.serenity_path(activated_brand, "activate"),
            {
                "brandDomain": "activated.example",
                "markets": [
                    {"market": "FR", "languageCode": "fr"},
                    {"market": "ES", "languageCode": "es"},
                ],
                "async": True,
            },
        ),
        activated_brand,
    )
    first_activated = poll_until_finished(api, activated_brand, activated.job_id)
    assert first_activated["result"]["status"] == 200, first_activated
    undo_the_last_transaction(stack, activated.job_id)

    # when the dispatcher re-delivers the jobs (their lease has run out)
    again_activated = poll_until_finished(api, activated_brand, activated.job_id)
    again = poll_until_finished(api, live_brand, live.job_id)
    again_failed = poll_until_finished(api, failed_brand, failed.job_id)

    # then the live market is finished again with the same project, which still exists
    assert again["status"] == "COMPLETED", again
    assert again["result"] == first["result"]
    assert [p["id"] for p in projects_in(stack, workspace_of(stack, live_brand))] == [
        first["result"]["body"]["projectId"]
    ]
    # and the failed one is resumed: published, live, its one project
    assert again_failed["status"] == "COMPLETED", again_failed
    assert again_failed["result"]["status"] == 201, again_failed
    assert [p["id"] for p in projects_in(stack, workspace)] == [
        again_failed["result"]["body"]["projectId"]
    ]
    # and the activation ends again with its two projects (already live the second time)
    assert again_activated["status"] == "COMPLETED", again_activated
    activated_projects = projects_in(stack, workspace_of(stack, activated_brand))
    assert len(activated_projects) == 2
    assert_converged(stack)
