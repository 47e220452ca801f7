"""Celery tasks of reconciliations: the plan's batches, the sweep, and the `repairMarkets` step
(registered with the job runner as every chain step is). Thin: ids in, one call."""

from __future__ import annotations

import uuid

from celery import shared_task

from jobs.models import JobStep
from jobs.runner import register_step, run_step
from jobs.services import task_name_for
from provisioning import chain
from provisioning.reconcile.repair import repair_markets_step
from provisioning.reconcile.run import reconciliation_run_batch
from provisioning.reconcile.services import PLAN_TASK
from provisioning.reconcile.sweep import drift_sweep

register_step(
    JobStep.REPAIR_MARKETS,
    run=chain.chain_step(repair_markets_step),
    on_unexpected=chain.on_unexpected,
    fair=True,
)


@shared_task(name=task_name_for(JobStep.REPAIR_MARKETS), ignore_result=True)
def repair_markets(job_id: str) -> None:
    run_step(job_id=job_id)


# A batch re-delivered after a lost worker starts after the last brand it recorded.
@shared_task(name=PLAN_TASK, ignore_result=True, acks_late=True)
def plan_batch(reconciliation_id: str) -> None:
    reconciliation_run_batch(reconciliation_id=uuid.UUID(reconciliation_id))


@shared_task(name="reconcile.sweep", ignore_result=True)
def sweep() -> dict[str, int]:
    return drift_sweep()
