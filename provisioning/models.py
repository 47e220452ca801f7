"""Provisioning attempts: the per-brand lease for Semrush work (SPEC §3, §6.1)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

# The ledger's model lives in its own room (provisioning/ledger/); imported so Django finds it.
from provisioning.ledger.models import UpstreamCall  # noqa: F401


class AttemptStatus(models.TextChoices):
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"


class AttemptReason(models.TextChoices):
    TERMINAL = "terminal"
    EXHAUSTED = "exhausted"
    UPSTREAM = "upstream"
    GONE = "gone"
    AMBIGUOUS = "ambiguous"
    UNEXPECTED = "unexpected"
    CANCELLED = "cancelled"
    STALE = "stale"


class AttemptStartedBy(models.TextChoices):
    CREATE_BRAND = "create-brand"
    CREATE_MARKET = "create-market"
    ACTIVATE = "activate"
    DEACTIVATE = "deactivate"
    REPAIR = "repair"


class ProvisioningAttempt(models.Model):
    """One attempt at provisioning work on a brand, kept as history.

    At most one `pending` attempt per brand (a partial unique constraint). Every worker write is
    a conditional UPDATE on (id, status='pending'); see `provisioning.states`.
    `updated_at` is the staleness clock: bumped by worker steps, never by brand edits.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    brand = models.ForeignKey(
        "serenity.Brand", on_delete=models.CASCADE, related_name="provisioning_attempts"
    )
    status = models.CharField(
        max_length=10, choices=AttemptStatus.choices, default=AttemptStatus.PENDING
    )
    reason = models.CharField(max_length=16, choices=AttemptReason.choices, null=True, blank=True)
    error = models.CharField(max_length=500, null=True, blank=True)
    candidate_workspace_id = models.CharField(max_length=100, null=True, blank=True)
    freshly_created = models.BooleanField(default=False)
    workspace_promoted = models.BooleanField(default=False)
    # Cleanup of a freshly created candidate after failure has been done (or was not needed).
    cleanup_done = models.BooleanField(default=False)
    started_by = models.CharField(max_length=16, choices=AttemptStartedBy.choices)
    job = models.ForeignKey(
        "jobs.AsyncJob",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The timeline an operator reads (SPEC §10.4): began = created_at.
    candidate_at = models.DateTimeField(null=True, blank=True)
    promoted_at = models.DateTimeField(null=True, blank=True)
    # A freshly created candidate's age when the status read that found it ready was due
    # (seconds): what `selectors.settle_seconds_learned` learns from (SPEC §11.1).
    settle_seconds = models.FloatField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Who began and who cancelled it: "user (token name)" for the API, "admin: user" for the
    # admin, with the request id of the request that did it (`kernel.context`).
    started_by_actor = models.CharField(max_length=200, null=True, blank=True)
    started_request_id = models.CharField(max_length=64, null=True, blank=True)
    cancelled_by_actor = models.CharField(max_length=200, null=True, blank=True)
    cancelled_request_id = models.CharField(max_length=64, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["brand"],
                condition=Q(status="pending"),
                name="one_pending_attempt_per_brand",
            ),
        ]
        indexes = [
            models.Index(fields=["brand", "-created_at"], name="attempt_brand_latest_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.started_by} {self.id} [{self.status}]"


# An onboarding's items share the family listing by groups of this many (SPEC §11.2).
ONBOARDING_GROUP_SIZE = 10


class OnboardingStatus(models.TextChoices):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"


class OnboardingCancelledBy(models.TextChoices):
    USER = "user"
    FAILURE_THRESHOLD = "failureThreshold"


class Onboarding(models.Model):
    """A bulk onboarding (SPEC §11.2): many brand creates accepted in one request.

    Its counts are kept as its items end (SPEC §12.4), never recounted: each item is counted
    once, by the conditional write that records its `ended_status`, and the counters move in
    the same transaction (`in_progress` down, its ending's counter up). It has ended once
    `completed_at` is written (when `in_progress` reaches 0); `cancelled_at` records a
    cancel."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        "serenity.Organization", on_delete=models.CASCADE, related_name="onboardings"
    )
    total = models.PositiveIntegerField()
    in_progress = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    # Who cancelled it (SPEC §13.2): a user, or the failure threshold; null while not cancelled.
    cancelled_by = models.CharField(
        max_length=24, choices=OnboardingCancelledBy.choices, null=True, blank=True
    )
    # The threshold (SPEC §13.2): once this many items failed, the rest is cancelled.
    max_failed_items = models.PositiveIntegerField(null=True, blank=True)
    # The onboarding this one redrives (its failed and cancelled items), if any.
    retry_of = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="retries"
    )
    # When the onboarding ended, COMPLETED or CANCELLED (its `finishedAt`), and its webhook
    # event was emitted (once).
    completed_at = models.DateTimeField(null=True, blank=True)
    started_by_actor = models.CharField(max_length=200, null=True, blank=True)
    started_request_id = models.CharField(max_length=64, null=True, blank=True)
    # The items' shared settle reads (SPEC §12.5, `family.family_status_shared`): the statuses
    # (workspace id → status) of the workspaces settling when the last family listing was asked
    # for (empty when it failed), that time, and the step (job row) listing now, if any.
    statuses = models.JSONField(null=True, blank=True)
    statuses_at = models.DateTimeField(null=True, blank=True)
    statuses_by = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["organization", "-created_at", "-id"], name="onboarding_org_idx")
        ]

    def __str__(self) -> str:
        return f"onboarding {self.id} ({self.total} brands)"


class OnboardingItem(models.Model):
    """One brand of an onboarding, by its position in the request (`index`). Its state is its
    chain's (`job`, the root clients hold); an item refused at accept (`brandExists`) has no
    brand and no job, and its `error`."""

    onboarding = models.ForeignKey(Onboarding, on_delete=models.CASCADE, related_name="items")
    index = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    brand = models.ForeignKey(
        "serenity.Brand", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    job = models.ForeignKey(
        "jobs.AsyncJob", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    error = models.JSONField(null=True, blank=True)
    # The brand data it was asked with (`{baseUrl, urls, aliases, markets}`, each market as a
    # chained job stores it): what a redrive begins again and the CSV export shows (SPEC §13.2).
    # Null for items accepted before revision 7 (their brand's fields stand in).
    brand_input = models.JSONField(null=True, blank=True)
    # The status its chain ended with, once the onboarding's counts include it (null while
    # it runs): the write that sets it is what counts the item, once.
    ended_status = models.CharField(max_length=16, null=True, blank=True)

    class Meta:
        ordering = ["onboarding", "index"]
        constraints = [
            models.UniqueConstraint(fields=["onboarding", "index"], name="uniq_onboarding_index")
        ]

    def __str__(self) -> str:
        # Not the name: the admin's item rows show it once, as the brand's link.
        return f"item {self.index}"


class OnboardingFamily(models.Model):
    """The parent's family as one group of an onboarding's items saw it (SPEC §11.2: listed
    once per group, not once per item), kept to the entries whose title is one of the group's
    names: what their create-or-adopt needs."""

    onboarding = models.ForeignKey(Onboarding, on_delete=models.CASCADE, related_name="+")
    group = models.PositiveIntegerField()
    # Null while the item that claimed the group lists the family.
    entries = models.JSONField(null=True, blank=True)
    # The step (job row) of the item that claimed it: the others wait while it is unfinished.
    claimed_by = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["onboarding", "group"], name="uniq_onboarding_group")
        ]

    def __str__(self) -> str:
        return f"{self.onboarding_id} group {self.group}"


class UpstreamCredential(models.Model):
    """What the service knows of one Semrush credential (SPEC §13.2), by its limiter key (a keyed
    hash, never the credential: `provisioning.quota.credential_key`). Written rarely: its first
    2xx, the start and the end of a hold, each re-check (`provisioning.credentials`)."""

    key = models.CharField(max_length=64, primary_key=True)
    # Its first 2xx: from then on a 401 holds the work that uses it instead of failing it.
    accepted_at = models.DateTimeField(null=True, blank=True)
    # When the current hold began (a 401 after it was accepted); null: not held.
    refused_at = models.DateTimeField(null=True, blank=True)
    # When the service last learnt its state (accepted, refused, re-checked).
    checked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"credential {self.key.rsplit(':', 1)[-1][:12]}"
