"""The upstream half of the operator audit (:mod:`provisioning.audit`): what Semrush holds under
one parent, as one credential sees it.

:func:`read_family` lists the parent's family (one call) and chooses the workspaces to list:
its ready direct children that the audit's scope wants, and the parent itself (SPEC §10.2);
:func:`list_workspaces` lists their projects (one call each: the contract has no listing of a
family's projects, and the family's `published_projects_count` does not count drafts, which is
what a crash leaves). Neither raises for an upstream failure: the view records a generic reason
(one of the ``ERROR_*`` texts, never an upstream body, URL or token) and keeps whatever was read
before the failure. The pace is the caller's (`provisioning.quota.patient_permits`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernel.errors import ConfigurationError
from provisioning.family import Readiness, classify_status
from provisioning.semrush import (
    SemrushClient,
    SemrushConfigurationError,
    SemrushError,
    SemrushForbiddenError,
    SemrushNetworkError,
    SemrushRateLimitedError,
    SemrushUnauthorizedError,
)
from provisioning.upstream import client_for_org
from serenity.models import Organization

logger = logging.getLogger("serenity.provisioning")

# Generic reasons for `errors` entries: an operator learns what to check, nothing upstream leaks.
ERROR_CONFIGURATION = "The organization's Semrush configuration is missing or unreadable."
ERROR_UNAUTHORIZED = "Semrush rejected the organization's credential."
ERROR_FORBIDDEN = "Semrush refused access to the organization's parent workspace."
ERROR_RATE_LIMITED = "Semrush rate-limited the audit; run it again later."
ERROR_UNREACHABLE = "Semrush could not be reached."
ERROR_UPSTREAM = "Semrush answered with an error."


@dataclass
class ParentView:
    """What one credential sees under one parent: its direct children and the projects of the
    workspaces that were listed (absent key: not listed). `to_list`: the workspaces
    :func:`read_family` chose to list (the ready children the scope wants, and the parent)."""

    parent_id: str
    orgs: list[Organization]
    children: list[dict[str, Any]] = field(default_factory=list)
    projects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    error: str | None = None
    read_family: bool = False
    to_list: list[str] = field(default_factory=list)
    client: SemrushClient | None = None


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ConfigurationError | SemrushConfigurationError | ValueError):
        return ERROR_CONFIGURATION
    if isinstance(exc, SemrushUnauthorizedError):
        return ERROR_UNAUTHORIZED
    if isinstance(exc, SemrushForbiddenError):
        return ERROR_FORBIDDEN
    if isinstance(exc, SemrushRateLimitedError):
        return ERROR_RATE_LIMITED
    if isinstance(exc, SemrushNetworkError):
        return ERROR_UNREACHABLE
    return ERROR_UPSTREAM


def read_family(
    view: ParentView, *, wanted: Callable[[dict[str, Any]], bool], list_parent: bool = True
) -> None:
    """One call: the parent's family. Chooses `view.to_list`: the ready direct children that
    `wanted` accepts, then the parent itself unless `list_parent` is false. A failure marks the
    whole view failed (nothing to list)."""
    try:
        view.client = client_for_org(view.orgs[0], operation="provisioning_audit")
        family = view.client.list_family(parent_id=view.parent_id)
    except (SemrushError, ConfigurationError) as exc:
        view.error = _error_text(exc)
        logger.warning(
            "audit: could not read a parent's family",
            extra={"org_id": str(view.orgs[0].id), "error_class": type(exc).__name__},
        )
        return
    view.read_family = True
    view.children = [
        ws
        for ws in family
        if str(ws.get("parent_id") or "") == view.parent_id
        and str(ws.get("id") or "") not in ("", view.parent_id)
    ]
    view.to_list = [
        str(ws["id"])
        for ws in view.children
        if classify_status(ws.get("status")) is Readiness.READY and wanted(ws)
    ]
    if list_parent:
        view.to_list.append(view.parent_id)


def list_workspaces(view: ParentView, *, on_listed: Callable[[], None]) -> None:
    """One listing per workspace of `view.to_list` (more only for a workspace whose projects
    span several pages); `on_listed` after each. A workspace whose listing failed (after the
    client's own retries) is tried once more at the end, when a passing fault has had time to
    clear; a second failure marks the view failed but keeps what was read."""
    if view.client is None:
        return
    failed = []
    for workspace_id in view.to_list:
        if not _listed(view, workspace_id, last_try=False):
            failed.append(workspace_id)
        on_listed()
    for workspace_id in failed:
        _listed(view, workspace_id, last_try=True)


def _listed(view: ParentView, workspace_id: str, *, last_try: bool) -> bool:
    """List one workspace's projects into the view; whether that worked."""
    assert view.client is not None
    try:
        view.projects[workspace_id] = view.client.list_projects(workspace_id=workspace_id)
    except SemrushForbiddenError:
        # Deleted between the family read and this one: it holds nothing any more.
        view.projects[workspace_id] = []
    except SemrushError as exc:
        if last_try:
            view.error = view.error or _error_text(exc)
        logger.warning(
            "audit: could not list a workspace's projects",
            extra={
                "workspace_id": workspace_id,
                "error_class": type(exc).__name__,
                "final": last_try,
            },
        )
        return False
    return True
