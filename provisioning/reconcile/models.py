"""Reconciliations, their items, and the drift each brand and market carries now (SPEC §13.1).

A reconciliation is an org's resource shaped like an onboarding: accepted at once (202), run
by Celery work in batches of brands at the audit's share of the credential's rate, its counts
kept as it goes. One `IN_PROGRESS` reconciliation per org (a partial unique constraint, so two
concurrent requests cannot both begin one). `Drift` holds what the last reconciliation that
looked at a brand found: one row per brand (its workspace's drift) and one per market (its
project's); a row is deleted when a later look finds nothing, or a repair mends it.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q


class ReconciliationStatus(models.TextChoices):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class DriftKind(models.TextChoices):
    """What changed upstream behind the service's back. An open list (`x-extensible-enum`)."""

    WORKSPACE_GONE = "workspaceGone"
    WORKSPACE_FAILED = "workspaceFailed"
    PROJECT_GONE = "projectGone"
    PROJECT_NOT_LIVE = "projectNotLive"
    TRACKED_URL_CHANGED = "trackedUrlChanged"
    UNEXPECTED_PROJECT = "unexpectedProject"


# A brand's drift is its workspace's; a market's, its project's (SPEC §13.1).
WORKSPACE_KINDS = frozenset({DriftKind.WORKSPACE_GONE, DriftKind.WORKSPACE_FAILED})
PROJECT_KINDS = frozenset(
    {DriftKind.PROJECT_GONE, DriftKind.PROJECT_NOT_LIVE, DriftKind.TRACKED_URL_CHANGED}
)


class DriftAction(models.TextChoices):
    """What would mend a drift (an item's `action`)."""

    REPROVISION_WORKSPACE = "reprovisionWorkspace"
    RECREATE_PROJECT = "recreateProject"
    PUBLISH = "publish"
    SET_TRACKED_URL = "setTrackedUrl"
    REPORT_ONLY = "reportOnly"


class ItemStatus(models.TextChoices):
    PLANNED = "planned"
    REPAIRED = "repaired"
    FAILED = "failed"
    SKIPPED = "skipped"


class Reconciliation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        "serenity.Organization", on_delete=models.CASCADE, related_name="reconciliations"
    )
    status = models.CharField(
        max_length=16,
        choices=ReconciliationStatus.choices,
        default=ReconciliationStatus.IN_PROGRESS,
    )
    repair = models.BooleanField(default=False)
    # The brands asked for (null: every active brand with a workspace), and how far the plan
    # has read (the last brand id of the last batch: a re-delivered batch starts after it).
    brand_ids = models.JSONField(null=True, blank=True)
    after_brand_id = models.UUIDField(null=True, blank=True)
    # The plan has read every brand (it ends once no repair it began is running).
    plan_done = models.BooleanField(default=False)
    # The parent's family as the plan listed it once ({workspace id: status}).
    family = models.JSONField(null=True, blank=True)
    checked = models.PositiveIntegerField(default=0)
    drifted = models.PositiveIntegerField(default=0)
    repaired = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # `{code, message}` when it could not read the org's Semrush at all (FAILED).
    error = models.JSONField(null=True, blank=True)
    # Started by the sweep rather than by a person.
    swept = models.BooleanField(default=False)
    started_by_actor = models.CharField(max_length=200, null=True, blank=True)
    started_request_id = models.CharField(max_length=64, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization"],
                condition=Q(status="IN_PROGRESS"),
                name="one_reconciliation_in_progress_per_org",
            ),
        ]
        indexes = [
            models.Index(
                fields=["organization", "-created_at", "-id"], name="reconciliation_org_idx"
            )
        ]

    def __str__(self) -> str:
        return f"reconciliation {self.id} [{self.status}]"


class ReconciliationItem(models.Model):
    """One drift a reconciliation found: what would mend it and its upstream calls; once
    repaired (or not), how that ended. `job`: the `repairBrand` chain that mends it."""

    reconciliation = models.ForeignKey(
        Reconciliation, on_delete=models.CASCADE, related_name="items"
    )
    brand = models.ForeignKey("serenity.Brand", on_delete=models.CASCADE, related_name="+")
    market = models.ForeignKey(
        "serenity.Market", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The market's slice as found (kept if the market row goes), or, for an unexpected
    # project, the project's own (country code and language name, as upstream lists them).
    slice = models.JSONField(null=True, blank=True)
    project_id = models.CharField(max_length=100, null=True, blank=True)
    kind = models.CharField(max_length=32)
    action = models.CharField(max_length=32)
    planned_calls = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=ItemStatus.choices, default=ItemStatus.PLANNED)
    error = models.JSONField(null=True, blank=True)
    job_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["reconciliation", "id"]
        indexes = [models.Index(fields=["job_id"], name="reconciliation_item_job_idx")]

    def __str__(self) -> str:
        return f"{self.kind} on {self.brand_id}"


class Drift(models.Model):
    """A brand's (market null) or a market's current drift, as last detected."""

    brand = models.ForeignKey("serenity.Brand", on_delete=models.CASCADE, related_name="drifts")
    market = models.ForeignKey(
        "serenity.Market", on_delete=models.CASCADE, null=True, blank=True, related_name="drifts"
    )
    kind = models.CharField(max_length=32)
    detected_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["brand"], condition=Q(market__isnull=True), name="one_drift_per_brand"
            ),
            models.UniqueConstraint(
                fields=["market"], condition=Q(market__isnull=False), name="one_drift_per_market"
            ),
        ]
        indexes = [models.Index(fields=["kind"], name="drift_kind_idx")]

    def __str__(self) -> str:
        return f"{self.kind} since {self.detected_at:%Y-%m-%d %H:%M}"
