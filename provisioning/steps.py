"""The chain's steps (SPEC §6.3): provision-workspace, then create-market / activate-markets /
activate-brand-workspace. Each runs for one claimed job row and reads its inputs from the
database; every write is conditional on its attempt still being pending (and, for a job, on its
claim token), so a cancel, a deactivate or a stale reconcile that won stops it without side
effects beyond deleting what it created itself.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from jobs import services as job_services
from jobs.models import JobStatus, JobStep
from jobs.runner import StepRun
from kernel import context
from kernel.errors import DomainError
from kernel.queries import db_value, fetch_one, quoted_column, quoted_table
from provisioning import services as attempts
from provisioning import states
from provisioning.exceptions import UpstreamError, UpstreamRateLimitedError
from provisioning.lifecycle import (
    Readiness,
    client_for_org,
    empty_quietly,
    pointer_write,
    workspace_create_or_adopt,
    workspace_read_readiness,
)
from provisioning.markets import market_discard_unrecorded, market_release
from provisioning.models import AttemptReason, AttemptStartedBy, AttemptStatus, ProvisioningAttempt
from provisioning.orchestration import (
    activate_markets_in_workspace,
    brand_workspace_activate,
    market_create_flat_run,
    market_input_from_metadata,
    market_provision_reserved,
    reason_for,
)
from provisioning.outcome import Outcome
from serenity.models import Brand, BrandStatus, Market, MarketStatus
from serenity.slices import Slice

logger = logging.getLogger("serenity.provisioning")


def _error(code: str, message: str, *, retryable: bool) -> dict[str, Any]:
    return {"code": code, "message": message, "retryable": retryable}


JOB_ERRORS: dict[str, dict[str, Any]] = {
    "subworkspaceCreationFailed": _error(
        "subworkspaceCreationFailed",
        "Semrush could not create the brand's workspace.",
        retryable=False,
    ),
    "subworkspaceCreationTimeout": _error(
        "subworkspaceCreationTimeout",
        "The brand's workspace did not become ready in time.",
        retryable=True,
    ),
    "subworkspaceGone": _error(
        "subworkspaceGone",
        "The brand's workspace no longer exists; activate the brand again.",
        retryable=True,
    ),
    "ambiguousWorkspace": _error(
        "ambiguousWorkspace", "Several Semrush workspaces match this brand.", retryable=False
    ),
    "workspaceNotEmpty": _error(
        "workspaceNotEmpty",
        "A Semrush workspace with this name exists and is not empty.",
        retryable=False,
    ),
    "upstreamUnauthorized": _error(
        "upstreamUnauthorized", "Semrush rejected the organization's credential.", retryable=False
    ),
    "upstreamForbidden": _error(
        "upstreamForbidden",
        "Semrush refused access with the organization's credential.",
        retryable=False,
    ),
    "serenityUpstreamError": _error(
        "serenityUpstreamError", "Semrush could not complete the request.", retryable=True
    ),
}


def job_error_for(error: DomainError) -> dict[str, Any]:
    return JOB_ERRORS.get(error.code) or _error(
        "jobFailed", "The job failed unexpectedly.", retryable=False
    )


def _attempt_for(run: StepRun) -> ProvisioningAttempt | None:
    """The chain's attempt with its brand and the brand's org (one query)."""
    attempt_id = run.job.metadata.get("attemptId")
    if not attempt_id:
        return None
    return fetch_one(
        ProvisioningAttempt, {"pk": attempt_id}, related=("brand", "brand__organization")
    )


def _end_as_attempt_says(run: StepRun, attempt: ProvisioningAttempt) -> None:
    """The attempt is no longer pending (cancelled, reconciled): end this step accordingly and
    clean up a candidate we freshly created that was never promoted."""
    if attempt.reason == AttemptReason.STALE:
        error = attempts.stale_error()
        status = JobStatus.FAILED
    else:
        error = job_services.cancelled_error()
        status = JobStatus.CANCELLED
    # The job's end and the release of the chain's market reservation (if nothing was created
    # for it, SPEC §3) commit together: a worker dying between them left a finished job, which
    # never runs again, and a reservation only the stale sweep would free.
    with transaction.atomic():
        job_services.job_finish(
            job=run.job, claim_token=run.claim_token, status=status, error=error
        )
        _drop_reservation(run.job.metadata)
    cleanup_candidate(attempt_id=attempt.id)


def cleanup_candidate(*, attempt_id: uuid.UUID) -> None:
    """Empty a freshly created, never promoted candidate of a failed attempt (once)."""
    attempt = (
        ProvisioningAttempt.objects.select_related("brand__organization")
        .filter(
            pk=attempt_id,
            status=AttemptStatus.FAILED,
            freshly_created=True,
            workspace_promoted=False,
            cleanup_done=False,
            candidate_workspace_id__isnull=False,
        )
        .first()
    )
    if attempt is None:
        return
    organization = attempt.brand.organization
    assert attempt.candidate_workspace_id is not None
    if Brand.objects.filter(semrush_sub_workspace_id=attempt.candidate_workspace_id).exists():
        # It became a brand's canonical workspace after all (a sync path set the pointer, or
        # another brand adopted the empty shell): it is not ours to empty.
        ProvisioningAttempt.objects.filter(pk=attempt.id).update(cleanup_done=True)
        return
    client = client_for_org(organization, attempt_id=str(attempt.id))
    if empty_quietly(
        client=client,
        workspace_id=attempt.candidate_workspace_id,
        parent_id=organization.semrush_parent_workspace_id,
    ):
        ProvisioningAttempt.objects.filter(pk=attempt.id).update(cleanup_done=True)


def _fail_chain(run: StepRun, attempt: ProvisioningAttempt, error: DomainError) -> None:
    """Before promotion: the attempt fails with its reason, the chain with its error code."""
    reason = reason_for(error)
    # The attempt's failure, the job's end and the release of the chain's market reservation
    # commit together (see `_end_as_attempt_says`): nothing was created for the market before
    # promotion, so its slice is free again (SPEC §3, "failure paths that created nothing
    # delete their reservation").
    with transaction.atomic():
        failed = states.transition(
            attempt_id=attempt.id, to=AttemptStatus.FAILED, reason=reason, error=error.message
        )
        if failed:
            job_services.job_finish(
                job=run.job,
                claim_token=run.claim_token,
                status=JobStatus.FAILED,
                error=job_error_for(error),
            )
            _drop_reservation(run.job.metadata)
    if not failed:
        fresh = ProvisioningAttempt.objects.get(pk=attempt.id)
        _end_as_attempt_says(run, fresh)
        return
    if error.code not in ("subworkspaceCreationFailed",):
        # A terminal workspace is left alone (it cannot be used or deleted); any other failure
        # empties a candidate this attempt created.
        cleanup_candidate(attempt_id=attempt.id)


def provision_workspace(run: StepRun) -> None:
    """One hop of the settle loop: create-or-adopt (first hop), one status read, then promote,
    fail, or schedule the next read after the backoff."""
    attempt = _attempt_for(run)
    if attempt is None:
        job_services.job_finish(
            job=run.job,
            claim_token=run.claim_token,
            status=JobStatus.FAILED,
            error=_error("jobFailed", "The job failed unexpectedly.", retryable=False),
        )
        return
    context.bind(attempt_id=attempt.id)
    if attempt.status != AttemptStatus.PENDING:
        _end_as_attempt_says(run, attempt)
        return
    brand = attempt.brand
    organization = brand.organization
    client = client_for_org(
        organization, brand_id=str(brand.pk), attempt_id=str(attempt.id), job_id=str(run.job.id)
    )
    # No separate staleness bump: every outcome of this hop writes the attempt (candidate,
    # promotion, the next read, or its end), and a hop is far shorter than the stale threshold.
    candidate = attempt.candidate_workspace_id
    try:
        if candidate is None:
            if (
                attempt.started_by != AttemptStartedBy.CREATE_BRAND
                and brand.semrush_sub_workspace_id
            ):
                candidate = brand.semrush_sub_workspace_id
                fresh = False
            else:
                # A brand create's attempt is its brand's first: no earlier candidates to ask for.
                own_earlier = (
                    set()
                    if attempt.started_by == AttemptStartedBy.CREATE_BRAND
                    else {
                        c
                        for c in ProvisioningAttempt.objects.filter(brand_id=brand.pk)
                        .exclude(pk=attempt.id)
                        .values_list("candidate_workspace_id", flat=True)
                        if c
                    }
                )
                workspace = workspace_create_or_adopt(
                    client=client,
                    brand=brand,
                    parent_id=organization.semrush_parent_workspace_id or "",
                    own_earlier_candidates=own_earlier,
                )
                candidate, fresh = workspace.id, workspace.freshly_created
            recorded = states.update_pending(
                attempt_id=attempt.id,
                only_if={"candidate_workspace_id": None},
                candidate_workspace_id=candidate,
                freshly_created=fresh,
            )
            if recorded:
                # What was just written, for the promotion and a handed-over step of this hop.
                attempt.candidate_workspace_id, attempt.freshly_created = candidate, fresh
            else:
                # Cancelled (or a duplicate delivery recorded one) meanwhile.
                current = ProvisioningAttempt.objects.get(pk=attempt.id)
                if fresh and current.candidate_workspace_id != candidate:
                    empty_quietly(
                        client=client,
                        workspace_id=candidate,
                        parent_id=organization.semrush_parent_workspace_id,
                    )
                if current.status != AttemptStatus.PENDING:
                    _end_as_attempt_says(run, current)
                    return
                candidate = current.candidate_workspace_id
            run.keep_alive()
        elif (
            attempt.started_by != AttemptStartedBy.CREATE_BRAND
            and not attempt.freshly_created
            and Brand.objects.filter(pk=brand.pk)
            .values_list("semrush_sub_workspace_id", flat=True)
            .first()
            != candidate
        ):
            # Settling an existing pointer: a pointer that changed meanwhile ends the chain.
            attempts.attempt_cancel(attempt_id=attempt.id)
            _end_as_attempt_says(run, ProvisioningAttempt.objects.get(pk=attempt.id))
            return
        assert candidate is not None
        readiness = workspace_read_readiness(client=client, workspace_id=candidate)
    except UpstreamRateLimitedError as exc:
        # A Retry-After too long to wait in the worker: run this step again then.
        job_services.job_release(
            job_id=run.job.id, claim_token=run.claim_token, delay_seconds=exc.retry_after or 30.0
        )
        return
    except DomainError as error:
        _fail_chain(run, attempt, error)
        return

    if readiness is Readiness.READY:
        _promote(run=run, attempt=attempt, brand=brand, workspace_id=candidate)
    elif readiness is Readiness.TERMINAL:
        _fail_chain(run, attempt, _domain("subworkspaceCreationFailed"))
    else:
        backoff = settings.SERENITY_PROVISION_BACKOFF_SECONDS
        reads_done = run.job.position  # settle reads are positions 0, 1, 2, ...
        if reads_done < len(backoff):
            with transaction.atomic():
                if not states.touch(attempt_id=attempt.id):
                    transaction.set_rollback(True)
                    repeated = None
                else:
                    repeated = job_services.job_complete_and_repeat(
                        job=run.job,
                        claim_token=run.claim_token,
                        result={"workspaceStatus": "notReady"},
                        delay_seconds=backoff[reads_done],
                    )
            if repeated is None:
                current = ProvisioningAttempt.objects.get(pk=attempt.id)
                if current.status != AttemptStatus.PENDING:
                    _end_as_attempt_says(run, current)
        else:
            _fail_chain(run, attempt, _domain("subworkspaceCreationTimeout"))


def _domain(code: str) -> DomainError:
    from provisioning import exceptions

    by_code = {
        "subworkspaceCreationFailed": exceptions.SubworkspaceCreationFailedError,
        "subworkspaceCreationTimeout": exceptions.SubworkspaceCreationTimeoutError,
    }
    return by_code[code]()


def _promote(
    *, run: StepRun, attempt: ProvisioningAttempt, brand: Brand, workspace_id: str
) -> None:
    """Attempt promoted, pointer set, chained job runnable: one transaction. The pointer write
    is conditional (`pointer IS NULL OR pointer = candidate`); a loser is superseded and
    empties only a workspace it created."""
    superseded = False
    cancelled = False
    successor: uuid.UUID | None = None
    inline = settings.JOBS_HAND_OVER_INLINE
    try:
        with transaction.atomic():
            # The conditional write locks the attempt row first, as a cancel does.
            if not states.update_pending(attempt_id=attempt.id, workspace_promoted=True):
                cancelled = True
            elif not _point_brand_at(brand_id=brand.pk, workspace_id=workspace_id):
                superseded = True
                transaction.set_rollback(True)
            elif run.job.next_id is not None:
                successor = job_services.job_complete_and_release_next(
                    job=run.job,
                    claim_token=run.claim_token,
                    result={"workspaceStatus": "ready"},
                    publish=not inline,
                )
                if successor is None:
                    transaction.set_rollback(True)
                    return
            else:
                states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
                job_services.job_finish(
                    job=run.job,
                    claim_token=run.claim_token,
                    status=JobStatus.COMPLETED,
                    result=Outcome(
                        200, {"brandId": str(brand.pk), "provisioningStatus": "ready"}
                    ).as_job_result(),
                )
    except _PointerTakenError:
        superseded = True
    if successor is not None and inline:
        # The chained step's pre-flight reads what this promotion just committed: hand it over.
        attempt.candidate_workspace_id = workspace_id  # recorded earlier, maybe in this hop
        attempt.workspace_promoted = True
        brand.semrush_sub_workspace_id = workspace_id
        run.hand_over(successor, CHAINED_STEPS, carry=attempt)
    if cancelled:
        _end_as_attempt_says(run, ProvisioningAttempt.objects.get(pk=attempt.id))
    elif superseded:
        logger.warning(
            "promotion superseded: the brand points elsewhere", extra={"workspace_id": workspace_id}
        )
        _fail_chain(run, attempt, UpstreamError("The brand's workspace changed meanwhile."))


class _PointerTakenError(Exception):
    """Another brand already points at the workspace (the pointer's unique constraint)."""


def _point_brand_at(*, brand_id: uuid.UUID, workspace_id: str) -> bool:
    """The conditional pointer write (`pointer IS NULL OR pointer = candidate`). A unique
    violation raises `_PointerTakenError` out of the caller's transaction, which rolls back
    whole (the promotion must not stand without its pointer): no savepoint is needed."""
    try:
        return pointer_write(brand_id=brand_id, workspace_id=workspace_id)
    except IntegrityError:
        raise _PointerTakenError() from None


# --- Chained jobs ------------------------------------------------------------------------------


def _chained_preflight(run: StepRun) -> tuple[ProvisioningAttempt, Brand, str] | None:
    """Re-check before touching Semrush: the brand exists, is pending/active, points at the
    promoted workspace, and the attempt is still pending. Otherwise end CANCELLED.

    Handed over by the promoting worker (`carried`), the attempt and brand are the rows that
    promotion committed: a cancel that committed before this job's claim has cancelled the job
    with the attempt (one transaction), so the claim failed; one after it is seen by the final
    write's check (`_still_valid`), as it is after a read here."""
    carried = run.carried
    attempt = carried if isinstance(carried, ProvisioningAttempt) else _attempt_for(run)
    if attempt is None or attempt.status != AttemptStatus.PENDING or not attempt.workspace_promoted:
        _cancel_step(run, attempt)
        return None
    context.bind(attempt_id=attempt.id)
    brand = attempt.brand  # read with the attempt, in the same query
    if (
        brand.status not in (BrandStatus.PENDING, BrandStatus.ACTIVE)
        or brand.semrush_sub_workspace_id is None
        or brand.semrush_sub_workspace_id != attempt.candidate_workspace_id
    ):
        _cancel_step(run, attempt)
        return None
    return attempt, brand, brand.semrush_sub_workspace_id


def _cancel_step(run: StepRun, attempt: ProvisioningAttempt | None) -> None:
    """End the chained step CANCELLED. The job's end, the attempt's, and the release of a market
    reservation of the chain that nothing was created for commit together: a worker dying in
    between left a finished job (never run again) with the attempt pending until the stale
    sweep, or the market `creating`."""
    with transaction.atomic():
        job_services.job_finish(
            job=run.job,
            claim_token=run.claim_token,
            status=JobStatus.CANCELLED,
            error=job_services.cancelled_error(),
        )
        if (
            attempt is not None
            and attempt.status == AttemptStatus.PENDING
            and attempt.workspace_promoted
        ):
            # The promoted workspace is valid and stays: the attempt is done.
            states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
        _drop_reservation(run.job.metadata)


def _still_valid(
    attempt_id: uuid.UUID, brand_id: uuid.UUID, workspace_id: str
) -> Callable[[], bool]:
    """The final write's condition: inside the caller's transaction, lock the attempt (a cancel
    then waits for our commit) and check it is pending and the pointer unchanged."""

    def check() -> bool:
        # One statement; only the attempt row is locked (`OF`): the brand is read, not locked.
        params = [
            db_value(ProvisioningAttempt, "id", attempt_id, connection),
            AttemptStatus.PENDING.value,
            db_value(ProvisioningAttempt, "brand", brand_id, connection),
            workspace_id,
        ]
        with connection.cursor() as cursor:
            cursor.execute(_still_valid_sql(), params)
            return cursor.fetchone() is not None

    return check


@functools.cache
def _still_valid_sql() -> str:
    """`ProvisioningAttempt.objects.select_for_update(of=("self",)).filter(pk=…, status=pending,
    brand_id=…, brand__semrush_sub_workspace_id=…).exists()`, written once: the ORM compiled it
    anew at every market's final write (~1 000 Python calls)."""
    column = quoted_column
    attempt, brand = ProvisioningAttempt, Brand
    lock = " FOR UPDATE OF T0" if connection.features.has_select_for_update_of else ""
    return (
        f"SELECT 1 FROM {quoted_table(attempt)} T0"  # noqa: S608 - identifiers from meta
        f" INNER JOIN {quoted_table(brand)} T1"
        f" ON T0.{column(attempt, 'brand')} = T1.{column(brand, 'id')}"
        f" WHERE T0.{column(attempt, 'id')} = %s AND T0.{column(attempt, 'status')} = %s"
        f" AND T0.{column(attempt, 'brand')} = %s"
        f" AND T1.{column(brand, 'semrush_sub_workspace_id')} = %s LIMIT 1{lock}"
    )


def _finish_chained(
    run: StepRun, attempt: ProvisioningAttempt | None, outcome: Outcome | None
) -> None:
    """Once promotion has succeeded, the chained job's end (but a cancellation) makes the
    attempt `ready`; the job reports the chained outcome."""
    with transaction.atomic():
        if outcome is None:
            job_services.job_finish(
                job=run.job,
                claim_token=run.claim_token,
                status=JobStatus.CANCELLED,
                error=job_services.cancelled_error(),
            )
            if attempt is not None:
                # A cancel or deactivate has already finished the attempt (a no-op then);
                # otherwise the chain is over and the promoted workspace stays: never leave
                # the attempt pending until the stale sweep.
                states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
            return
        job_services.job_finish(
            job=run.job,
            claim_token=run.claim_token,
            status=JobStatus.COMPLETED,
            result=outcome.as_job_result(),
        )
        if attempt is not None:
            states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)


def create_market(run: StepRun) -> None:
    meta = run.job.metadata
    market_input = market_input_from_metadata(meta)
    if meta.get("flat"):
        _create_market_flat(run, market_input)
        return
    checked = _chained_preflight(run)
    if checked is None:  # cancelled, its reservation freed with it
        if run.job.run_count > 1:
            _discard_unrecorded_project(run, market_input.slice)
        return
    attempt, brand, workspace_id = checked
    client = client_for_org(
        brand.organization,
        brand_id=str(brand.pk),
        attempt_id=str(attempt.id),
        job_id=str(run.job.id),
    )
    market = fetch_one(Market, {"pk": meta.get("marketId")})
    if market is None or market.deleted_at is not None:
        _finish_chained(run, attempt, None)
        return
    # An earlier run of this job finished the market (live, or publish_failed after an upstream
    # error) and died before ending the job. While the attempt is pending nothing else may touch
    # the brand's markets, so it is ours: take it back and resume its project, instead of
    # treating the lost reservation as a cancellation (which deleted the project the market
    # points at).
    if (
        market.reserved_by is None
        and market.semrush_project_id is not None
        and Market.objects.filter(
            pk=market.pk, reserved_by__isnull=True, deleted_at__isnull=True
        ).update(reserved_by=attempt.id, status=MarketStatus.CREATING, updated_at=timezone.now())
    ):
        market.refresh_from_db()
    outcome = market_provision_reserved(
        client=client,
        brand=brand,
        market=market_input,
        reservation=market,
        owner=attempt.id,
        workspace_id=workspace_id,
        brand_names=meta.get("brandNames"),
        brand_domain=meta.get("brandDomain"),
        owned_workspace=True,
        still_valid=_still_valid(attempt.id, brand.pk, workspace_id),
        renew=run.keep_alive,
        # A brand create's workspace, made by this attempt: on the step's first run it is empty.
        workspace_new=attempt.freshly_created and run.job.run_count == 1,
    )
    _finish_chained(run, attempt, outcome)


def _discard_unrecorded_project(run: StepRun, slice_: Slice) -> None:
    """This step ran before and its worker died, perhaps after creating the slice's project
    upstream and before recording it; meanwhile the chain ended (a deactivate or cancel emptied
    the workspace before that project appeared, or the attempt went stale). Delete such a
    project unless the workspace's slice is live work again: a pending attempt working on that
    workspace, or a market of the slice being provisioned (SPEC §7: nothing orphaned)."""
    attempt = _attempt_for(run)
    workspace_id = attempt.candidate_workspace_id if attempt else None
    if attempt is None or not workspace_id:
        return
    if (
        ProvisioningAttempt.objects.filter(
            candidate_workspace_id=workspace_id, status=AttemptStatus.PENDING
        ).exists()
        or Market.objects.filter(
            brand_id=attempt.brand_id,
            geo_target_id=slice_.geo_target_id,
            language_code=slice_.language_code,
            status=MarketStatus.CREATING,
            deleted_at__isnull=True,
        ).exists()
    ):
        return
    client = client_for_org(
        attempt.brand.organization, attempt_id=str(attempt.id), job_id=str(run.job.id)
    )
    market_discard_unrecorded(client=client, workspace_id=workspace_id, slice_=slice_)


def _drop_reservation(meta: dict[str, Any]) -> None:
    market_id = meta.get("marketId")
    attempt_id = meta.get("attemptId")
    if market_id and attempt_id:
        market_release(market_id=uuid.UUID(market_id), owner=uuid.UUID(attempt_id))


def _create_market_flat(run: StepRun, market_input: Any) -> None:
    meta = run.job.metadata
    brand = (
        Brand.objects.select_related("organization").filter(pk=run.job.brand_id).first()
        if run.job.brand_id
        else None
    )
    market = Market.objects.filter(pk=meta.get("marketId")).first()
    if brand is None or brand.status == BrandStatus.DELETED or market is None:
        job_services.job_finish(
            job=run.job,
            claim_token=run.claim_token,
            status=JobStatus.CANCELLED,
            error=job_services.cancelled_error(),
        )
        return
    outcome = market_create_flat_run(
        brand=brand,
        market=market_input,
        reservation=market,
        owner=run.job.id,
        parent_id=brand.organization.semrush_parent_workspace_id or "",
        brand_names=meta.get("brandNames"),
        brand_domain=meta.get("brandDomain"),
        renew=run.keep_alive,
    )
    job_services.job_finish(
        job=run.job,
        claim_token=run.claim_token,
        status=JobStatus.COMPLETED,
        result=outcome.as_job_result(),
    )


def activate_markets(run: StepRun) -> None:
    checked = _chained_preflight(run)
    if checked is None:
        return
    attempt, brand, workspace_id = checked
    meta = run.job.metadata
    client = client_for_org(
        brand.organization,
        brand_id=str(brand.pk),
        attempt_id=str(attempt.id),
        job_id=str(run.job.id),
    )
    outcome = activate_markets_in_workspace(
        client=client,
        brand=brand,
        workspace_id=workspace_id,
        owner=attempt.id,
        markets=[market_input_from_metadata(m) for m in meta.get("markets", [])],
        brand_names=meta.get("brandNames"),
        brand_domain=meta.get("brandDomain"),
        still_valid=_still_valid(attempt.id, brand.pk, workspace_id),
        renew=run.keep_alive,
    )
    _finish_chained(run, attempt, outcome)


def activate_brand_workspace(run: StepRun) -> None:
    checked = _chained_preflight(run)
    if checked is None:
        return
    attempt, brand, workspace_id = checked
    outcome = brand_workspace_activate(
        brand=brand,
        workspace_id=workspace_id,
        was_pending=bool(run.job.metadata.get("wasPending")),
    )
    _finish_chained(run, attempt, outcome)


# The steps that follow a promotion, by name (for a hand-over in the promoting worker).
CHAINED_STEPS: dict[str, Callable[[StepRun], None]] = {
    JobStep.CREATE_MARKET: create_market,
    JobStep.ACTIVATE_MARKETS: activate_markets,
    JobStep.ACTIVATE_BRAND_WORKSPACE: activate_brand_workspace,
}


def on_unexpected(run: StepRun, exc: BaseException) -> None:
    """Anything unexpected: the job FAILED `jobFailed`. Before promotion the attempt fails
    (`unexpected`) and a fresh candidate is emptied; after it the attempt is `ready` (the
    workspace is valid) and re-issuing the request is safe."""
    attempt = _attempt_for(run)
    promoted = bool(attempt and attempt.workspace_promoted)
    job_services.job_finish(
        job=run.job,
        claim_token=run.claim_token,
        status=JobStatus.FAILED,
        error=_error("jobFailed", "The job failed unexpectedly.", retryable=promoted),
    )
    if attempt is None:
        return
    if promoted:
        states.transition(attempt_id=attempt.id, to=AttemptStatus.READY)
    elif states.transition(
        attempt_id=attempt.id,
        to=AttemptStatus.FAILED,
        reason=AttemptReason.UNEXPECTED,
        error="Unexpected error.",
    ):
        _drop_reservation(run.job.metadata)
        cleanup_candidate(attempt_id=attempt.id)
