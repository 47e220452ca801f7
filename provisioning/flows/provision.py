"""The provision-workspace step (SPEC §6.3), the first step of every chain: create-or-adopt the
attempt's candidate (first hop), read its status once, then promote, fail, or read again after
the backoff (a new row: no worker slot is held while the workspace settles). What the hop
decides is a `chain.StepEnd`, returned for the runner to commit (`chain.chain_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from jobs.runner import StepRun
from kernel import context
from kernel.errors import DomainError
from provisioning import quota, services
from provisioning.chain import (
    FIRST_READ_DEFERRED,
    SETTLE_AGE,
    Crashed,
    Ending,
    Failed,
    Promoted,
    RetryLater,
    SettleLater,
    StepEnd,
    StoodDown,
    attempt_of,
)
from provisioning.exceptions import (
    SubworkspaceGoneError,
    UpstreamRateLimitedError,
)
from provisioning.family import (
    GROUP_KEY,
    ONBOARDING_KEY,
    Readiness,
    Workspace,
    classify_status,
    family_shared,
    family_status_shared,
    workspace_create_or_adopt,
)
from provisioning.models import AttemptStartedBy, AttemptStatus, ProvisioningAttempt
from provisioning.selectors import settle_seconds_learned
from provisioning.semrush import SemrushClient
from provisioning.upstream import client_for_org
from provisioning.workspace import (
    brand_pointer,
    candidate_record,
    empty_quietly,
    settle_delays,
    settle_next,
    workspace_gone_recover,
    workspace_read_readiness,
)
from serenity.models import Organization


def provision_workspace(run: StepRun) -> Ending:
    """One hop of the settle loop: create-or-adopt (first hop), one status read, then promote,
    fail, or schedule the next read after the backoff."""
    attempt = attempt_of(run)
    if attempt is None:
        return Ending(None, Crashed())
    context.bind(attempt_id=attempt.id)
    return Ending(attempt, _provision_hop(run, attempt))


def _provision_hop(run: StepRun, attempt: ProvisioningAttempt) -> StepEnd:
    """What this hop decides. An attempt no longer pending stands down; one settling the
    brand's existing pointer stands down (cancelled) when the pointer changed meanwhile."""
    if attempt.status != AttemptStatus.PENDING:
        return StoodDown(attempt)
    brand = attempt.brand
    client = client_for_org(brand.organization, brand_id=str(brand.pk), attempt_id=str(attempt.id))
    candidate = attempt.candidate_workspace_id
    try:
        if candidate is None:
            found = _candidate_find(run, client, attempt)
            if isinstance(found, StoodDown):
                return found
            candidate = found.id
            learned = _first_read_delay(brand.organization, found)
            if learned is not None:
                return learned
        elif (
            attempt.started_by != AttemptStartedBy.CREATE_BRAND
            and not attempt.freshly_created
            and brand_pointer(brand.pk) != candidate
        ):
            services.attempt_cancel(attempt_id=attempt.id)
            return StoodDown(ProvisioningAttempt.objects.get(pk=attempt.id))
        read = _candidate_read(run, client, attempt, candidate)
    except UpstreamRateLimitedError as exc:
        return RetryLater(exc.retry_after or 30.0)
    except DomainError as error:
        return Failed(error)
    if isinstance(read, StoodDown | Failed):
        return read
    return _after_read(run, *read)


def _candidate_read(
    run: StepRun, client: SemrushClient, attempt: ProvisioningAttempt, candidate: str
) -> tuple[str, Readiness] | StoodDown | Failed:
    """One status read of the candidate: (the workspace read, its readiness). When the
    candidate is the brand's own pointer and is gone upstream, it is healed
    (`workspace_gone_recover`): an activate then provisions a new workspace, as for a brand
    without one (SPEC §10.2), and reads that one; anything else fails with the heal's error.
    Raises the reads' domain errors."""
    try:
        return candidate, _status_read(run, client, attempt, candidate)
    except SubworkspaceGoneError:
        if attempt.freshly_created or brand_pointer(attempt.brand_id) != candidate:
            raise
    healed = workspace_gone_recover(
        client=client,
        brand_id=attempt.brand_id,
        workspace_id=candidate,
        parent_id=attempt.brand.organization.semrush_parent_workspace_id,
        attempt_id=attempt.id,
        replaceable=attempt.started_by == AttemptStartedBy.ACTIVATE,
    )
    if healed is not None:
        return Failed(healed)
    attempt.refresh_from_db()
    found = _candidate_find(run, client, attempt)
    if isinstance(found, StoodDown):
        return found
    return found.id, workspace_read_readiness(client=client, workspace_id=found.id)


def _status_read(
    run: StepRun, client: SemrushClient, attempt: ProvisioningAttempt, candidate: str
) -> Readiness:
    """The candidate's status: an onboarding item's settle read through the listing its
    onboarding's reads due around the same time share (`family_status_shared`, SPEC §12.5)
    when that shows the workspace, else (and for any other chain) a read of its own. The read
    is due when the candidate was recorded, plus its row's scheduled age."""
    onboarding_id = run.job.metadata.get(ONBOARDING_KEY)
    if onboarding_id is not None and attempt.candidate_at is not None:
        age = float(run.job.metadata.get(SETTLE_AGE) or 0.0)
        status = family_status_shared(
            client=client,
            onboarding_id=onboarding_id,
            parent_id=attempt.brand.organization.semrush_parent_workspace_id or "",
            job_id=run.job.id,
            workspace_id=candidate,
            due=attempt.candidate_at + timedelta(seconds=age),
        )
        if status is not None:
            return classify_status(status)
    return workspace_read_readiness(client=client, workspace_id=candidate)


def _after_read(run: StepRun, candidate: str, readiness: Readiness) -> StepEnd:
    """What one status read decides (`workspace.settle_next`, with the caller's patience,
    `settle_delays`): promote, fail, or read again after the wait (a new row)."""
    # Settle reads are positions 0, 1, 2, ... (1, 2, ... when the first hop deferred its read).
    reads_done = run.job.position - (1 if run.job.metadata.get(FIRST_READ_DEFERRED) else 0)
    try:
        wait = settle_next(readiness, reads_done=reads_done, delays=settle_delays())
    except DomainError as error:
        return Failed(error)
    return Promoted(candidate) if wait is None else SettleLater(wait)


def _first_read_delay(organization: Organization, found: Workspace) -> SettleLater | None:
    """A workspace this hop created is not read at once when the parent's workspaces are known
    to take a while (SPEC §11.1): the first read waits the learned settle time. An adopted one
    is ready already (adoption requires it), so it is read now, as without history; so is any
    in a sync request, which polls from the first read (§4)."""
    if not found.freshly_created or not quota.in_step():
        return None
    learned = settle_seconds_learned(parent_id=organization.semrush_parent_workspace_id or "")
    if not learned:
        return None
    return SettleLater(learned, first_read_deferred=True)


def _candidate_find(
    run: StepRun, client: SemrushClient, attempt: ProvisioningAttempt
) -> Workspace | StoodDown:
    """Create-or-adopt the attempt's candidate and record it (once): the candidate, freshly
    created when this hop created it. Raises domain errors."""
    parent_id = attempt.brand.organization.semrush_parent_workspace_id or ""
    workspace = workspace_create_or_adopt(
        client=client,
        brand=attempt.brand,
        parent_id=parent_id,
        attempt_id=attempt.id,
        family=_shared_family(run, client, parent_id),
    )
    if not candidate_record(attempt_id=attempt.id, workspace=workspace):
        current = _candidate_taken(client, attempt, workspace)
        if current.status != AttemptStatus.PENDING:
            return StoodDown(current)
        assert current.candidate_workspace_id is not None
        workspace = Workspace(id=current.candidate_workspace_id, freshly_created=False)
    run.keep_alive()
    return workspace


def _shared_family(
    run: StepRun, client: SemrushClient, parent_id: str
) -> Callable[[], list[dict[str, Any]]] | None:
    """An onboarding item's first hop lists the family with its group (SPEC §11.2), unless a
    worker died running it: what that run may have created must be seen (`family_shared`). A
    quota re-schedule is not such a run: no create is left unrecorded by one."""
    onboarding_id = run.job.metadata.get(ONBOARDING_KEY)
    if onboarding_id is None or run.job.expired_claims:
        return None
    group = int(run.job.metadata.get(GROUP_KEY) or 0)
    return lambda: family_shared(
        client=client,
        onboarding_id=onboarding_id,
        group=group,
        parent_id=parent_id,
        job_id=run.job.id,
    )


def _candidate_taken(
    client: SemrushClient, attempt: ProvisioningAttempt, workspace: Workspace
) -> ProvisioningAttempt:
    """Recording the candidate changed nothing: the attempt was cancelled, or a duplicate
    delivery recorded one first. A workspace this run created that is not the recorded one is
    emptied. Returns the attempt as it is now."""
    current = ProvisioningAttempt.objects.get(pk=attempt.id)
    if workspace.freshly_created and current.candidate_workspace_id != workspace.id:
        emptied = empty_quietly(
            client=client,
            workspace_id=workspace.id,
            parent_id=attempt.brand.organization.semrush_parent_workspace_id,
        )
        # An attempt cancelled while its create was in flight keeps what the create made, so
        # that a redrive (flows.redrive) settles that workspace again instead of a second one.
        ProvisioningAttempt.objects.filter(pk=attempt.id, candidate_workspace_id=None).update(
            candidate_workspace_id=workspace.id, freshly_created=True, cleanup_done=emptied
        )
    return current
