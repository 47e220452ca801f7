"""The parent's family of sub-workspaces, as Semrush lists it (SPEC §5, §11.2): what a
workspace's status means, finding the brand's workspace in the family (create-or-adopt), and the
listings an onboarding's items share: one per group of ten for their create-or-adopt
(`family_shared`), and one for each batch of the onboarding's settle reads due around the same
time (`family_status_shared`, SPEC §12.5).

Nothing here writes the brand or its attempt: the caller records what was found
(`workspace.candidate_record`) and promotes it (`workspace.workspace_promote`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobStep
from provisioning.exceptions import (
    AmbiguousWorkspaceError,
    UpstreamError,
    WorkspaceNotEmptyError,
)
from provisioning.models import (
    ONBOARDING_GROUP_SIZE,
    AttemptStatus,
    Onboarding,
    OnboardingFamily,
    OnboardingItem,
    ProvisioningAttempt,
)
from provisioning.quota import PermitDeferredError
from provisioning.semrush import SemrushClient, SemrushError, SemrushRateLimitedError
from provisioning.upstream import translate_upstream
from serenity.models import Brand

logger = logging.getLogger("serenity.provisioning")

READY_STATUSES = frozenset({"created", "active", "ready"})
TERMINAL_STATUSES = frozenset(
    {"creation failed", "creation_failed", "failed", "error", "invalid subscription"}
)


class Readiness(Enum):
    READY = "ready"
    TERMINAL = "terminal"
    NOT_READY = "not_ready"


def classify_status(raw: str | None) -> Readiness:
    value = (raw or "").strip().lower()
    if value in READY_STATUSES:
        return Readiness.READY
    if value in TERMINAL_STATUSES:
        return Readiness.TERMINAL
    return Readiness.NOT_READY


@dataclass(frozen=True)
class Workspace:
    id: str
    freshly_created: bool


def _matches(
    family: Iterable[dict], *, brand: Brand, parent_id: str, accept_not_ready: bool
) -> list[dict]:
    """The brand's candidates in the family: same title as the brand's name (trimmed,
    case-insensitive), ready (or, after an ambiguous create, any non-terminal status), not the
    parent, and not another brand's pointer. Only the same-title candidates are looked up in
    the database (one query, whatever the family's size)."""
    wanted = brand.name.strip().lower()
    candidates = []
    for ws in family:
        # The title first: it rules out all but a few of a family of thousands.
        if str(ws.get("title", "")).strip().lower() != wanted:
            continue
        ws_id = str(ws.get("id", ""))
        if not ws_id or ws_id == parent_id:
            continue
        readiness = classify_status(ws.get("status"))
        if readiness is Readiness.READY or (accept_not_ready and readiness is Readiness.NOT_READY):
            candidates.append(ws)
    if not candidates:
        return []
    claimed = set(
        Brand.objects.filter(semrush_sub_workspace_id__in=[str(ws["id"]) for ws in candidates])
        .exclude(pk=brand.pk)
        .values_list("semrush_sub_workspace_id", flat=True)
    )
    return [ws for ws in candidates if str(ws["id"]) not in claimed]


def workspace_create_or_adopt(
    *,
    client: SemrushClient,
    brand: Brand,
    parent_id: str,
    attempt_id: uuid.UUID | None = None,
    family: Callable[[], list[dict[str, Any]]] | None = None,
) -> Workspace:
    """Find or make the brand's sub-workspace (SPEC §5, create-or-adopt).

    List the family; candidates are same title, ready, not the parent, not another brand's
    pointer. A candidate recorded by one of this brand's own earlier attempts wins outright;
    0 → create; 1 → adopt if it has no projects (else `WorkspaceNotEmptyError`); ≥2 →
    `AmbiguousWorkspaceError`. A create that times out is resolved by re-matching with any
    non-terminal status (a just-created workspace is `not ready`).
    `family`: a listing shared with other brands created together (`family_shared`) instead of
    one of this brand's own; the re-match after an ambiguous create always lists afresh.
    Raises domain errors only (upstream errors are translated).
    """
    try:
        listing = (
            family()
            if family is not None
            else client.list_family(parent_id=parent_id, titled=brand.name)
        )
        matches = _matches(listing, brand=brand, parent_id=parent_id, accept_not_ready=False)
        own = _own_earlier(matches, brand=brand, attempt_id=attempt_id)
        if own:
            return Workspace(id=str(own[0]["id"]), freshly_created=False)
        if len(matches) > 1:
            raise AmbiguousWorkspaceError()
        if len(matches) == 1:
            ws_id = str(matches[0]["id"])
            if client.list_projects(workspace_id=ws_id):
                raise WorkspaceNotEmptyError()
            logger.info("adopting existing empty sub-workspace", extra={"workspace_id": ws_id})
            return Workspace(id=ws_id, freshly_created=False)
        try:
            created = client.create_subworkspace(parent_id=parent_id, title=brand.name)
        except SemrushError as exc:
            if not exc.ambiguous:
                raise
            return _resolve_ambiguous_create(client=client, brand=brand, parent_id=parent_id)
        ws_id = str(created.get("id") or "")
        if not ws_id or ws_id == parent_id:
            raise UpstreamError()
        return Workspace(id=ws_id, freshly_created=True)
    except SemrushError as exc:
        raise translate_upstream(exc) from exc


# A group's other items come back this long after the claimant's step is due (seconds).
FAMILY_WAIT_SECONDS = 0.5
# The metadata of an onboarding item's chain: its onboarding and its group of items.
ONBOARDING_KEY = "onboardingId"
GROUP_KEY = "onboardingGroup"


def family_shared(
    *, client: SemrushClient, onboarding_id: str, group: int, parent_id: str, job_id: uuid.UUID
) -> list[dict[str, Any]]:
    """The parent's family as a group of an onboarding's items sees it (SPEC §11.2: listed once
    per group): the first item of the group to ask claims the group's record (an INSERT under a
    unique constraint, naming its step `job_id`), lists the family and records the entries
    whose title is one of the group's names; the others read that record. One that finds the
    record claimed but not filled is re-scheduled (`quota.PermitDeferredError`: it leaves its
    worker slot, as for the quota) until the claimant's step is due again, as long as that step
    is unfinished; a claimant that ended without filling it (a worker lost: its re-run lists for
    itself) holds nobody back.

    Only for an item's first, clean run: a listing some seconds old cannot miss a workspace its
    create-or-adopt could adopt (adoption needs a `ready` workspace, and one created since was
    not ready when listed; the group's own names are unique in the org), while a re-run after a
    crash must see what its interrupted run created, and lists afresh."""
    record, claimed = OnboardingFamily.objects.get_or_create(
        onboarding_id=onboarding_id, group=group, defaults={"entries": None, "claimed_by": job_id}
    )
    if not claimed and record.entries is not None:
        return list(record.entries)
    if not claimed and record.claimed_by is not None and record.claimed_by != job_id:
        claimant_due = (
            AsyncJob.objects.filter(pk=record.claimed_by, status=JobStatus.IN_PROGRESS)
            .values_list("run_after", flat=True)
            .first()
        )
        if claimant_due is not None:
            wait = (claimant_due - timezone.now()).total_seconds()
            raise PermitDeferredError(max(wait, 0.0) + FAMILY_WAIT_SECONDS)
    first = group * ONBOARDING_GROUP_SIZE
    titles = {
        name.strip().lower()
        for name in OnboardingItem.objects.filter(
            onboarding_id=onboarding_id, index__gte=first, index__lt=first + ONBOARDING_GROUP_SIZE
        ).values_list("name", flat=True)
    }
    try:
        listing = client.list_family(parent_id=parent_id)
    except SemrushError as exc:
        raise translate_upstream(exc) from exc
    entries = [ws for ws in listing if str(ws.get("title", "")).strip().lower() in titles]
    OnboardingFamily.objects.filter(pk=record.pk, entries__isnull=True).update(entries=entries)
    return entries


def family_status_shared(
    *,
    client: SemrushClient,
    onboarding_id: str,
    parent_id: str,
    job_id: uuid.UUID,
    workspace_id: str,
    due: datetime,
) -> str | None:
    """The status of `workspace_id` for an onboarding item's settle read due at `due` (SPEC
    §12.5: the statuses of items settling together are read through one family listing), as
    the listing the onboarding's reads share shows it; None when that listing does not show
    the workspace or could not be made: the caller reads the status itself.

    A listing asked for at or after `due` answers the read: the status it shows is as recent as
    the read's own would be, so the settle rule (`workspace.settle_next`) decides as it would.
    Without one, the read waits (`quota.PermitDeferredError`, as `family_shared` waits) until
    `SERENITY_ONBOARDING_STATUS_GATHER_SECONDS` after it was due, so that the first of the
    reads due within that window lists for all of them (when no other read of the onboarding
    falls due meanwhile, as for its last items, it lists at once: it answers every read due
    already); then it lists itself, unless another
    step is listing for the onboarding at that moment (it waits for that answer). Nothing else
    ties one item's read to another's: a step deferred for the quota holds nobody back.

    The whole onboarding shares the listing, not a group of ten (`family_shared`'s): the quota
    interleaves the groups' creates, so the items settling together are of many groups."""
    shared = Onboarding.objects.filter(pk=onboarding_id)
    record = shared.only("statuses", "statuses_at", "statuses_by").first()
    if record is None:
        return None
    if record.statuses_at is not None and record.statuses_at >= due:
        return (record.statuses or {}).get(workspace_id)
    window = timedelta(seconds=float(settings.SERENITY_ONBOARDING_STATUS_GATHER_SECONDS))
    gather = (due + window - timezone.now()).total_seconds()
    if gather > 0 and _reads_due_before(onboarding_id, job_id=job_id, listing_at=due + window):
        raise PermitDeferredError(gather)
    listing_by = record.statuses_by
    if listing_by != job_id:
        if _listing(listing_by):
            raise PermitDeferredError(FAMILY_WAIT_SECONDS)
        if not shared.filter(statuses_by=listing_by).update(statuses_by=job_id):
            raise PermitDeferredError(FAMILY_WAIT_SECONDS)  # another step began listing
    statuses = _statuses_list(
        client=client, onboarding_id=onboarding_id, parent_id=parent_id, job_id=job_id
    )
    return statuses.get(workspace_id)


def _reads_due_before(onboarding_id: str, *, job_id: uuid.UUID, listing_at: datetime) -> bool:
    """Whether another of the onboarding's first hops (a settle read, or a create whose read
    follows) falls due from now until `listing_at`: a listing then answers it too. A read due
    already is answered by a listing made now; one due later is not worth waiting for."""
    return (
        AsyncJob.objects.filter(
            status=JobStatus.IN_PROGRESS,
            step=JobStep.PROVISION_WORKSPACE,
            run_after__gt=timezone.now(),
            run_after__lt=listing_at,
            **{f"metadata__{ONBOARDING_KEY}": onboarding_id},
        )
        .exclude(pk=job_id)
        .exists()
    )


def _listing(step: uuid.UUID | None) -> bool:
    """Whether `step` may be listing the family now: it is running (unfinished and due; a
    crashed one until its lease expires and it runs again), not ended nor re-scheduled."""
    return (
        step is not None
        and AsyncJob.objects.filter(
            pk=step, status=JobStatus.IN_PROGRESS, run_after__lte=timezone.now()
        ).exists()
    )


def _statuses_list(
    *, client: SemrushClient, onboarding_id: str, parent_id: str, job_id: uuid.UUID
) -> dict[str, str]:
    """List the family for the onboarding's settle reads and record the statuses of its items'
    settling workspaces (the candidates of their pending attempts, not yet promoted) with the
    time the listing was asked for (a candidate recorded later has a later read). A listing
    that fails records none: every read it was to answer reads its own status. One refused for
    the rate or deferred for a permit records nothing and leaves the listing to whichever read
    comes next (the error is raised: the step is re-scheduled)."""
    asked = timezone.now()
    settling = set(
        ProvisioningAttempt.objects.filter(
            brand_id__in=OnboardingItem.objects.filter(onboarding_id=onboarding_id).values(
                "brand_id"
            ),
            status=AttemptStatus.PENDING,
            workspace_promoted=False,
            candidate_workspace_id__isnull=False,
        ).values_list("candidate_workspace_id", flat=True)
    )
    mine = Onboarding.objects.filter(pk=onboarding_id, statuses_by=job_id)
    try:
        listing = client.list_family(parent_id=parent_id)
    except SemrushRateLimitedError as exc:
        mine.update(statuses_by=None)
        raise translate_upstream(exc) from exc
    except SemrushError as exc:
        logger.warning(
            "the onboarding's family listing failed; its settle reads read their own statuses",
            extra={"error": type(exc).__name__},
        )
        listing = []
    except PermitDeferredError:
        mine.update(statuses_by=None)
        raise
    statuses = {
        str(ws["id"]): ws["status"]
        for ws in listing
        if str(ws.get("id")) in settling and isinstance(ws.get("status"), str)
    }
    mine.update(statuses=statuses, statuses_at=asked, statuses_by=None)
    return statuses


def _own_earlier(matches: list[dict], *, brand: Brand, attempt_id: uuid.UUID | None) -> list[dict]:
    """The matches that one of this brand's own earlier attempts recorded as its candidate
    (they win outright, SPEC §5). Asked only when something matches."""
    if not matches:
        return []
    attempts = ProvisioningAttempt.objects.filter(
        brand_id=brand.pk, candidate_workspace_id__in=[str(m["id"]) for m in matches]
    )
    if attempt_id is not None:
        attempts = attempts.exclude(pk=attempt_id)
    earlier = set(attempts.values_list("candidate_workspace_id", flat=True))
    return [m for m in matches if str(m["id"]) in earlier]


def _resolve_ambiguous_create(*, client: SemrushClient, brand: Brand, parent_id: str) -> Workspace:
    family = client.list_family(parent_id=parent_id, titled=brand.name)
    matches = _matches(family, brand=brand, parent_id=parent_id, accept_not_ready=True)
    if len(matches) == 1:
        ws_id = str(matches[0]["id"])
        logger.warning(
            "create timed out; adopted the single matching workspace", extra={"workspace_id": ws_id}
        )
        # We cannot tell whether our create made it; it is ours either way, and a workspace
        # that was created by the timed-out call is empty.
        return Workspace(id=ws_id, freshly_created=True)
    if len(matches) > 1:
        raise AmbiguousWorkspaceError()
    raise UpstreamError()
