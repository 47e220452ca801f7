"""Periodic job maintenance: the dispatcher and retention."""

from __future__ import annotations

from celery import shared_task

from jobs.dispatch import jobs_dispatch_due
from jobs.retention import jobs_purge_finished


@shared_task(name="jobs.dispatch_due_jobs", ignore_result=True)
def dispatch_due_jobs() -> int:
    return jobs_dispatch_due()


@shared_task(name="jobs.purge_finished_jobs", ignore_result=True)
def purge_finished_jobs() -> int:
    return jobs_purge_finished()
