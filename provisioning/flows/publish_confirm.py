"""The background confirmation of a publish (SPEC §12.1): a sync request that could not wait for
Semrush to publish answers `published: false` and hands its `publishing` market to a one-step
job (`market_writes.CONFIRM_STEP`, created with the row's write). The job owns the row's reservation
and holds no brand lease: it reads the project as a chained step does (re-scheduling itself
between reads) and ends the row `live` or `publish_failed` with a write conditional on still
owning it, so a deactivate or a delete meanwhile (which tombstones the row) wins.
"""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from jobs.endings import Decided, Defer, Finish, StepResult
from jobs.models import JobStatus
from jobs.runner import StepRun
from jobs.services import cancelled_error
from provisioning.exceptions import JOB_FAILED_MESSAGE, PublishFailedError
from provisioning.market_writes import CONFIRM_MARKET_KEY, market_writes_commit
from provisioning.markets import market_publish_confirm
from provisioning.outcome import MarketEnd, MarketWrite
from provisioning.upstream import client_for_org
from serenity.models import Market, MarketStatus, WorkspaceMode


def confirm_publish_step(run: StepRun) -> StepResult:
    """Read the market's project until its publish is confirmed; end the job COMPLETED with
    what was confirmed (the market create's answer, `published` true, or its 502), or
    CANCELLED when the row is no longer the job's (tombstoned, deleted, taken over)."""
    market = _owned_market(run)
    if market is None:
        return Finish(JobStatus.CANCELLED, error=cancelled_error())
    client = client_for_org(market.brand.organization, brand_id=str(market.brand_id))
    outcome = market_publish_confirm(
        client=client,
        market=market,
        owner=run.job.id,
        owned_workspace=market.brand.workspace_mode == WorkspaceMode.SUBWORKSPACE,
    )
    if outcome.confirm_in is not None:
        return Defer(delay_seconds=outcome.confirm_in)

    def decide() -> Finish | None:
        # Locked, so a deactivate's tombstone either comes first (and wins) or waits.
        if not _owned_rows(run).select_for_update().exists():
            # The row is no longer the job's (a deactivate or a delete tombstoned it meanwhile).
            return Finish(JobStatus.CANCELLED, error=cancelled_error())
        if not market_writes_commit(outcome.market_writes):
            return None  # not expected under the lock: nothing stands, the re-run decides
        return Finish(JobStatus.COMPLETED, result=outcome.as_job_result())

    return Decided(decide)


def on_unexpected(run: StepRun, exc: BaseException) -> StepResult:
    """The job FAILED `jobFailed`; its market, if still its own, ends `publish_failed` (a later
    create of the slice resumes it and publishes again)."""
    market_id = run.job.metadata.get(CONFIRM_MARKET_KEY)
    write = MarketWrite(
        market_id=uuid.UUID(str(market_id)),
        owner=run.job.id,
        end=MarketEnd.PUBLISH_FAILED,
        project_id=None,
        workspace_id="",
        owned_workspace=False,
        publish_error={"code": PublishFailedError.code, "message": PublishFailedError().message},
    )
    error = {"code": "jobFailed", "message": JOB_FAILED_MESSAGE, "retryable": True}

    def decide() -> Finish:
        market_writes_commit((write,))
        return Finish(JobStatus.FAILED, error=error)

    return Decided(decide)


def _owned_rows(run: StepRun) -> QuerySet[Market]:
    """The job's `publishing` market while the job owns it (not tombstoned)."""
    return Market.objects.filter(
        pk=run.job.metadata.get(CONFIRM_MARKET_KEY),
        reserved_by=run.job.id,
        status=MarketStatus.PUBLISHING,
        deleted_at__isnull=True,
    )


def _owned_market(run: StepRun) -> Market | None:
    """`_owned_rows`' market, with its brand and org."""
    return _owned_rows(run).select_related("brand__organization").first()
