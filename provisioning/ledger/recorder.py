"""Writing the ledger: the recorder the Semrush client hands every attempt to (SPEC §13.4).

The client (``provisioning.semrush.calls``) knows nothing of tenants or the database; the
recorder built for one client (:func:`recorder_for`, by ``provisioning.upstream``) carries the
ids of who is calling: the org, the brand, and, inside a chain's step, the chain's root job and
the step's row (bound by the job runner). One INSERT per recorded attempt (the ORM's, in
autocommit: 0.5 ms per call on a quiet machine, docs/benchmarks.md, "Ledger and tracing"): the
flows commit before every upstream call, so a row is never lost with a rolled-back transaction.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import orjson
from django.db import DatabaseError, connection, transaction

from kernel import context
from provisioning.ledger.models import UpstreamCall
from provisioning.semrush.calls import SentAttempt
from provisioning.semrush.contract import operation_for

logger = logging.getLogger("serenity.ledger")

# The contract's operations that are recorded: every write, and the reads that confirm one (a
# new workspace's status, a publish's state). Listings and the language catalogue are not.
RECORDED_OPERATIONS = frozenset(
    {
        "workspace-child-create-v2",
        "workspaces-status-get",
        "projects-post-project",
        "projects-patch-project",
        "projects-publish-project",
        "projects-get-project",
        "projects-delete-project",
        "aio-create-tagged-prompts",
    }
)
# The operations whose answer names the object they made (its `id`).
_CREATES_WORKSPACE = "workspace-child-create-v2"
_CREATES_PROJECT = "projects-post-project"

_IDS = re.compile(r"/workspaces/(?P<workspace>[^/]+)(?:/projects/(?P<project>[^/]+))?")


class LedgerRecorder:
    """Records the attempts of :data:`RECORDED_OPERATIONS` for one caller (ids as strings);
    with `confirm_reads` False, only the writes (a tool's reads confirm nothing)."""

    def __init__(
        self,
        *,
        organization_id: str,
        brand_id: str | None = None,
        job_id: str | None = None,
        step_job_id: str | None = None,
        attempt_id: str | None = None,
        confirm_reads: bool = True,
    ) -> None:
        self.organization_id = organization_id
        self.confirm_reads = confirm_reads
        self.brand_id = brand_id
        self.job_id = job_id
        self.step_job_id = step_job_id
        self.attempt_id = attempt_id

    def record(self, attempt: SentAttempt) -> None:
        """One row for the attempt, if its operation is recorded. A failed INSERT is logged,
        never raised (inside a transaction, under a savepoint, so the transaction survives)."""
        operation = operation_for(attempt.method, attempt.path)
        if operation is None or operation.name not in RECORDED_OPERATIONS:
            return
        if attempt.method == "GET" and not self.confirm_reads:
            return
        row = self.row(attempt, operation=operation.name)
        try:
            if connection.in_atomic_block:
                # Never expected (the flows commit before calling Semrush): under a savepoint,
                # so that the caller's transaction survives a failed INSERT.
                with transaction.atomic():
                    row.save(force_insert=True)
            else:
                row.save(force_insert=True)
        except DatabaseError:
            logger.warning(
                "the upstream call was not recorded",
                exc_info=True,
                extra={"upstream_operation": operation.name, "x_request_id": attempt.request_id},
            )

    def row(self, attempt: SentAttempt, *, operation: str) -> UpstreamCall:
        """The attempt's row (`operation`: the contract's operationId), not saved."""
        workspace_id, project_id = object_ids(attempt, operation=operation)
        return UpstreamCall(
            at=datetime.fromtimestamp(attempt.started_at, tz=UTC),
            organization_id=self.organization_id,
            brand_id=self.brand_id,
            job_id=self.job_id,
            step_job_id=self.step_job_id,
            attempt_id=self.attempt_id,
            operation=operation,
            method=attempt.method,
            status_code=attempt.status,
            duration_ms=attempt.duration_ms,
            workspace_id=workspace_id,
            project_id=project_id,
            request_id=attempt.request_id,
        )


def object_ids(attempt: SentAttempt, *, operation: str) -> tuple[str | None, str | None]:
    """The workspace and project the attempt names or (a create, answered 2xx) returns. A
    child workspace's create names its parent: the row names the child it made (None when it
    made none)."""
    match = _IDS.search(attempt.path)
    workspace = unquote(match["workspace"]) if match else None
    project = unquote(match["project"]) if match and match["project"] else None
    if operation == _CREATES_WORKSPACE:
        workspace = _returned_id(attempt)
    elif operation == _CREATES_PROJECT:
        project = _returned_id(attempt)
    return workspace, project


def _returned_id(attempt: SentAttempt) -> str | None:
    response = attempt.response
    if response is None or not 200 <= response.status_code < 300:
        return None
    try:
        body: Any = orjson.loads(response.content)
    except ValueError:
        return None
    value = body.get("id") if isinstance(body, dict) else None
    return str(value)[:100] if isinstance(value, str | int) and value != "" else None


def recorder_for(*, organization_id: str, **ids: object) -> LedgerRecorder:
    """The recorder of a client built for the organization: `ids` as its caller gave them
    (`brand_id`, `attempt_id`), else as the log context has them (the runner binds the step's
    `brand_id`, `job_id` and `step_job_id`; an inline run's rows are never saved, so it
    binds no job ids and its calls are recorded without them). A tool's client (`operation` in
    `ids`: the audit, `semrush_check`) reads to report, not to confirm a write: only its writes
    would be recorded."""
    bound = context.current()

    def pick(name: str) -> str | None:
        value = ids.get(name) or bound.get(name)
        return str(value) if value else None

    return LedgerRecorder(
        organization_id=organization_id,
        brand_id=pick("brand_id"),
        job_id=bound.get("job_id"),
        step_job_id=bound.get("step_job_id"),
        attempt_id=pick("attempt_id"),
        confirm_reads="operation" not in ids,
    )
