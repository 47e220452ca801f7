"""The read-only preflight behind ``python manage.py semrush_check --org ID`` (SPEC §12.1).

With the organization's own credential (``provisioning.upstream.client_for_org``) it reads
what the service relies on before going live: the parent workspace's status and family, the
language catalogue, and one workspace's projects (a brand's sub-workspace if the org has one,
else the parent). Each answer is checked against the project's description of Semrush's
contract (``provisioning.semrush.contract``) and against what the service expects of it:

- a member missing or of another type than the contract says (a shape the client cannot read
  at all counts too);
- a workspace ``status`` or a project ``publish_status`` outside the values known today;
- a catalogue language whose ``name`` the service cannot map to an ISO code (it maps codes to
  catalogue names through pycountry, ``provisioning.catalogue``).

Guarantees: only reads (GETs) are sent, nothing is written here or upstream; the report's
``exit_code`` is 0 when nothing differs, 1 when something does, 2 when the check could not
run (unknown org, no parent, no usable credential, Semrush unreachable or refusing).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kernel.errors import ConfigurationError
from provisioning.catalogue import catalogue_code
from provisioning.semrush import SemrushClient, SemrushError, SemrushUnexpectedResponseError
from provisioning.semrush.contract import (
    PE,
    PUBLISH_STATUSES,
    UM,
    WORKSPACE_STATUSES,
    answer_problems,
)
from provisioning.upstream import client_for_org
from serenity.models import Brand, BrandStatus, Organization
from serenity.slices import language_name


@dataclass(frozen=True)
class Difference:
    """One way an answer differs: the operation read (``GET <path>``) and what differs."""

    operation: str
    detail: str


@dataclass
class PreflightReport:
    org_id: str
    parent_id: str | None = None
    workspace_id: str | None = None
    differences: list[Difference] = field(default_factory=list)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        return 1 if self.differences else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "orgId": self.org_id,
            "parentWorkspaceId": self.parent_id,
            "workspaceId": self.workspace_id,
            "differences": [
                {"operation": d.operation, "detail": d.detail} for d in self.differences
            ],
            "error": self.error,
            "exitCode": self.exit_code,
        }


class _Reads:
    """The reads of one run, each recording its differences on the report."""

    def __init__(self, client: SemrushClient, report: PreflightReport) -> None:
        self.client = client
        self.report = report

    def differ(self, path: str, details: list[str]) -> None:
        self.report.differences.extend(Difference(f"GET {path}", d) for d in details)

    def status(self, workspace_id: str) -> None:
        path = f"{UM}/v1/workspaces/{workspace_id}/status"
        status = self.client.get_workspace_status(workspace_id=workspace_id)
        self.differ(path, _unknown_status("status", status))

    def family(self, parent_id: str) -> None:
        path = f"{UM}/v1/workspaces/{parent_id}/family"
        family = self.client.list_family(parent_id=parent_id)
        found = answer_problems("GET", path, 200, family)
        for index, workspace in enumerate(family):
            found += _unknown_status(f"answer[{index}].status", workspace.get("status"))
        self.differ(path, found)

    def languages(self) -> None:
        path = f"{PE}/v1/languages"
        items = self.client.list_languages()
        found = answer_problems("GET", path, 200, {"items": items})
        for index, item in enumerate(items):
            name = item.get("name")
            problem = _language_name_problem(name) if isinstance(name, str) else None
            if problem is not None:
                found.append(f"answer.items[{index}].name: {problem}")
        self.differ(path, found)

    def projects(self, workspace_id: str) -> None:
        path = f"{PE}/v1/workspaces/{workspace_id}/projects"
        items = self.client.list_projects(workspace_id=workspace_id)
        found = answer_problems("GET", path, 200, {"items": items})
        for index, project in enumerate(items):
            status = project.get("publish_status")
            if isinstance(status, str) and status.strip().lower() not in PUBLISH_STATUSES:
                found.append(f"answer.items[{index}].publish_status: unknown value {status!r}")
        self.differ(path, found)


def _language_name_problem(name: str) -> str | None:
    """How a catalogue name defeats the service's mapping of ISO codes to catalogue names
    (ISO 639 English names through pycountry), or None. A two-letter ISO code in place of the
    name is one: pycountry would read "en" as the language "En" (`enc`), and the code "en"
    would find no entry."""
    value = name.strip()
    if len(value) == 2 and language_name(value.lower()) is not None:
        return f"{name!r} is an ISO code, not the language name the service maps codes to"
    if catalogue_code(value) is None:
        return f"{name!r} is not a language name the service maps to an ISO code"
    return None


def _unknown_status(where: str, status: Any) -> list[str]:
    if isinstance(status, str) and status.strip().lower() not in WORKSPACE_STATUSES:
        return [f"{where}: unknown workspace status {status!r}"]
    return []


def _checked_workspace(organization: Organization) -> str | None:
    """A brand's sub-workspace (the oldest brand's that has one), else None (the parent)."""
    pointer = (
        Brand.objects.filter(organization=organization, semrush_sub_workspace_id__isnull=False)
        .exclude(status=BrandStatus.DELETED)
        .order_by("created_at", "id")
        .values_list("semrush_sub_workspace_id", flat=True)
        .first()
    )
    return str(pointer) if pointer else None


def semrush_check(*, org_id: str) -> PreflightReport:
    """Run the preflight for one organization (module docstring). Never raises for an
    upstream failure: the report's ``error`` says why the check could not run."""
    report = PreflightReport(org_id=org_id)
    organization = _organization(org_id)
    if organization is None or not organization.semrush_parent_workspace_id:
        report.error = "unknown organization, or it has no Semrush parent workspace"
        return report
    report.parent_id = parent_id = str(organization.semrush_parent_workspace_id)
    report.workspace_id = _checked_workspace(organization) or parent_id
    try:
        reads = _Reads(client_for_org(organization, operation="semrush_check"), report)
        for read in (
            lambda: reads.status(parent_id),
            lambda: reads.family(parent_id),
            reads.languages,
            lambda: reads.projects(str(report.workspace_id)),
        ):
            try:
                read()
            except SemrushUnexpectedResponseError as exc:
                # A shape the client cannot read at all is a difference too; the others go on.
                detail = f"unreadable answer: {exc.detail}"
                report.differences.append(Difference(exc.operation, detail))
    except (SemrushError, ConfigurationError) as exc:
        report.error = f"Semrush could not be read ({type(exc).__name__})"
    return report


def _organization(org_id: str) -> Organization | None:
    try:
        return Organization.objects.filter(pk=uuid.UUID(str(org_id))).first()
    except ValueError:
        return None
