"""A step's ending is committed once (SPEC §12.3): the job's ending is decided inside the one
transaction that writes it, so an attempt that ended meanwhile ends the step there, and a chain
runs its chained steps in order, each handing over to the next. Counts and rows, no timing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from jobs import services as job_services
from jobs.models import AsyncJob, JobStatus, JobStep, JobType
from jobs.runner import StepRun
from provisioning import chain
from provisioning.models import ProvisioningAttempt
from tests.chains.helpers import start_async_brand_with_market

pytestmark = pytest.mark.django_db(transaction=True)


def claimed_root(accepted: dict[str, Any]) -> StepRun:
    job = job_services.job_claim(job_id=uuid.UUID(accepted["jobId"]))
    assert job is not None and job.claim_token is not None
    return StepRun(job=job, claim_token=job.claim_token)


def test_a_settle_ending_whose_attempt_was_reconciled_meanwhile_fails_in_that_one_transaction(
    sw_writer, sim, published
):
    # given a claimed first step that read its attempt pending, then the sweep reconciled the
    # attempt as stale before the step ended
    accepted = start_async_brand_with_market(sw_writer)
    run = claimed_root(accepted)
    attempt = chain.attempt_of(run)
    assert attempt is not None and attempt.status == "pending"
    ProvisioningAttempt.objects.filter(pk=attempt.id).update(status="failed", reason="stale")
    # when the step ends with "read again later"
    with CaptureQueriesContext(connection) as captured:
        chain.step_end(run, attempt, chain.SettleLater(5.0))
    # then one transaction ended the chain as the attempt says (FAILED provisioningStale),
    # with no repeat scheduled and the chained job cancelled
    sql = [q["sql"] for q in captured.captured_queries]
    assert (sql.count("BEGIN"), sql.count("COMMIT")) == (1, 1), "\n".join(sql)
    rows = AsyncJob.objects.filter(root_id=run.job.pk)
    root = AsyncJob.objects.get(pk=run.job.pk)
    assert (root.status, root.error) == (
        "FAILED",
        {
            "code": "provisioningStale",
            "message": "Provisioning was abandoned and has been reconciled.",
            "retryable": True,
        },
    )
    assert list(rows.values_list("step", "status")) == [("createMarket", "CANCELLED")]
    assert published == [accepted["jobId"]]


def test_a_settle_ending_that_lost_its_claim_writes_nothing(sw_writer, sim, published):
    # given a claimed first step whose claim another delivery took over (its token changed)
    accepted = start_async_brand_with_market(sw_writer)
    run = claimed_root(accepted)
    attempt = chain.attempt_of(run)
    assert attempt is not None
    AsyncJob.objects.filter(pk=run.job.pk).update(claim_token=uuid.uuid4())
    # when the step ends with "read again later"
    chain.step_end(run, attempt, chain.SettleLater(5.0))
    # then nothing of the ending stands: no repeat, the attempt untouched, the job still open
    assert AsyncJob.objects.filter(root_id=run.job.pk).count() == 1
    assert AsyncJob.objects.get(pk=run.job.pk).status == "IN_PROGRESS"
    assert ProvisioningAttempt.objects.get(pk=attempt.id).updated_at == attempt.updated_at


def test_a_chain_links_its_chained_steps_in_order(published):
    # when a chain is created with two chained steps
    with transaction.atomic():
        root = job_services.job_chains_create(
            [
                job_services.ChainSpec(
                    organization_id=uuid.uuid4(),
                    brand_id=uuid.uuid4(),
                    job_type=JobType.PROVISION_WORKSPACE,
                    first=job_services.StepSpec(JobStep.PROVISION_WORKSPACE, {"a": 1}),
                    then=[
                        job_services.StepSpec(JobStep.CREATE_MARKET, {"b": 2}),
                        job_services.StepSpec(JobStep.ACTIVATE_MARKETS, {"c": 3}),
                    ],
                )
            ]
        )[0]
    # then the root runs first and each row names the next; only the root is runnable and
    # published
    first, second = AsyncJob.objects.filter(root_id=root.pk).order_by("position")
    assert (root.next_id, root.position, root.metadata) == (first.pk, 0, {"a": 1})
    assert (first.step, first.position, first.next_id, first.run_after, first.metadata) == (
        "createMarket",
        1000,
        second.pk,
        None,
        {"b": 2},
    )
    assert (second.step, second.position, second.next_id, second.run_after, second.metadata) == (
        "activateMarkets",
        1001,
        None,
        None,
        {"c": 3},
    )
    assert AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).count() == 3
    assert published == [str(root.pk)]
