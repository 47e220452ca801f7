"""The org's queued markets are capped wherever they are queued (SPEC §13.6): an onboarding's
items, an async brand create with a market, an async market create and an async activation
each count every market the org has queued, not only their own. Past the cap → 429
`queuedMarketsLimit` with `Retry-After`, nothing written.

A queued market is a reserved one (`creating`: a create's, an onboarding item's with one
market) or one planned by an activate-markets step that has not started (an activation's, an
onboarding item's with several markets: they are reserved when the step runs).

An onboarding counts under the org's onboarding lock (its accept is serialized with the
others); a single create counts without a lock, so requests accepted at the same instant may
pass the cap by their own number.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from django.conf import settings
from django.db.models import Count, Func, IntegerField, OuterRef, QuerySet, Subquery, Sum
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Coalesce

from jobs.models import AsyncJob, JobStatus, JobStep
from provisioning.exceptions import QueuedMarketsLimitError
from serenity.models import Market, MarketStatus, Organization


def queued_markets_check(*, organization_id: uuid.UUID, adding: int) -> None:
    """Raises `QueuedMarketsLimitError` when `adding` more queued markets would take the org
    past `SERENITY_ORG_QUEUED_MARKETS_MAX`."""
    if adding <= 0:
        return
    cap = settings.SERENITY_ORG_QUEUED_MARKETS_MAX
    queued = queued_markets(organization_id)
    if queued + adding > cap:
        raise QueuedMarketsLimitError(
            f"The organization may have at most {cap} markets queued; {queued} are, and this "
            f"request adds {adding}.",
            retry_after=settings.SERENITY_ONBOARDING_LIMIT_RETRY_SECONDS,
        )


class JSONArrayLength(Func):
    """The length of a JSON array (PostgreSQL's `jsonb_array_length`, SQLite's
    `json_array_length`)."""

    function = "jsonb_array_length"
    output_field = IntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return super().as_sql(compiler, connection, function="json_array_length", **extra)


def queued_markets(organization_id: uuid.UUID) -> int:
    """The org's reserved markets and those its activate-markets steps that have not started
    plan, in one statement (an accept's SQL budget: tests/chains/test_query_budget.py)."""
    counts = _queued_counts().filter(pk=organization_id).first()
    return 0 if counts is None else int(counts[0]) + int(counts[1])


@functools.cache
def _queued_counts() -> QuerySet[Organization, tuple[int, int]]:
    """Every org's (reserved, planned) markets, built once: resolving the two correlated
    subqueries was three quarters of the statement's Python (about a fifth of an async create's
    accept), and the queryset is only ever narrowed (`filter` clones it), never evaluated."""
    reserved = (
        Market.objects.filter(
            brand__organization_id=OuterRef("pk"),
            status=MarketStatus.CREATING,
            deleted_at__isnull=True,
        )
        .order_by()
        .values("brand__organization_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    # An activate-markets step's `markets` is the list of markets it plans (flows.activate).
    planned = (
        AsyncJob.objects.filter(
            organization_id=OuterRef("pk"),
            step=JobStep.ACTIVATE_MARKETS,
            status=JobStatus.IN_PROGRESS,
            started_at__isnull=True,
            metadata__markets__isnull=False,
        )
        .order_by()
        .values("organization_id")
        .annotate(n=Sum(JSONArrayLength(KeyTransform("markets", "metadata"))))
        .values("n")
    )
    return Organization.objects.annotate(
        reserved=Coalesce(Subquery(reserved), 0), planned=Coalesce(Subquery(planned), 0)
    ).values_list("reserved", "planned")
