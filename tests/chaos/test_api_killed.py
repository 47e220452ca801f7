"""Issue 42: the API process dies in the middle of sync work. Sync work begins as async work
does (its chain's rows, its attempt driven by them, SPEC §13.5), so the chain is left to the
dispatcher and the workers exactly as a chain whose worker died: it completes, its attempt
ends `ready` (never reconciled as stale), and, being sync work, it sends no webhook event."""

from __future__ import annotations

import contextlib
import threading

import pytest

from tests.chaos.support import assert_converged, workspace_of
from tests.harness import wait_for

pytestmark = pytest.mark.chaos


def test_api_killed_mid_sync_create_leaves_its_chain_to_the_workers(make_stack):
    # given an org with a webhook endpoint taking every job event, and workspaces that take
    # 2.5 s to settle (a sync create reads their status every 100 ms)
    stack = make_stack(workers=1, settings={"SERENITY_WEBHOOK_ALLOW_PRIVATE": True})
    org_id, token = stack.create_org_and_token()
    api = stack.client(token, org_id)
    hook = api.post(f"/v2/orgs/{org_id}/serenity/webhooks", {"url": "http://127.0.0.1:9/hook"})
    assert hook.status == 201, hook.body
    stack.sim_config(settleSeconds=2.5)
    body = {
        "name": "Crash",
        "baseUrl": "https://crash.example",
        "semrushMarket": {"market": "US", "languageCode": "en"},
    }
    # when a sync create is in its settle reads ...
    request = threading.Thread(target=_post_quietly, args=(api, api.brands_path, body))
    request.start()
    wait_for(
        lambda: stack.query(
            "SELECT 1 FROM jobs_asyncjob WHERE mode = 'sync' AND step = 'provisionWorkspace'"
            " AND position >= 1"
        ),
        timeout=30,
        what="the sync create's second status read",
    )
    # ... and the API process dies
    assert stack.api is not None
    stack.api.kill()
    [killed] = stack.query("SELECT now() AS at")
    request.join(timeout=30)
    # then its chain is taken over by a worker and completes: a sync chain, its attempt ready
    [root] = stack.query(
        "SELECT id, brand_id FROM jobs_asyncjob WHERE mode = 'sync' AND root_id IS NULL"
    )
    stack.wait_until_quiet(timeout=90)
    rows = stack.chain(str(root["id"]))
    assert {row["mode"] for row in rows} == {"sync"}
    assert rows[-1]["step"] == "createMarket"
    assert rows[-1]["status"] == "COMPLETED", rows[-1]
    # (by a worker: the request was gone before its market's step started)
    assert rows[-1]["started_at"] > killed["at"]
    [attempt] = [a for a in stack.attempts() if a["brand_id"] == root["brand_id"]]
    assert (attempt["status"], attempt["reason"]) == ("ready", None)
    assert workspace_of(stack, str(root["brand_id"])) is not None
    # and no event was emitted for it
    assert stack.query("SELECT count(*) AS n FROM webhooks_webhookdelivery")[0]["n"] == 0
    assert_converged(stack)


def _post_quietly(api, path, body) -> None:  # type: ignore[no-untyped-def]
    """The request whose server dies: its connection error is expected."""
    with contextlib.suppress(Exception):
        api.post(path, body)
