"""Reading the ledger: the org's recorded upstream calls, newest first (SPEC §13.4)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from kernel.pagination import Page, keyset_page
from provisioning.ledger.models import UpstreamCall

ORDER = ("-at", "-id")


@dataclass(frozen=True)
class UpstreamCallFilters:
    """Filters that combine. `job_id` is a chain's root (the id clients hold); `object_id` an
    upstream workspace or project id; `since` an inclusive lower bound on `at`."""

    brand_id: uuid.UUID | None = None
    job_id: uuid.UUID | None = None
    object_id: str | None = None
    since: datetime | None = None


def upstream_call_list(
    *,
    organization_id: uuid.UUID,
    filters: UpstreamCallFilters,
    cursor: str | None,
    limit: int,
) -> Page[UpstreamCall]:
    """One page of the organization's recorded calls, newest first; another org's rows are
    never read (`organization_id` scopes every query). One query per page."""
    calls = UpstreamCall.objects.filter(organization_id=organization_id)
    if filters.brand_id is not None:
        calls = calls.filter(brand_id=filters.brand_id)
    if filters.job_id is not None:
        calls = calls.filter(job_id=filters.job_id)
    if filters.object_id:
        calls = calls.filter(Q(workspace_id=filters.object_id) | Q(project_id=filters.object_id))
    if filters.since is not None:
        calls = calls.filter(at__gte=filters.since)
    return keyset_page(
        calls,
        kind="upstream-calls",
        ordering=ORDER,
        sort_key=lambda call: [call.at.isoformat(), str(call.pk)],
        cursor=cursor,
        limit=limit,
    )
