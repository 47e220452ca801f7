"""The audit's reading of the database: the orgs to audit, who owns what (read after the
upstream snapshot, see `provisioning.audit`'s docstring), and the workspaces a scope lists.
Semrush itself is read by `provisioning.audit_upstream`."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.models import AsyncJob, JobStatus
from provisioning.audit.report import AuditError, AuditScope, AuditScopeError
from provisioning.audit_upstream import ERROR_CONFIGURATION
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.services import attempts_stale
from serenity.models import Brand, BrandStatus, Market, MarketStatus, Organization, WorkspaceMode


def _orgs_with_parent() -> list[Organization]:
    return list(
        Organization.objects.filter(semrush_parent_workspace_id__isnull=False)
        .exclude(semrush_parent_workspace_id="")
        .order_by("created_at", "id")
    )


def _group_by_credential(
    orgs: Iterable[Organization], errors: list[AuditError]
) -> dict[tuple[str | None, str], list[Organization]]:
    """(the org's own credential, or None for the service default; parent) → orgs."""
    groups: dict[tuple[str | None, str], list[Organization]] = defaultdict(list)
    for org in orgs:
        try:
            credential = org.semrush_credential()
        except ValueError:
            errors.append(AuditError(org_id=org.id, error=ERROR_CONFIGURATION))
            continue
        groups[(credential, str(org.semrush_parent_workspace_id))].append(org)
    return groups


def _orgs_with_flat_brands(orgs: list[Organization]) -> set[uuid.UUID]:
    ids = [org.id for org in orgs]
    flat = {org.id for org in orgs if org.workspace_mode == WorkspaceMode.FLAT}
    flat.update(
        Brand.objects.filter(organization_id__in=ids, workspace_mode=WorkspaceMode.FLAT)
        .values_list("organization_id", flat=True)
        .distinct()
    )
    return flat


# --- Database snapshot -------------------------------------------------------------------------


Slice = tuple[int | None, str | None]


@dataclass
class _Ownership:
    """Everything the database says about ownership, read after the upstream snapshot."""

    pointers: dict[str, tuple[uuid.UUID, uuid.UUID]]  # workspace → (brand, org)
    recorded_projects: set[str]
    live_candidates: set[str]
    brands_with_live_attempt: set[uuid.UUID]
    live_reservations: dict[str, list[Slice]]  # workspace the reservation writes to → slices
    candidate_orgs: dict[str, uuid.UUID]  # any attempt's candidate → its brand's org
    brand_titles: dict[uuid.UUID, set[str]]  # org → live brand names (trimmed, lower-cased)


def _read_ownership(*, cutoff: datetime) -> _Ownership:
    pointers = {
        str(ws): (brand_id, org_id)
        for ws, brand_id, org_id in Brand.objects.filter(
            semrush_sub_workspace_id__isnull=False
        ).values_list("semrush_sub_workspace_id", "id", "organization_id")
    }
    recorded = {
        str(project_id)
        for project_id in Market.objects.filter(
            deleted_at__isnull=True, semrush_project_id__isnull=False
        ).values_list("semrush_project_id", flat=True)
    }
    live_attempts = list(
        ProvisioningAttempt.objects.filter(status=AttemptStatus.PENDING)
        .exclude(pk__in=attempts_stale().values("pk"))
        .values_list("id", "brand_id", "candidate_workspace_id")
    )
    live_attempt_ids = {attempt_id for attempt_id, _, _ in live_attempts}
    candidate_orgs = {
        str(ws): org_id
        for ws, org_id in ProvisioningAttempt.objects.filter(
            candidate_workspace_id__isnull=False
        ).values_list("candidate_workspace_id", "brand__organization_id")
    }
    brand_titles: dict[uuid.UUID, set[str]] = defaultdict(set)
    for org_id, name in Brand.objects.exclude(status=BrandStatus.DELETED).values_list(
        "organization_id", "name"
    ):
        brand_titles[org_id].add(name.strip().lower())
    return _Ownership(
        pointers=pointers,
        recorded_projects=recorded,
        live_candidates={ws for _, _, ws in live_attempts if ws},
        brands_with_live_attempt={brand_id for _, brand_id, _ in live_attempts},
        live_reservations=_live_reservations(cutoff=cutoff, live_attempt_ids=live_attempt_ids),
        candidate_orgs=candidate_orgs,
        brand_titles=brand_titles,
    )


def _live_reservations(
    *, cutoff: datetime, live_attempt_ids: set[uuid.UUID]
) -> dict[str, list[Slice]]:
    """`creating` reservations with no project id yet whose owner is live, by the workspace
    they write to (see rule 3 of the module docstring)."""
    rows = list(
        Market.objects.filter(
            deleted_at__isnull=True,
            status__in=(MarketStatus.CREATING, MarketStatus.PUBLISH_FAILED),
            semrush_project_id__isnull=True,
        ).values_list(
            "reserved_by",
            "updated_at",
            "geo_target_id",
            "language_code",
            "brand__workspace_mode",
            "brand__semrush_sub_workspace_id",
            "brand__organization__semrush_parent_workspace_id",
        )
    )
    owners = {row[0] for row in rows if row[0] is not None}
    known_attempts = set(
        ProvisioningAttempt.objects.filter(pk__in=owners).values_list("id", flat=True)
    )
    known_jobs = set(AsyncJob.objects.filter(pk__in=owners).values_list("id", flat=True))
    # A job is live while it is runnable and unfinished (SPEC §11.1), however long it waits.
    live_jobs = set(
        AsyncJob.objects.filter(
            pk__in=owners, status=JobStatus.IN_PROGRESS, run_after__isnull=False
        ).values_list("id", flat=True)
    )
    out: dict[str, list[Slice]] = defaultdict(list)
    for owner, updated_at, geo, language, mode, pointer, parent in rows:
        if owner is None:
            # A market left `publish_failed` with no project id after an ambiguous project
            # create (see `provisioning.markets`): a project on its slice may have been made
            # upstream after we stopped looking; the next create of the slice resumes it.
            live = True
        elif owner in known_attempts:
            live = owner in live_attempt_ids
        elif owner in known_jobs:
            live = owner in live_jobs
        else:
            live = updated_at >= cutoff
        workspace = parent if mode == WorkspaceMode.FLAT else pointer
        if live and workspace:
            out[str(workspace)].append((geo, str(language).lower()))
    return out


@dataclass(frozen=True)
class _Plan:
    """Which workspaces a scope lists and whose findings it keeps (:class:`AuditScope`)."""

    org_id: uuid.UUID | None
    brand_id: uuid.UUID | None
    wanted: Callable[[dict[str, Any]], bool]
    list_parent: bool


def _changed_since(since: datetime) -> tuple[set[uuid.UUID], set[str]]:
    """Brands whose brand, market or attempt rows changed since `since`, and the candidate
    workspaces of attempts that did."""
    brands = set(Brand.objects.filter(updated_at__gte=since).values_list("id", flat=True))
    brands.update(Market.objects.filter(updated_at__gte=since).values_list("brand_id", flat=True))
    candidates: set[str] = set()
    for brand_id, candidate in ProvisioningAttempt.objects.filter(
        updated_at__gte=since
    ).values_list("brand_id", "candidate_workspace_id"):
        brands.add(brand_id)
        if candidate:
            candidates.add(str(candidate))
    return brands, candidates


def _live_work() -> tuple[set[uuid.UUID], set[str]]:
    """Brands with a live attempt, and live attempts' candidates: their workspaces would yield
    no finding (rules 1 and 2 of the module docstring), so they are not listed at all. Work
    that ends during the run is audited by the next one."""
    live = (
        ProvisioningAttempt.objects.filter(status=AttemptStatus.PENDING)
        .exclude(pk__in=attempts_stale().values("pk"))
        .values_list("brand_id", "candidate_workspace_id")
    )
    brands: set[uuid.UUID] = set()
    workspaces: set[str] = set()
    for brand_id, candidate in live:
        brands.add(brand_id)
        if candidate:
            workspaces.add(str(candidate))
    return brands, workspaces


def _stamp(value: object) -> datetime | None:
    """An upstream ISO 8601 time (UTC when it names no offset), else None."""
    try:
        parsed = parse_datetime(str(value or ""))
    except ValueError:
        return None
    if parsed is None:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


def _family_says_changed(workspace: dict[str, Any], since: datetime) -> bool:
    """Created or updated since `since`, as the family entry says; no readable date: yes."""
    known = [
        stamp
        for stamp in (_stamp(workspace.get(key)) for key in ("created_at", "last_updated_at"))
        if stamp is not None
    ]
    return not known or max(known) >= since


def _brand_scope(brand_id: uuid.UUID, org_id: uuid.UUID | None) -> tuple[uuid.UUID, bool, set[str]]:
    """A brand scope's org, whether its parent is listed (a flat brand's projects live there),
    and its attempts' candidate workspaces. Raises :class:`AuditScopeError` for an unknown
    brand, or a brand of another org than `org_id`."""
    brand = Brand.objects.filter(pk=brand_id).values("organization_id", "workspace_mode").first()
    if brand is None or org_id not in (None, brand["organization_id"]):
        raise AuditScopeError("No such brand in the organization.")
    candidates = {
        str(ws)
        for ws in ProvisioningAttempt.objects.filter(
            brand_id=brand_id, candidate_workspace_id__isnull=False
        ).values_list("candidate_workspace_id", flat=True)
    }
    return brand["organization_id"], brand["workspace_mode"] == WorkspaceMode.FLAT, candidates


def _plan(scope: AuditScope) -> _Plan:
    """Resolve `scope` against the database. Raises :class:`AuditScopeError` for an unknown
    org or brand, or a brand of another org than the one named."""
    org_id, brand_id, list_parent = scope.org_id, scope.brand_id, True
    candidates: set[str] = set()
    if brand_id is not None:
        org_id, list_parent, candidates = _brand_scope(brand_id, org_id)
    if org_id is not None and not Organization.objects.filter(pk=org_id).exists():
        raise AuditScopeError("No such organization.")
    pointers = {
        str(ws): (brand, org)
        for ws, brand, org in Brand.objects.filter(
            semrush_sub_workspace_id__isnull=False
        ).values_list("semrush_sub_workspace_id", "id", "organization_id")
    }
    since = scope.since
    changed_brands, changed_candidates = _changed_since(since) if since else (set(), set())
    busy_brands, busy_workspaces = _live_work()

    def wanted(workspace: dict[str, Any]) -> bool:
        workspace_id = str(workspace["id"])
        pointer = pointers.get(workspace_id)
        if workspace_id in busy_workspaces or (pointer is not None and pointer[0] in busy_brands):
            return False
        if brand_id is not None:
            chosen = workspace_id in candidates or (pointer is not None and pointer[0] == brand_id)
        else:
            chosen = org_id is None or pointer is None or pointer[1] == org_id
        if not chosen or since is None:
            return chosen
        if pointer is not None:
            return pointer[0] in changed_brands
        return workspace_id in changed_candidates or _family_says_changed(workspace, since)

    return _Plan(org_id=org_id, brand_id=brand_id, wanted=wanted, list_parent=list_parent)
