"""The Semrush workspace lifecycle (SPEC §5): create-or-adopt, settle, decommission.

Nothing here holds a transaction or a row lock across an upstream call. Writes that must be
race-free (the brand's pointer, an attempt's candidate) are single conditional UPDATEs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from kernel.errors import ConfigurationError, DomainError
from kernel.metrics import record_upstream_call
from kernel.queries import update_where
from provisioning.exceptions import (
    AmbiguousWorkspaceError,
    SubworkspaceCreationFailedError,
    SubworkspaceCreationTimeoutError,
    SubworkspaceGoneError,
    UpstreamError,
    UpstreamForbiddenError,
    UpstreamRateLimitedError,
    UpstreamUnauthorizedError,
    WorkspaceMisconfiguredError,
    WorkspaceNotEmptyError,
)
from provisioning.semrush import (
    SemrushClient,
    SemrushConfigurationError,
    SemrushError,
    SemrushGoneError,
    SemrushQuotaError,
    SemrushRateLimitedError,
    SemrushUnauthorizedError,
    semrush_client_for,
)
from provisioning.semrush.errors import SemrushAuthError
from serenity.models import Brand, BrandStatus, Organization

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


def client_for_org(organization: Organization, **log_context: object) -> SemrushClient:
    """A client with the org's own credential, else the service default."""
    try:
        token = organization.semrush_credential()
    except ValueError as exc:
        raise ConfigurationError("The organization's Semrush credential cannot be read.") from exc
    try:
        return semrush_client_for(
            token=token,
            log_context={"org_id": str(organization.id), **log_context},
            on_call=record_upstream_call,
        )
    except SemrushConfigurationError as exc:
        raise ConfigurationError() from exc


def translate_upstream(exc: SemrushError) -> DomainError:
    """Upstream errors never reach a client as they are (SPEC §7)."""
    from provisioning.exceptions import QuotaExceededError

    if isinstance(exc, SemrushGoneError):
        return SubworkspaceGoneError()
    if isinstance(exc, SemrushUnauthorizedError):
        return UpstreamUnauthorizedError()
    if isinstance(exc, SemrushAuthError):
        return UpstreamForbiddenError()
    if isinstance(exc, SemrushQuotaError):
        return QuotaExceededError()
    if isinstance(exc, SemrushConfigurationError):
        return ConfigurationError()
    if isinstance(exc, SemrushRateLimitedError):
        return UpstreamRateLimitedError(retry_after=exc.retry_after)
    return UpstreamError()


@dataclass(frozen=True)
class Workspace:
    id: str
    freshly_created: bool


def _matches(
    *,
    family: Iterable[dict],
    title: str,
    parent_id: str,
    exclude_brand_id: Any,
    accept_not_ready: bool,
) -> list[dict]:
    """Same title (trimmed, case-insensitive), ready (or, after an ambiguous create, any
    non-terminal status), not the parent, and not another brand's pointer. Only the
    same-title candidates are looked up in the database (one query, whatever the family's
    size)."""
    wanted = title.strip().lower()
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
        .exclude(pk=exclude_brand_id)
        .values_list("semrush_sub_workspace_id", flat=True)
    )
    return [ws for ws in candidates if str(ws["id"]) not in claimed]


def workspace_create_or_adopt(
    *,
    client: SemrushClient,
    brand: Brand,
    parent_id: str,
    own_earlier_candidates: set[str] | None = None,
) -> Workspace:
    """Find or make the brand's sub-workspace (SPEC §5, create-or-adopt).

    List the family; candidates are same title, ready, not the parent, not another brand's
    pointer. A candidate recorded by one of this brand's own earlier attempts wins outright;
    0 → create; 1 → adopt if it has no projects (else `WorkspaceNotEmptyError`); ≥2 →
    `AmbiguousWorkspaceError`. A create that times out is resolved by re-matching with any
    non-terminal status (a just-created workspace is `not ready`).
    Raises domain errors only (upstream errors are translated).
    """
    try:
        family = client.list_family(parent_id=parent_id, titled=brand.name)
        matches = _matches(
            family=family,
            title=brand.name,
            parent_id=parent_id,
            exclude_brand_id=brand.pk,
            accept_not_ready=False,
        )
        own = [m for m in matches if str(m["id"]) in (own_earlier_candidates or set())]
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


def _resolve_ambiguous_create(*, client: SemrushClient, brand: Brand, parent_id: str) -> Workspace:
    family = client.list_family(parent_id=parent_id, titled=brand.name)
    matches = _matches(
        family=family,
        title=brand.name,
        parent_id=parent_id,
        exclude_brand_id=brand.pk,
        accept_not_ready=True,
    )
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


def workspace_read_readiness(*, client: SemrushClient, workspace_id: str) -> Readiness:
    """One status read of the brand's own workspace (403 → `SubworkspaceGoneError`)."""
    try:
        return classify_status(client.get_workspace_status(workspace_id=workspace_id, owned=True))
    except SemrushError as exc:
        raise translate_upstream(exc) from exc


def workspace_settle(
    *,
    client: SemrushClient,
    workspace_id: str,
    attempts: int | None = None,
    interval_seconds: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_read: Callable[[], object] | None = None,
) -> None:
    """Poll mode: read the status until ready. A terminal status fails at once (502
    `subworkspaceCreationFailed`); the budget running out → 504 `subworkspaceCreationTimeout`."""
    attempts = attempts or settings.SERENITY_SETTLE_POLL_ATTEMPTS
    interval = (
        interval_seconds
        if interval_seconds is not None
        else settings.SERENITY_SETTLE_POLL_INTERVAL_MS / 1000.0
    )
    for index in range(attempts):
        readiness = workspace_read_readiness(client=client, workspace_id=workspace_id)
        if on_read is not None:
            on_read()
        if readiness is Readiness.READY:
            return
        if readiness is Readiness.TERMINAL:
            raise SubworkspaceCreationFailedError()
        if index + 1 < attempts:
            sleep(interval)
    raise SubworkspaceCreationTimeoutError()


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


def pointer_persist(*, brand_id: Any, workspace_id: str) -> bool:
    """Set the brand's pointer iff it is empty or already this workspace, and the brand is not
    deleted. False: another writer won (or the workspace is another brand's pointer)."""
    try:
        with transaction.atomic():
            return pointer_write(brand_id=brand_id, workspace_id=workspace_id)
    except IntegrityError:
        return False


def pointer_write(*, brand_id: Any, workspace_id: str) -> bool:
    """The conditional pointer write (`pointer IS NULL OR pointer = workspace`, brand not
    deleted); whether it changed the row. The pointer is unique: a workspace that is another
    brand's pointer raises `IntegrityError` (the caller decides what that ends)."""
    where = {
        "pk": brand_id,
        "status__ne": BrandStatus.DELETED,
        "semrush_sub_workspace_id__null_or": workspace_id,
    }
    return update_where(Brand, where, semrush_sub_workspace_id=workspace_id) == 1


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
