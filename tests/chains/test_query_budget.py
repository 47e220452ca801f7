"""The async accept path's SQL budget (issue 6: at most 12 queries per accepted request,
counting BEGIN/SAVEPOINT/COMMIT). A count, not a time: it cannot flake."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import AsyncJob
from tests.chains.helpers import brands_path, create_brand, serenity_path

pytestmark = pytest.mark.django_db(transaction=True)

BUDGET = 12


def count_queries(call):  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as captured:
        response = call()
    assert response.status_code == 202, response.json()
    return len(captured.captured_queries)


def test_async_accepts_stay_within_the_query_budget(sw_writer, sim, published):
    # given a ready brand, and a token already used (its last-used stamp is written at most
    # once a minute); the jobs are recorded, not sent, so that no worker runs them while this
    # test's teardown empties the tables (a TRUNCATE that could deadlock with a running step)
    brand = create_brand(sw_writer, "Alpha")
    draft = create_brand(sw_writer, "Draft", status="pending")
    base = serenity_path(sw_writer, brand["id"])
    # when / then
    assert (
        count_queries(
            lambda: sw_writer.post(
                f"{base}/markets", {"market": "US", "languageCode": "en", "async": True}
            )
        )
        <= BUDGET
    )
    assert (
        count_queries(
            lambda: sw_writer.post(
                brands_path(sw_writer),
                {
                    "name": "Beta",
                    "baseUrl": "https://b.example",
                    "async": True,
                    "semrushMarket": {"market": "US", "languageCode": "en"},
                },
            )
        )
        # token, org + role, the org's queued markets (SPEC §13.6: provisioning.caps), BEGIN,
        # four INSERTs, COMMIT: the 202 renders the rows in hand
        <= 9
    )
    assert (
        count_queries(
            lambda: sw_writer.post(
                f"{serenity_path(sw_writer, draft['id'])}/activate", {"async": True}
            )
        )
        <= BUDGET
    )
    assert len(published) == 3  # each accept's first step, once its transaction committed


def first_delivery_sql(caller, sim, *, settle_seconds: float):  # type: ignore[no-untyped-def]
    """Accept a brand create with a market (the workspace settles after `settle_seconds`) and
    deliver the chain's first message in-process: (the accepted body, the SQL it ran, a listing
    of that SQL for assertion messages)."""
    from provisioning import tasks
    from provisioning.selectors import settle_seconds_learned
    from tests.chains.helpers import start_async_brand_with_market

    sim.configure({"settleSeconds": settle_seconds})
    accepted = start_async_brand_with_market(caller)
    # The parent's learned settle time is read once per process every 30 s (SPEC §11.1), not
    # per chain: read it first, as a busy worker has, to count a chain's own statements.
    settle_seconds_learned(parent_id=caller.org.semrush_parent_workspace_id)
    # A credential's first 2xx in a process records it accepted (SPEC §13.2: two statements,
    # once per process and credential): a busy worker has recorded it already.
    from provisioning.upstream import client_for_org

    client_for_org(caller.org).list_languages()
    with CaptureQueriesContext(connection) as captured:
        tasks.provision_workspace(accepted["jobId"])
    sql = [q["sql"] for q in captured.captured_queries]
    return accepted, sql, "\n".join(s[:100] for s in sql)


def test_a_chain_s_steps_run_in_a_fixed_number_of_statements(sw_writer, sim, published):
    # given an accepted brand create with a market, and a workspace that is ready at once
    # when its one message is delivered (create, read, promote, then the handed-over
    # create-market)
    accepted, sql, listing = first_delivery_sql(sw_writer, sim, settle_seconds=0)
    # then each step starts with one statement, the claim returning the job it claims (no read
    # of the job after it), then reads its attempt once (with its brand and org), and the whole
    # chain runs 19 statements in two transactions, one per step's ending (the promoting root
    # records the chain's current step in its own final UPDATE; the create-market's market row
    # goes live in its ending's transaction, SPEC §11.5; the ending reads the org's webhook
    # subscriptions, SPEC §11.3: its events are written in that transaction). Publishing
    # confirmed (SPEC §12.1) adds two: the row's `publishing` once Semrush accepted the
    # publish, and the parent's learned publish time (read once per process and parent a
    # while, so only the first chain of a burst pays it)
    # (the delivery first picks the job it runs, fairly across orgs, SPEC §12.5: one read;
    # the handed-over step is claimed by id)
    claims = [s for s in sql if s.startswith('UPDATE "jobs_asyncjob" SET "claim_token"')]
    assert len(claims) == 2 and all(" RETURNING " in s for s in claims), listing
    job_reads = [s for s in sql if s.startswith("SELECT") and 'FROM "jobs_asyncjob"' in s]
    assert sql[:2] == [job_reads[0], claims[0]] and len(job_reads) == 1, listing
    attempt_reads = [
        s
        for s in sql
        if s.startswith("SELECT")
        and 'FROM "provisioning_provisioningattempt"' in s
        and "FOR UPDATE" not in s
    ]
    assert len(attempt_reads) == 2, listing
    # and the ledger (SPEC §13.4) adds one INSERT per write or confirm read, in autocommit
    # outside the endings' transactions: the workspace's create and status read, the project's
    # create, tracked URL, publish and confirm read
    ledger = [s for s in sql if s.startswith('INSERT INTO "provisioning_upstreamcall"')]
    assert len(ledger) == 6, listing
    depth = 0
    for statement in sql:
        depth += {"BEGIN": 1, "COMMIT": -1}.get(statement, 0)
        assert depth == 0 or statement not in ledger, listing
    statements = [s for s in sql if s not in ("BEGIN", "COMMIT", *ledger)]
    assert (len(statements), sql.count("BEGIN"), sql.count("COMMIT")) == (19, 2, 2), listing
    webhook_reads = [s for s in statements if 'FROM "webhooks_webhook"' in s]
    assert len(webhook_reads) == 1, listing
    assert AsyncJob.objects.get(pk=accepted["jobId"]).status == "COMPLETED"


def test_a_settle_read_that_finds_the_workspace_not_ready_schedules_its_repeat_in_one_transaction(
    sw_writer, sim, published
):
    # given an accepted brand create with a market, and a workspace that takes its time
    # when its first hop runs (create, read: not ready)
    accepted, sql, listing = first_delivery_sql(sw_writer, sim, settle_seconds=30)
    # then the hop ends in one transaction of three statements after the attempt's lock: the
    # root's final UPDATE also links its repeat and makes it the chain's current step, then the
    # repeat is inserted
    ending = sql[sql.index("BEGIN") :]
    expected = [
        "BEGIN",
        'UPDATE "provisioning_provisioningattempt" SET "updated_at" = ',
        'UPDATE "jobs_asyncjob" SET "status" = \'COMPLETED\'',
        'INSERT INTO "jobs_asyncjob" ',
        "COMMIT",
    ]
    assert len(ending) == len(expected), listing
    assert all(s.startswith(prefix) for s, prefix in zip(ending, expected, strict=True)), listing
    root = AsyncJob.objects.get(pk=accepted["jobId"])
    repeat = AsyncJob.objects.get(root_id=root.pk, step="provisionWorkspace")
    assert (root.status, root.next_id, root.current_id, root.step_count) == (
        "COMPLETED",
        repeat.pk,
        repeat.pk,
        2,
    )
    assert repeat.next_id == AsyncJob.objects.get(root_id=root.pk, step="createMarket").pk
    assert (repeat.status, repeat.position) == ("IN_PROGRESS", 1)
    assert published == [accepted["jobId"], str(repeat.pk)]
