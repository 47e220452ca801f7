"""Celery tasks: one per chain step (stable names), plus the sweep and cleanup. Thin: a job id
in, `jobs.runner.run_step`, which runs the handler registered here for the job's step."""

from __future__ import annotations

import uuid

from celery import shared_task

from jobs.endings import committed, committed_failure
from jobs.models import JobStep
from jobs.runner import register_step, run_step
from jobs.services import task_name_for
from provisioning import chain
from provisioning.credential_hold import RECHECK_TASK, credentials_recheck
from provisioning.flows import (
    activate,
    deactivate,
    market_create,
    onboarding_cancel,
    prompts,
    provision,
    publish_confirm,
)
from provisioning.ledger.retention import upstream_calls_purge
from provisioning.market_writes import CONFIRM_STEP
from provisioning.services import CLEANUP_TASK
from provisioning.sweep import attempts_sweep
from provisioning.workspace import cleanup_candidate

register_step(
    JobStep.PROVISION_WORKSPACE,
    run=chain.chain_step(provision.provision_workspace),
    on_unexpected=chain.on_unexpected,
    fair=True,
)
register_step(
    JobStep.CREATE_MARKET,
    run=chain.chain_step(market_create.create_market_step),
    on_unexpected=chain.on_unexpected,
    fair=True,
)
register_step(
    JobStep.ACTIVATE_MARKETS,
    run=chain.chain_step(activate.activation_step),
    on_unexpected=chain.on_unexpected,
    fair=True,
)
register_step(
    JobStep.ACTIVATE_BRAND_WORKSPACE,
    run=chain.chain_step(activate.activation_step),
    on_unexpected=chain.on_unexpected,
    fair=True,
)
register_step(
    JobStep.DEACTIVATE_BRAND,
    run=chain.chain_step(deactivate.deactivate_step),
    on_unexpected=chain.on_unexpected,
    fair=True,
)
register_step(
    CONFIRM_STEP,
    run=chain.quota_deferring(committed(publish_confirm.confirm_publish_step)),
    on_unexpected=committed_failure(publish_confirm.on_unexpected),
    fair=True,
)
register_step(
    JobStep.CLASSIFY_PROMPTS,
    run=chain.quota_deferring(committed(prompts.classify_prompts_step)),
    on_unexpected=committed_failure(prompts.on_unexpected),
    fair=True,
)


@shared_task(name=task_name_for(JobStep.PROVISION_WORKSPACE), ignore_result=True)
def provision_workspace(job_id: str) -> None:
    run_step(job_id=job_id)


@shared_task(name=task_name_for(JobStep.CREATE_MARKET), ignore_result=True)
def create_market(job_id: str) -> None:
    run_step(job_id=job_id)


@shared_task(name=task_name_for(JobStep.ACTIVATE_MARKETS), ignore_result=True)
def activate_markets(job_id: str) -> None:
    run_step(job_id=job_id)


@shared_task(name=task_name_for(JobStep.ACTIVATE_BRAND_WORKSPACE), ignore_result=True)
def activate_brand_workspace(job_id: str) -> None:
    run_step(job_id=job_id)


@shared_task(name=task_name_for(JobStep.DEACTIVATE_BRAND), ignore_result=True)
def deactivate_brand(job_id: str) -> None:
    run_step(job_id=job_id)


@shared_task(name=task_name_for(CONFIRM_STEP), ignore_result=True)
def confirm_publish(job_id: str) -> None:
    run_step(job_id=job_id)


@shared_task(name=task_name_for(JobStep.CLASSIFY_PROMPTS), ignore_result=True)
def classify_prompts(job_id: str) -> None:
    run_step(job_id=job_id)


@shared_task(name=CLEANUP_TASK, ignore_result=True)
def cleanup_attempt(attempt_id: str) -> None:
    cleanup_candidate(attempt_id=attempt_id)  # type: ignore[arg-type]


@shared_task(name=onboarding_cancel.THRESHOLD_CANCEL_TASK, ignore_result=True)
def onboarding_threshold_cancel(onboarding_id: str) -> None:
    onboarding_cancel.onboarding_items_cancel(onboarding_id=onboarding_id)  # type: ignore[arg-type]


@shared_task(name="provisioning.sweep_stale_attempts", ignore_result=True)
def sweep_stale_attempts() -> dict[str, int]:
    return attempts_sweep()


@shared_task(name="provisioning.purge_upstream_calls", ignore_result=True)
def purge_upstream_calls() -> int:
    return upstream_calls_purge()


@shared_task(name=RECHECK_TASK, ignore_result=True)
def recheck_credentials(organization_id: str | None = None) -> dict[str, int]:
    return credentials_recheck(
        organization_id=uuid.UUID(organization_id) if organization_id else None
    )
