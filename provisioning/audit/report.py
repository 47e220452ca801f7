"""What an audit reports (SPEC §8's `--json` shape), the scope it is asked for, and its
progress events."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

from provisioning.audit_upstream import ParentView


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
