"""The brand's Semrush workspace, for every path (SPEC §5, §6.3): create-or-adopt (its search of
the parent's family is `provisioning.family`), status reads, promotion, emptying, and the heal
of a workspace gone upstream.

Nothing here holds a transaction or a row lock across an upstream call. The writes that must be
race-free are conditional UPDATEs: an attempt records its candidate only while it has none, and
promotion sets the brand's pointer only while it is empty or already that workspace.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from kernel.errors import DomainError
from provisioning import quota, states
from provisioning.exceptions import (
    SubworkspaceCreationFailedError,
    SubworkspaceCreationTimeoutError,
    SubworkspaceGoneError,
    UpstreamForbiddenError,
    WorkspaceMisconfiguredError,
)
from provisioning.family import (
    Readiness,
    Workspace,
    classify_status,
)
from provisioning.models import (
    AttemptReason,
    AttemptStatus,
    ProvisioningAttempt,
)
from provisioning.semrush import SemrushClient, SemrushError, SemrushGoneError
from provisioning.upstream import client_for_org, translate_upstream
from serenity.models import Brand, BrandStatus, Market, MarketStatus

logger = logging.getLogger("serenity.provisioning")


def workspace_read_readiness(*, client: SemrushClient, workspace_id: str) -> Readiness:
    """One status read of the brand's own workspace (403 → `SubworkspaceGoneError`)."""
    try:
        return classify_status(client.get_workspace_status(workspace_id=workspace_id, owned=True))
    except SemrushError as exc:
        raise translate_upstream(exc) from exc


def settle_next(readiness: Readiness, *, reads_done: int, delays: Sequence[float]) -> float | None:
    """The one settle rule, for the chain and a sync request alike (their patience differs:
    `delays`, the waits between reads). After a status read that found `readiness`, with
    `reads_done` reads made before it: None when the workspace is ready, else the seconds until
    the next read. A terminal status → 502 `subworkspaceCreationFailed`; no wait left → 504
    `subworkspaceCreationTimeout`."""
    if readiness is Readiness.READY:
        return None
    if readiness is Readiness.TERMINAL:
        raise SubworkspaceCreationFailedError()
    if reads_done < len(delays):
        return delays[reads_done]
    raise SubworkspaceCreationTimeoutError()


def settle_delays() -> Sequence[float]:
    """The waits between the status reads of a settle, with the caller's patience (the rule
    itself is `settle_next`'s): a chained step's backoff (SPEC §6.3, each read a new row),
    else a sync request's polling, slept in the request (§4: `SERENITY_SETTLE_POLL_ATTEMPTS`
    reads, `SERENITY_SETTLE_POLL_INTERVAL_MS` apart)."""
    if quota.in_step():
        return tuple(settings.SERENITY_PROVISION_BACKOFF_SECONDS)
    interval = settings.SERENITY_SETTLE_POLL_INTERVAL_MS / 1000.0
    return (interval,) * (settings.SERENITY_SETTLE_POLL_ATTEMPTS - 1)


def workspace_empty(*, client: SemrushClient, workspace_id: str, parent_id: str | None) -> int:
    """Decommission: delete every project of the workspace (404 = already gone); never the
    shell, never the parent. An unknown workspace (403) counts as already empty.
    Returns the number of projects deleted. Raises domain errors."""
    if parent_id and workspace_id == parent_id:
        raise WorkspaceMisconfiguredError()
    try:
        try:
            projects = client.list_projects(workspace_id=workspace_id, owned=True)
        except SemrushGoneError:
            return 0
        deleted = 0
        for project in projects:
            if client.delete_project(
                workspace_id=workspace_id, project_id=str(project["id"]), owned=True
            ):
                deleted += 1
        return deleted
    except SemrushGoneError:
        return 0
    except SemrushError as exc:
        raise translate_upstream(exc) from exc


def empty_quietly(*, client: SemrushClient, workspace_id: str, parent_id: str | None) -> bool:
    """Best-effort cleanup of a workspace we created; failures are logged for the audit."""
    try:
        workspace_empty(client=client, workspace_id=workspace_id, parent_id=parent_id)
        return True
    except DomainError:
        logger.warning(
            "could not empty a workspace we created; provisioning_audit will list it",
            extra={"workspace_id": workspace_id},
        )
        return False


def candidate_record(*, attempt_id: uuid.UUID, workspace: Workspace) -> bool:
    """Record the attempt's candidate, once: only while the attempt is pending and has none.
    False: cancelled meanwhile, or another delivery of the same step recorded one first."""
    return states.update_pending(
        attempt_id=attempt_id,
        only_if={"candidate_workspace_id": None},
        candidate_workspace_id=workspace.id,
        freshly_created=workspace.freshly_created,
        candidate_at=timezone.now(),
    )


class Promotion(enum.Enum):
    PROMOTED = "promoted"
    ATTEMPT_ENDED = "attemptEnded"  # cancelled or reconciled meanwhile: nothing written
    SUPERSEDED = "superseded"  # the brand points elsewhere (or the brand is gone)


def workspace_promote(
    *,
    attempt_id: uuid.UUID | None,
    brand_id: uuid.UUID,
    workspace_id: str,
    settle_seconds: float | None = None,
) -> Promotion:
    """The candidate becomes the brand's workspace: the attempt is marked promoted and the
    brand's pointer set, in the caller's transaction (which may add the chain's hand-over to
    it), or in one of its own. The pointer write is conditional (`pointer IS NULL OR pointer =
    candidate`, brand not deleted). Nothing stands unless both writes succeed: a refusal rolls
    the transaction back, and a workspace that another brand points at (the pointer is unique)
    raises `IntegrityError` out of it, which the caller reads as `SUPERSEDED`.
    `settle_seconds`: how long a freshly created candidate took to settle, recorded for
    `selectors.settle_seconds_learned`."""
    with transaction.atomic(savepoint=False):
        if attempt_id is not None and not states.update_pending(
            attempt_id=attempt_id,
            workspace_promoted=True,
            promoted_at=timezone.now(),
            settle_seconds=settle_seconds,
        ):
            return Promotion.ATTEMPT_ENDED
        pointed = Brand.objects.filter(
            Q(semrush_sub_workspace_id__isnull=True) | Q(semrush_sub_workspace_id=workspace_id),
            ~Q(status=BrandStatus.DELETED),
            pk=brand_id,
        ).update(semrush_sub_workspace_id=workspace_id)
        if pointed != 1:
            transaction.set_rollback(True)
            return Promotion.SUPERSEDED
    return Promotion.PROMOTED


def workspace_gone_heal(
    *, client: SemrushClient, brand_id: uuid.UUID, workspace_id: str, parent_id: str | None
) -> DomainError:
    """The brand's own workspace answered 403 (unknown): heal, and return the error that ends
    the work (SPEC §10.2). Every path that meets `SubworkspaceGoneError` on the brand's pointer
    calls this.

    Confirm by listing the parent's family. The workspace is not there: clear the brand's
    pointer, conditionally (only while it still holds `workspace_id`: a concurrent activate may
    already have provisioned a new one), tombstone the brand's markets (their projects went with
    the workspace; a reservation that created nothing is dropped), and return
    `SubworkspaceGoneError`; a following activate provisions a new workspace. The workspace is
    still listed: the 403 was a refusal, not a deletion, nothing is written
    (`UpstreamForbiddenError`). The family cannot be read: nothing is written, its error is
    returned."""
    try:
        family = client.list_family(parent_id=parent_id) if parent_id else []
    except SemrushError as exc:
        return translate_upstream(exc)
    if any(str(ws.get("id", "")) == workspace_id for ws in family):
        return UpstreamForbiddenError()
    now = timezone.now()
    with transaction.atomic():
        cleared = Brand.objects.filter(pk=brand_id, semrush_sub_workspace_id=workspace_id).update(
            semrush_sub_workspace_id=None, updated_at=now
        )
        if cleared:
            markets = Market.objects.filter(brand_id=brand_id, deleted_at__isnull=True)
            # A reservation that created nothing never existed upstream: it is dropped, not
            # tombstoned (SPEC §3), whoever held it (its holder's writes then find no row).
            markets.filter(status=MarketStatus.CREATING, semrush_project_id__isnull=True).delete()
            markets.update(deleted_at=now, reserved_by=None, updated_at=now)
    logger.warning(
        "the brand's workspace is gone upstream; pointer cleared",
        extra={"workspace_id": workspace_id, "pointer_cleared": bool(cleared)},
    )
    return SubworkspaceGoneError()


def workspace_gone_recover(
    *,
    client: SemrushClient,
    brand_id: uuid.UUID,
    workspace_id: str,
    parent_id: str | None,
    attempt_id: uuid.UUID,
    replaceable: bool = False,
) -> DomainError | None:
    """What follows a 403 (`SubworkspaceGoneError`) of the brand's own pointer `workspace_id`,
    read by the attempt's provision-workspace step (SPEC §10.2): heal (`workspace_gone_heal`),
    then say whether a new workspace may be provisioned in its place.

    None: it may — `replaceable` (an activate provisions one, as for a brand without a
    workspace), the heal confirmed the workspace gone, no concurrent writer has set a new
    pointer, and the attempt is still pending; the attempt forgets the gone workspace as its
    candidate (conditionally), so that it records the new one. Otherwise the error that ends
    the work: the heal's."""
    healed = workspace_gone_heal(
        client=client, brand_id=brand_id, workspace_id=workspace_id, parent_id=parent_id
    )
    if (
        replaceable
        and isinstance(healed, SubworkspaceGoneError)
        and brand_pointer(brand_id) is None
        and states.update_pending(
            attempt_id=attempt_id,
            only_if={"candidate_workspace_id": workspace_id},
            candidate_workspace_id=None,
            freshly_created=False,
            workspace_promoted=False,
        )
    ):
        return None
    return healed


def brand_pointer(brand_id: uuid.UUID) -> str | None:
    """The brand's pointer as the database holds it now (write paths never use a cached one)."""
    return (
        Brand.objects.filter(pk=brand_id).values_list("semrush_sub_workspace_id", flat=True).first()
    )


def cleanup_candidate(*, attempt_id: uuid.UUID) -> None:
    """Empty a failed attempt's freshly created, never promoted candidate (once). Never a
    terminal workspace (it cannot be used or emptied), never one that is now some brand's
    pointer (another brand adopted the empty shell)."""
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
        .exclude(reason=AttemptReason.TERMINAL)
        .first()
    )
    if attempt is None:
        return
    organization = attempt.brand.organization
    assert attempt.candidate_workspace_id is not None
    if Brand.objects.filter(semrush_sub_workspace_id=attempt.candidate_workspace_id).exists():
        ProvisioningAttempt.objects.filter(pk=attempt.id).update(cleanup_done=True)
        return
    client = client_for_org(organization, attempt_id=str(attempt.id))
    if empty_quietly(
        client=client,
        workspace_id=attempt.candidate_workspace_id,
        parent_id=organization.semrush_parent_workspace_id,
    ):
        ProvisioningAttempt.objects.filter(pk=attempt.id).update(cleanup_done=True)
