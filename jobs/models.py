"""The async job record: the source of truth for every piece of background work (SPEC §3, §6.4).

A chain is a linked list of rows: the root (the id clients poll) points at the chain's current
step, each step at the next. Each settle read of provision-workspace is its own row. A row with
`run_after` NULL is a chained step that is not runnable yet (it waits for promotion); the
dispatcher never touches it. Claiming sets `claim_token` and `lease_expires_at` with one
conditional UPDATE; results are written conditionally on the token.

The model refers to organizations and brands by id only: `jobs` depends on nothing of ours.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q


class JobStatus(models.TextChoices):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


FINISHED_STATUSES = (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED)


class JobType(models.TextChoices):
    PROVISION_WORKSPACE = "provisionWorkspace"
    CLASSIFY_PROMPTS = "classifyPrompts"
    REPAIR_BRAND = "repairBrand"


class JobStep(models.TextChoices):
    """What one row does. The public `step` names of SPEC §4.6."""

    PROVISION_WORKSPACE = "provisionWorkspace"
    CREATE_MARKET = "createMarket"
    ACTIVATE_MARKETS = "activateMarkets"
    ACTIVATE_BRAND_WORKSPACE = "activateBrandWorkspace"
    CLASSIFY_PROMPTS = "classifyPrompts"
    REPAIR_MARKETS = "repairMarkets"
    DEACTIVATE_BRAND = "deactivateBrand"


class JobMode(models.TextChoices):
    """How the work runs (SPEC §13.5): by workers (`async`), or at once in the request that
    began it (`sync`), with the request's patience; both begin the same way."""

    ASYNC = "async"
    SYNC = "sync"


class AsyncJob(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization_id = models.UUIDField(db_index=True)
    # Indexed by `job_brand_idx` (brand_id, -created_at): a second index on brand_id alone would
    # only cost every insert and every non-HOT update.
    brand_id = models.UUIDField(null=True, blank=True)
    job_type = models.CharField(max_length=32, choices=JobType.choices)
    step = models.CharField(max_length=32, choices=JobStep.choices)
    status = models.CharField(
        max_length=16, choices=JobStatus.choices, default=JobStatus.IN_PROGRESS
    )
    mode = models.CharField(max_length=8, choices=JobMode.choices, default=JobMode.ASYNC)
    metadata = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)

    # Chain links. The root has root=NULL; `current` is set on the root only.
    root = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="chain_steps"
    )
    next = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="previous"
    )
    current = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Order of the step in its chain (settle reads 0..n, a chained job after all of them).
    position = models.PositiveIntegerField(default=0)
    step_count = models.PositiveIntegerField(default=1)

    # Delivery
    run_after = models.DateTimeField(null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    publish_count = models.PositiveIntegerField(default=0)
    claim_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    run_count = models.PositiveIntegerField(default=0)
    # Claims taken over after their lease expired (the worker died holding it): SPEC §11.1's
    # poison-step count. Releases (settle, quota) end a claim cleanly and do not count.
    expired_claims = models.PositiveIntegerField(default=0)
    # What a released step waits for besides its `run_after` (e.g. "credential": its app holds
    # it until then, SPEC §13.2); null when it waits for nothing else.
    waiting_for = models.CharField(max_length=32, null=True, blank=True)

    # The W3C `traceparent` of the trace this chain belongs to (SPEC §13.4): its later steps
    # are sent by the dispatcher or a hand-over, not by the request, so each step's span
    # continues the trace from here. Empty when tracing is off.
    trace_context = models.CharField(max_length=128, blank=True, default="")

    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["run_after"],
                condition=Q(status="IN_PROGRESS"),
                name="job_due_idx",
            ),
            models.Index(fields=["brand_id", "-created_at"], name="job_brand_idx"),
        ]

    def __str__(self) -> str:
        """A chain (its root row: the id clients hold) is named with its effective status, its
        current step's (a chain whose second step FAILED is FAILED although its root row
        COMPLETED): admin titles, breadcrumbs and columns show this. Load `current` with the
        row (`select_related("current")`) where many are shown."""
        return f"{self.step} {self.id} [{self.chain_status}]"

    @property
    def chain_status(self) -> str:
        """The chain's status for a root row (its current step's), the row's own for a step."""
        if self.root_id is None and self.current_id is not None and self.current is not None:
            return str(self.current.status)
        return str(self.status)

    @property
    def root_id_or_self(self) -> uuid.UUID:
        return self.root_id or self.id

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES
