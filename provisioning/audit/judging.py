"""The audit's judging: given what Semrush and the database say, which workspaces and projects are
orphans, which attempts are stuck, and which findings a scope keeps (the rules are in
`provisioning.audit`'s docstring)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from provisioning.audit.reading import Slice, _Ownership, _Plan
from provisioning.audit.report import AuditReport, OrphanProject, OrphanWorkspace, StuckAttempt
from provisioning.audit_upstream import ParentView
from provisioning.services import attempts_stale
from provisioning.slice_match import project_on_slice, project_slice
from serenity.slices import slice_from_ids


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


def _keep_scope(report: AuditReport, plan: _Plan) -> None:
    """A scoped run reports its org's findings only (a parent may be shared by several orgs)."""
    if plan.org_id is None:
        return
    report.orphan_workspaces = [e for e in report.orphan_workspaces if e.org_id == plan.org_id]
    report.orphan_projects = [e for e in report.orphan_projects if e.org_id == plan.org_id]
    report.errors = [e for e in report.errors if e.org_id == plan.org_id]
