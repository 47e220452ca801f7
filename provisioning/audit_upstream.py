"""The upstream half of the operator audit (:mod:`provisioning.audit`): what Semrush holds under
one parent, as one credential sees it.

:func:`read_parent` lists the parent's family and the projects of its ready direct children
(and of the parent itself, SPEC §10.2). It never raises for an upstream
failure: the view records a generic reason (one of the ``ERROR_*`` texts, never an upstream
body, URL or token) and keeps whatever was read before the failure.
"""

from __future__ import annotations

import logging
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
    workspaces that were listed (absent key: not listed)."""

    parent_id: str
    orgs: list[Organization]
    children: list[dict[str, Any]] = field(default_factory=list)
    projects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    error: str | None = None
    read_family: bool = False


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


def read_parent(view: ParentView) -> None:
    """Fill `view` from upstream. A failure to read the family marks the whole view failed; a
    failure on one workspace's projects marks it failed but keeps what was read."""
    try:
        client: SemrushClient = client_for_org(view.orgs[0], operation="provisioning_audit")
        family = client.list_family(parent_id=view.parent_id)
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
    to_list = [
        str(ws["id"])
        for ws in view.children
        if classify_status(ws.get("status")) is Readiness.READY
    ]
    to_list.append(view.parent_id)
    for workspace_id in to_list:
        try:
            view.projects[workspace_id] = client.list_projects(workspace_id=workspace_id)
        except SemrushForbiddenError:
            # Deleted between the family read and this one: it holds nothing any more.
            view.projects[workspace_id] = []
        except SemrushError as exc:
            view.error = view.error or _error_text(exc)
            logger.warning(
                "audit: could not list a workspace's projects",
                extra={"workspace_id": workspace_id, "error_class": type(exc).__name__},
            )
