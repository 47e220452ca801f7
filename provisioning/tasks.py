"""Celery tasks: one per chain step (stable names), plus the sweep and cleanup. Thin: a job id
in, `jobs.runner.run_step` with the step's handler."""

from __future__ import annotations

from celery import shared_task

from jobs.models import JobStep
from jobs.runner import run_step
from jobs.services import task_name_for
from provisioning import steps
from provisioning.flows import prompts
from provisioning.sweep import attempts_sweep


@shared_task(name=task_name_for(JobStep.PROVISION_WORKSPACE), ignore_result=True)
def provision_workspace(job_id: str) -> None:
    run_step(job_id=job_id, handler=steps.provision_workspace, on_unexpected=steps.on_unexpected)


@shared_task(name=task_name_for(JobStep.CREATE_MARKET), ignore_result=True)
def create_market(job_id: str) -> None:
    run_step(job_id=job_id, handler=steps.create_market, on_unexpected=steps.on_unexpected)


@shared_task(name=task_name_for(JobStep.ACTIVATE_MARKETS), ignore_result=True)
def activate_markets(job_id: str) -> None:
    run_step(job_id=job_id, handler=steps.activate_markets, on_unexpected=steps.on_unexpected)


@shared_task(name=task_name_for(JobStep.ACTIVATE_BRAND_WORKSPACE), ignore_result=True)
def activate_brand_workspace(job_id: str) -> None:
    run_step(
        job_id=job_id, handler=steps.activate_brand_workspace, on_unexpected=steps.on_unexpected
    )


@shared_task(name=task_name_for(JobStep.CLASSIFY_PROMPTS), ignore_result=True)
def classify_prompts(job_id: str) -> None:
    run_step(
        job_id=job_id, handler=prompts.classify_prompts_step, on_unexpected=prompts.on_unexpected
    )


@shared_task(name="provisioning.cleanup_attempt", ignore_result=True)
def cleanup_attempt(attempt_id: str) -> None:
    steps.cleanup_candidate(attempt_id=attempt_id)  # type: ignore[arg-type]


@shared_task(name="provisioning.sweep_stale_attempts", ignore_result=True)
def sweep_stale_attempts() -> dict[str, int]:
    return attempts_sweep()
