"""Retention of job rows (SPEC §9 `JOBS_RETENTION_DAYS`): beat deletes finished chains once
they are old, keeping each brand's newest provisioning chain as its history."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobType


def jobs_purge_finished(*, older_than_days: float | None = None) -> int:
    """Delete finished chains older than the retention (every row finished and unchanged for
    that long), keeping each brand's newest provisioning chain as history. Returns the number of
    rows deleted."""
    days = settings.JOBS_RETENTION_DAYS if older_than_days is None else older_than_days
    cutoff = timezone.now() - timedelta(days=days)
    newest_per_brand = (
        AsyncJob.objects.filter(
            root__isnull=True, job_type=JobType.PROVISION_WORKSPACE, brand_id__isnull=False
        )
        .order_by("brand_id", "-created_at")
        .distinct("brand_id")
        .values_list("id", flat=True)
        if _supports_distinct_on()
        else _newest_roots_portable()
    )
    keep = set(newest_per_brand)
    # A chain is old only when none of its rows is unfinished or changed within the retention:
    # the root's own `updated_at` is not bumped when the chain's last step finishes.
    active_roots = (
        AsyncJob.objects.filter(root__isnull=False)
        .filter(Q(status=JobStatus.IN_PROGRESS) | Q(updated_at__gte=cutoff))
        .values("root_id")
    )
    doomed = [
        pk
        for pk in AsyncJob.objects.filter(root__isnull=True, updated_at__lt=cutoff)
        .exclude(status=JobStatus.IN_PROGRESS)
        .exclude(pk__in=active_roots)
        .values_list("id", flat=True)
        if pk not in keep
    ]
    deleted = 0
    for start in range(0, len(doomed), 500):
        batch = doomed[start : start + 500]
        deleted += AsyncJob.objects.filter(Q(root_id__in=batch) | Q(pk__in=batch)).delete()[0]
    return deleted


def _supports_distinct_on() -> bool:
    return connection.features.can_distinct_on_fields


def _newest_roots_portable() -> list[uuid.UUID]:
    newest: dict[uuid.UUID, tuple[Any, uuid.UUID]] = {}
    for job_id, brand_id, created_at in AsyncJob.objects.filter(
        root__isnull=True, job_type=JobType.PROVISION_WORKSPACE, brand_id__isnull=False
    ).values_list("id", "brand_id", "created_at"):
        if brand_id is None:
            continue
        if brand_id not in newest or created_at > newest[brand_id][0]:
            newest[brand_id] = (created_at, job_id)
    return [job_id for _, job_id in newest.values()]
