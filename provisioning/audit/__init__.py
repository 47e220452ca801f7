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

The room: `report` (the findings, the scope, progress), `reading` (the orgs, the database's
ownership and the scope's plan; Semrush is read by `provisioning.audit_upstream`), `judging`
(what is an orphan or a stuck attempt), and `audit_run` here, which reads and then judges.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from provisioning.audit.judging import _evaluate, _keep_scope, _stuck_attempts
from provisioning.audit.reading import (
    _family_says_changed as _family_says_changed,
)
from provisioning.audit.reading import (
    _group_by_credential,
    _orgs_with_flat_brands,
    _orgs_with_parent,
    _plan,
    _read_ownership,
)
from provisioning.audit.report import (
    AuditError,
    AuditProgress,
    AuditReport,
    AuditScope,
    AuditScopeError,
    OrphanProject,
    OrphanWorkspace,
    StuckAttempt,
)
from provisioning.audit.report import (
    ProgressEvent as ProgressEvent,
)
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
