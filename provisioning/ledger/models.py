"""One row per recorded upstream attempt (see the package docstring).

Insert-only: no row is ever updated. Tenants are named by id only (no foreign keys): a row
outlives a deleted brand and costs no key checks on the hot path; tenancy is `organization_id`.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q


class UpstreamCall(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # When the attempt was sent.
    at = models.DateTimeField()
    organization_id = models.UUIDField()
    brand_id = models.UUIDField(null=True, blank=True)
    # The chain's root (the id clients hold) and the step's own row; None outside a chain.
    job_id = models.UUIDField(null=True, blank=True)
    step_job_id = models.UUIDField(null=True, blank=True)
    attempt_id = models.UUIDField(null=True, blank=True)
    # The contract's operationId (provisioning/semrush/contract.py).
    operation = models.CharField(max_length=64)
    method = models.CharField(max_length=8)
    # None: no answer arrived (a timeout, a dropped connection).
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField()
    # The objects the call names or returns (upstream ids, as Semrush spells them).
    workspace_id = models.CharField(max_length=100, null=True, blank=True)
    project_id = models.CharField(max_length=100, null=True, blank=True)
    # The correlation id sent as `X-Request-Id` (and on the call's log line).
    request_id = models.CharField(max_length=64)

    class Meta:
        app_label = "provisioning"
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["organization_id", "-at", "-id"], name="upstream_call_org_idx"),
            models.Index(
                fields=["workspace_id"],
                condition=Q(workspace_id__isnull=False),
                name="upstream_call_workspace_idx",
            ),
            models.Index(
                fields=["project_id"],
                condition=Q(project_id__isnull=False),
                name="upstream_call_project_idx",
            ),
            models.Index(
                fields=["job_id"], condition=Q(job_id__isnull=False), name="upstream_call_job_idx"
            ),
            # Retention deletes by age (a B-tree, not BRIN: the embedded default is SQLite).
            models.Index(fields=["at"], name="upstream_call_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.operation} {self.status_code} {self.request_id}"
