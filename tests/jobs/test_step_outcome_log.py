"""The runner's "step ended" line says how the step ended: a step that finished its job FAILED
(a prompts job whose workspace is gone, a chain that failed) is not `outcome: ok`."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.endings import Finish, step_commit
from jobs.models import AsyncJob, JobStatus
from jobs.runner import StepHandlers, StepRun, _run_claimed
from jobs.services import job_claim
from tests.factories import AsyncJobFactory


def claimed_run() -> StepRun:
    job = AsyncJobFactory(brand_id=uuid.uuid4(), run_after=timezone.now() - timedelta(seconds=1))
    claimed = job_claim(job_id=job.id)
    assert claimed is not None and claimed.claim_token is not None
    return StepRun(job=claimed, claim_token=claimed.claim_token)


@pytest.mark.parametrize(
    ("status", "outcome"), [(JobStatus.FAILED, "failed"), (JobStatus.COMPLETED, "ok")]
)
def test_step_ended_line_carries_how_the_job_finished(db, caplog, status, outcome):
    # given a step that finishes its job with `status`
    run = claimed_run()

    def finish(step: StepRun) -> None:
        step_commit(step, Finish(status, error={"code": "x", "message": "x", "retryable": False}))

    # when
    with caplog.at_level(logging.INFO, logger="serenity.jobs"):
        _run_claimed(run, StepHandlers(run=finish, on_unexpected=lambda r, e: None))
    # then
    assert AsyncJob.objects.get(pk=run.job.id).status == status
    ended = [r for r in caplog.records if r.getMessage() == "step ended"]
    assert [r.outcome for r in ended] == [outcome]  # type: ignore[attr-defined]
