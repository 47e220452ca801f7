"""The operator audit behind `python manage.py provisioning_audit` (SPEC §7 "no orphan", §8).

Every upstream object under one of our parents must be a brand's canonical object, empty, or
listed here. `audit_run()` reads Semrush with each org's credential
(`provisioning.audit_upstream`), then the database, and reports:

- **orphan workspaces**: a direct child of an org's parent that is not any brand's pointer and
  holds at least one project. Empty shells are fine (decommission and cleanup never delete the
  shell).
- **orphan projects** (SPEC §10.2): every project under the parent that no non-deleted market
  row points at (`Market.semrush_project_id`) — in the parent itself (where flat-mode brands'
  markets live), in a brand's canonical workspace (its pointer), and inside each orphan
  workspace.
- **stuck attempts**: pending attempts that nothing drives any more (the staleness rule of SPEC
  §11.1, `services.attempts_stale`: a chain with no runnable job left, or sync work older than
  `SERENITY_PROVISIONING_STALE_AFTER_SECONDS`); the sweep reconciles them, so listing them tells
  an operator the sweep is not running.
- **errors**: orgs that could not be checked, with a generic reason (never an upstream body, URL
  or token).

Work in flight is not an orphan. An object is *owned by live work* when:

1. it is the candidate workspace of a live (`pending`, not stale) attempt (the attempt may
   still promote it or empty it);
2. it is a project in the canonical workspace of a brand that has such a live attempt (a worker
   between "project created upstream" and "project id recorded" on the market, or a deactivate
   deleting projects);
3. it is a project whose slice (location and language) matches a `creating` reservation with no
   project id yet, in the workspace that reservation writes to (the brand's pointer, or the parent
   for a flat brand), and whose owner is live: a live attempt, a runnable `IN_PROGRESS` job, or
   — for an owner that is neither (a flat sync request) — a reservation itself updated within
   the threshold. This covers flat-mode creates,
   which run without an attempt.

A `creating` market whose project id is recorded points at its project and protects it whatever
its owner's state (the next create resumes it). Once the owner is stale, its objects are judged
like any other: a stale attempt's non-empty candidate is an orphan until the sweep empties it.

Consistency: the upstream snapshot is taken first and the database second, so work that finishes
between the two reads is seen as finished (its market recorded, or its attempt no longer live).
A freshly created workspace is listed as an orphan only once it has projects, and projects can
only be created in a ready workspace (the Project Engine's "not-ready lock"), so project lists are
read for ready children only. Orgs are grouped by (credential, parent): each parent's family is
read once per credential, and brand pointers are compared across all orgs, so parents shared by
several orgs are audited once and a sibling org's workspace is never reported.

Cost and scope (SPEC §12.4): one family listing per parent, then one project listing per
workspace listed (the contract has no listing of a family's projects, and the family's
`published_projects_count` does not count the drafts a crash leaves behind). The workspaces of
live work (rules 1 and 2) could yield no finding and are not listed. The command runs inside
`provisioning.quota.patient_permits` at `SERENITY_AUDIT_RATE_SHARE` (half) of the credential's
rate, so it finishes within its calls ÷ that share + 60 s and leaves the rest to provisioning,
whoever waits on the credential. An :class:`AuditScope` lists fewer
workspaces: one org's, one brand's, or those changed since a time; a workspace it does not list
yields no finding. Progress goes to a callback (:class:`AuditProgress`): the workspaces to list
once the families are read, then at most every `SERENITY_AUDIT_PROGRESS_SECONDS`, then done.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.models import AsyncJob, JobStatus
from provisioning.audit_upstream import (
    ERROR_CONFIGURATION,
    ERROR_FORBIDDEN,
    ERROR_RATE_LIMITED,
    ERROR_UNAUTHORIZED,
    ERROR_UNREACHABLE,
    ERROR_UPSTREAM,
    ParentView,
    list_workspaces,
    read_family,
)
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.services import attempts_stale
from provisioning.slice_match import project_on_slice, project_slice
from serenity.models import Brand, BrandStatus, Market, MarketStatus, Organization, WorkspaceMode
from serenity.slices import slice_from_ids

# The ERROR_* texts are the vocabulary of the report's `errors` entries, so they are importable
# from here with the report.
__all__ = [
    "ERROR_CONFIGURATION",
    "ERROR_FORBIDDEN",
    "ERROR_RATE_LIMITED",
    "ERROR_UNAUTHORIZED",
    "ERROR_UNREACHABLE",
    "ERROR_UPSTREAM",
    "AuditError",
    "AuditProgress",
    "AuditReport",
    "AuditScope",
    "AuditScopeError",
    "OrphanProject",
    "OrphanWorkspace",
    "StuckAttempt",
    "audit_run",
]


@dataclass(frozen=True)
class OrphanWorkspace:
    id: str
    org_id: uuid.UUID
    title: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "orgId": str(self.org_id), "title": self.title}


@dataclass(frozen=True)
class OrphanProject:
    id: str
    workspace_id: str
    org_id: uuid.UUID

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "workspaceId": self.workspace_id, "orgId": str(self.org_id)}


@dataclass(frozen=True)
class StuckAttempt:
    id: uuid.UUID
    brand_id: uuid.UUID
    age_seconds: int

    def as_dict(self) -> dict[str, Any]:
        return {"id": str(self.id), "brandId": str(self.brand_id), "ageSeconds": self.age_seconds}


@dataclass(frozen=True)
class AuditError:
    org_id: uuid.UUID
    error: str

    def as_dict(self) -> dict[str, Any]:
        return {"orgId": str(self.org_id), "error": self.error}


@dataclass
class AuditReport:
    orphan_workspaces: list[OrphanWorkspace] = field(default_factory=list)
    orphan_projects: list[OrphanProject] = field(default_factory=list)
    stuck_attempts: list[StuckAttempt] = field(default_factory=list)
    errors: list[AuditError] = field(default_factory=list)

    @property
    def has_findings(self) -> bool:
        return bool(self.orphan_workspaces or self.orphan_projects or self.stuck_attempts)

    @property
    def exit_code(self) -> int:
        """1: something needs an operator; 2: only orgs that could not be checked; 0: clean."""
        if self.has_findings:
            return 1
        return 2 if self.errors else 0

    def as_dict(self) -> dict[str, list[dict[str, Any]]]:
        """The exact `--json` shape of SPEC §8."""
        return {
            "orphanWorkspaces": [entry.as_dict() for entry in self.orphan_workspaces],
            "orphanProjects": [entry.as_dict() for entry in self.orphan_projects],
            "stuckAttempts": [entry.as_dict() for entry in self.stuck_attempts],
            "errors": [entry.as_dict() for entry in self.errors],
        }


@dataclass(frozen=True)
class AuditScope:
    """What one run audits (SPEC §12.4). Default: every org. `org_id`: the parents of that org,
    of whose children only its brands' workspaces and workspaces of no brand (a stray may be its
    own) are listed. `brand_id`: that brand's workspace, its attempts' candidate workspaces, and
    its parent only when the brand is flat. `since`: of those, only the workspaces of brands
    whose brand, market or attempt rows changed since then, the children of no brand that the
    family says were created or updated since then (or does not say when), and the parents.
    Findings are kept for the scope's org (and brand); stuck attempts, a database read, are
    filtered by org and brand, never by `since`."""

    org_id: uuid.UUID | None = None
    brand_id: uuid.UUID | None = None
    since: datetime | None = None


class AuditScopeError(ValueError):
    """The scope names an org or brand that does not exist (or an org with no parent)."""


ProgressEvent = dict[str, Any]


class AuditProgress:
    """Counts the audit's listings and hands `on_event` one event (`{event, parents,
    workspacesToList, workspacesListed, calls, elapsedSeconds}`) once the families are read
    (`listing`), after a listing when `SERENITY_AUDIT_PROGRESS_SECONDS` have passed since the
    last event (`progress`; 0: after every listing), and at the end (`done`)."""

    def __init__(
        self,
        on_event: Callable[[ProgressEvent], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_event = on_event
        self._clock = clock
        self._started = self._last = clock()
        self._interval = float(settings.SERENITY_AUDIT_PROGRESS_SECONDS)
        self.parents = 0
        self.to_list = 0
        self.listed = 0
        self.calls = 0

    def family_read(self, view: ParentView) -> None:
        self.parents += 1
        self.calls += 1
        self.to_list += len(view.to_list)

    def workspace_listed(self) -> None:
        self.listed += 1
        self.calls += 1
        if self._clock() - self._last >= self._interval:
            self.emit("progress")

    def emit(self, event: str) -> None:
        self._last = self._clock()
        if self._on_event is not None:
            self._on_event(
                {
                    "event": event,
                    "parents": self.parents,
                    "workspacesToList": self.to_list,
                    "workspacesListed": self.listed,
                    "calls": self.calls,
                    "elapsedSeconds": round(self._last - self._started, 1),
                }
            )


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


def _reserved(project: dict[str, Any], slices: list[Slice]) -> bool:
    """Does a live reservation cover this project? Matched as `provisioning.slice_match` does
    (a reservation holds no catalogue id, so the language goes by name; the location by id,
    else by country). An unreadable slice is given the benefit of the doubt: an audit must not
    send an operator after work in flight."""
    if not slices:
        return False
    stated = project_slice(project)
    if stated.language_name is None or (stated.location_id is None and not stated.country_code):
        return True
    for reserved_geo, reserved_language in slices:
        reserved = slice_from_ids(
            geo_target_id=reserved_geo or 0, language_code=str(reserved_language or "")
        )
        if reserved is not None and project_on_slice(project, reserved, language_id=None):
            return True
    return False


# --- Evaluation --------------------------------------------------------------------------------


def _owner_org(view: ParentView, workspace: dict[str, Any], owned: _Ownership) -> uuid.UUID:
    """Which org of the group an orphan workspace belongs to: the org of an attempt that
    recorded it, else of a brand with its title, else the group's oldest org."""
    workspace_id = str(workspace["id"])
    group_ids = [org.id for org in view.orgs]
    recorded_by = owned.candidate_orgs.get(workspace_id)
    if recorded_by is not None and recorded_by in group_ids:
        return recorded_by
    title = str(workspace.get("title") or "").strip().lower()
    for org_id in group_ids:
        if title in owned.brand_titles.get(org_id, set()):
            return org_id
    return group_ids[0]


def _evaluate(
    view: ParentView, owned: _Ownership, flat_orgs: set[uuid.UUID], report: AuditReport
) -> None:
    for workspace in view.children:
        workspace_id = str(workspace["id"])
        projects = view.projects.get(workspace_id, [])
        pointer = owned.pointers.get(workspace_id)
        if pointer is None:
            if projects and workspace_id not in owned.live_candidates:
                owner_org = _owner_org(view, workspace, owned)
                report.orphan_workspaces.append(
                    OrphanWorkspace(
                        id=workspace_id,
                        org_id=owner_org,
                        title=str(workspace.get("title") or ""),
                    )
                )
                # SPEC §10.2: the projects inside an orphan workspace are listed too (an
                # operator deletes them one by one; the shell itself may stay).
                _collect_orphan_projects(
                    report, projects, workspace_id=workspace_id, org_id=owner_org, owned=owned
                )
            continue
        brand_id, org_id = pointer
        if brand_id in owned.brands_with_live_attempt:
            continue
        _collect_orphan_projects(
            report, projects, workspace_id=workspace_id, org_id=org_id, owned=owned
        )
    # SPEC §10.2: every project in the parent itself is audited. Flat-mode brands' markets live
    # there and account for theirs; anything else is a stray, attributed to the group's first
    # org with flat-mode brands (whose work it most likely is), else to its oldest org.
    flat_in_group = [org.id for org in view.orgs if org.id in flat_orgs]
    _collect_orphan_projects(
        report,
        view.projects.get(view.parent_id, []),
        workspace_id=view.parent_id,
        org_id=flat_in_group[0] if flat_in_group else view.orgs[0].id,
        owned=owned,
    )


def _collect_orphan_projects(
    report: AuditReport,
    projects: list[dict[str, Any]],
    *,
    workspace_id: str,
    org_id: uuid.UUID,
    owned: _Ownership,
) -> None:
    reservations = owned.live_reservations.get(workspace_id, [])
    for project in projects:
        project_id = str(project.get("id") or "")
        if not project_id or project_id in owned.recorded_projects:
            continue
        if _reserved(project, reservations):
            continue
        report.orphan_projects.append(
            OrphanProject(id=project_id, workspace_id=workspace_id, org_id=org_id)
        )


def _stuck_attempts(*, now: datetime, plan: _Plan) -> list[StuckAttempt]:
    stale = attempts_stale()
    if plan.brand_id is not None:
        stale = stale.filter(brand_id=plan.brand_id)
    elif plan.org_id is not None:
        stale = stale.filter(brand__organization_id=plan.org_id)
    return [
        StuckAttempt(
            id=attempt_id,
            brand_id=brand_id,
            age_seconds=max(int((now - updated_at).total_seconds()), 0),
        )
        for attempt_id, brand_id, updated_at in stale.values_list("id", "brand_id", "updated_at")
    ]


# --- Scope -------------------------------------------------------------------------------------


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


def _keep_scope(report: AuditReport, plan: _Plan) -> None:
    """A scoped run reports its org's findings only (a parent may be shared by several orgs)."""
    if plan.org_id is None:
        return
    report.orphan_workspaces = [e for e in report.orphan_workspaces if e.org_id == plan.org_id]
    report.orphan_projects = [e for e in report.orphan_projects if e.org_id == plan.org_id]
    report.errors = [e for e in report.errors if e.org_id == plan.org_id]


def audit_run(
    scope: AuditScope | None = None, *, progress: AuditProgress | None = None
) -> AuditReport:
    """Audit every org with a parent workspace, or `scope`'s part of it. Read-only: changes
    nothing upstream or in the database. Upstream failures never raise; they become `errors`
    entries for the orgs concerned (and whatever was read before the failure is still
    evaluated). Raises :class:`AuditScopeError` for a scope naming nothing."""
    plan = _plan(scope or AuditScope())
    progress = progress or AuditProgress()
    report = AuditReport()
    orgs = _orgs_with_parent()
    groups = _group_by_credential(orgs, report.errors)
    flat_orgs = _orgs_with_flat_brands(orgs)
    views = [
        ParentView(parent_id=parent_id, orgs=members)
        for (_credential, parent_id), members in groups.items()
        if plan.org_id is None or any(org.id == plan.org_id for org in members)
    ]
    for view in views:
        read_family(view, wanted=plan.wanted, list_parent=plan.list_parent)
        progress.family_read(view)
    progress.emit("listing")
    for view in views:
        list_workspaces(view, on_listed=progress.workspace_listed)

    # The database is read after Semrush (see the module docstring).
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS)
    owned = _read_ownership(cutoff=cutoff)
    for view in views:
        if view.error is not None:
            report.errors.extend(AuditError(org_id=org.id, error=view.error) for org in view.orgs)
        if view.read_family:
            _evaluate(view, owned, flat_orgs, report)
    report.stuck_attempts = _stuck_attempts(now=now, plan=plan)
    _keep_scope(report, plan)

    report.orphan_workspaces.sort(key=lambda e: (str(e.org_id), e.id))
    report.orphan_projects.sort(key=lambda e: (str(e.org_id), e.workspace_id, e.id))
    report.stuck_attempts.sort(key=lambda e: (-e.age_seconds, str(e.id)))
    report.errors.sort(key=lambda e: str(e.org_id))
    progress.emit("done")
    return report
