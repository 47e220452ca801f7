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

import uuid

from django.conf import settings
from django.db import connection

from jobs.models import AsyncJob, JobStatus, JobStep
from provisioning.exceptions import QueuedMarketsLimitError
from serenity.models import Brand, Market, MarketStatus


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


def queued_markets(organization_id: uuid.UUID) -> int:
    """The org's reserved markets and those its activate-markets steps that have not started
    plan, in one statement on PostgreSQL (an accept's SQL budget: tests/chains/
    test_query_budget.py); through the ORM on the embedded default's SQLite."""
    if connection.vendor != "postgresql":
        return _queued_markets_portable(organization_id)
    # Table names from the models, every value bound: nothing of a request is spliced in.
    sql = f"""
        SELECT
            (SELECT count(*) FROM {Market._meta.db_table} m
               JOIN {Brand._meta.db_table} b ON b.id = m.brand_id
              WHERE b.organization_id = %(org)s AND m.status = %(creating)s
                AND m.deleted_at IS NULL)
          + (SELECT coalesce(sum(jsonb_array_length(j.metadata -> 'markets')), 0)
               FROM {AsyncJob._meta.db_table} j
              WHERE j.organization_id = %(org)s AND j.step = %(step)s
                AND j.status = %(in_progress)s AND j.started_at IS NULL
                AND jsonb_typeof(j.metadata -> 'markets') = 'array')
    """  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "org": organization_id,
                "creating": MarketStatus.CREATING,
                "step": JobStep.ACTIVATE_MARKETS,
                "in_progress": JobStatus.IN_PROGRESS,
            },
        )
        (count,) = cursor.fetchone()
    return int(count)


def _queued_markets_portable(organization_id: uuid.UUID) -> int:
    """The same count in two ORM reads (SQLite has no jsonb functions)."""
    reserved = Market.objects.filter(
        brand__organization_id=organization_id,
        status=MarketStatus.CREATING,
        deleted_at__isnull=True,
    ).count()
    planned = AsyncJob.objects.filter(
        organization_id=organization_id,
        step=JobStep.ACTIVATE_MARKETS,
        status=JobStatus.IN_PROGRESS,
        started_at__isnull=True,
    ).values_list("metadata", flat=True)
    return reserved + sum(
        len(meta["markets"])
        for meta in planned
        if isinstance(meta, dict) and isinstance(meta.get("markets"), list)
    )
