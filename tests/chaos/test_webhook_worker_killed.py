"""Issue 24: SIGKILL the deliveries' worker (`-Q <queue>.webhooks`, deploy/Procfile's
`webhooks`) while a webhook attempt is in flight (the receiver holds the request), then start a
new one: the delivery is made again (same `webhook-id`, signed) and recorded delivered: at least
once, never lost."""

from __future__ import annotations

import json

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.chaos.support import assert_converged, create_brand_async, poll_until_finished
from tests.harness import wait_for
from tests.webhooks.receiver import receiver_start

pytestmark = pytest.mark.chaos


def test_a_worker_killed_in_the_middle_of_a_delivery(make_stack):
    # given a receiver on the loopback that holds the first request past the attempt's deadline
    # (the worker is killed well before it) ...
    receiver = receiver_start(holds=[30.0])
    try:
        stack = make_stack(workers=1, settings={"SERENITY_WEBHOOK_ALLOW_PRIVATE": True})
        org_id, token = stack.create_org_and_token()
        api = stack.client(token, org_id)
        registered = api.post(f"/v2/orgs/{org_id}/serenity/webhooks", {"url": receiver.url})
        assert registered.status == 201, registered.body
        secret = registered.body["secret"]
        # ... and a chain whose end is an event
        chain = create_brand_async(api, "Hooked", ("US", "en"))
        assert poll_until_finished(api, chain.brand_id, chain.job_id)["status"] == "COMPLETED"
        receiver.wait_for(1, timeout=30, arrived=True)  # the first attempt is in flight
        # when the deliveries' worker dies in the middle of it, and a new one starts
        stack.restart_webhook_worker()
        # then the attempt is made again (the lease expired; the dispatcher re-published it) ...
        first, again = receiver.wait_for(2, timeout=60, arrived=True)[:2]

        def delivered() -> dict[str, object] | None:
            rows = stack.query("SELECT status, attempts, event_id FROM webhooks_webhookdelivery")
            return rows[0] if rows and rows[0]["status"] == "delivered" else None

        row = wait_for(delivered, timeout=30, what="the delivery recorded delivered")
        # ... under the same webhook-id, signed, with the chain's end as its event
        assert first.headers["webhook-id"] == again.headers["webhook-id"] == str(row["event_id"])
        headers = {name.lower(): value for name, value in again.headers.items()}
        body = StandardWebhook(secret).verify(again.body, headers)
        assert (body["type"], body["data"]["jobId"]) == ("job.completed", chain.job_id)
        assert json.loads(first.body) == body
        # the killed attempt left no record: one attempt counted, the one that answered
        assert row["attempts"] == 1
        assert_converged(stack)
    finally:
        receiver.stop()
