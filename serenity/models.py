"""Organizations, their members and API tokens, brands, markets and prompts (SPEC §3)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from kernel.crypto import decrypt_secret, encrypt_secret
from serenity.names import brand_name_key, validate_brand_name, validate_brand_names


class WorkspaceMode(models.TextChoices):
    SUBWORKSPACE = "subworkspace", "Sub-workspace per brand"
    FLAT = "flat", "Flat (all projects in the parent)"


class DriftRepair(models.TextChoices):
    """An org's `driftRepair` (SPEC §13.1): what the sweep does with the drift it finds."""

    OFF = "off", "Off: detect and report"
    AUTO = "auto", "Auto: repair what the sweep finds"


class Organization(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    semrush_parent_workspace_id = models.CharField(max_length=100, null=True, blank=True)
    serenity_enabled = models.BooleanField(default=False)
    workspace_mode = models.CharField(
        max_length=20, choices=WorkspaceMode.choices, default=WorkspaceMode.SUBWORKSPACE
    )
    # Fernet ciphertext; never readable back through the API or the admin.
    semrush_credential_encrypted = models.TextField(blank=True, default="", editable=False)
    # The upstream quota of the org's credential (SPEC §10.6); NULL: SEMRUSH_RATE_LIMIT_* apply.
    semrush_rate_limit_per_second = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.01)],
        help_text="Upstream requests per second for this org's credential (empty: the default).",
    )
    semrush_rate_limit_burst = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Upstream requests allowed at once after an idle spell (empty: the default).",
    )
    # Calls in flight at once on the org's credential (SPEC §11.1); NULL: SEMRUSH_CONCURRENCY_LIMIT.
    semrush_concurrency_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Upstream calls in flight at once for this org's credential (empty: the "
        "default). Like the rate, it applies only to an org with a credential of its own.",
    )
    # Onboarding items of this org that may be in progress at once (SPEC §12.4); NULL:
    # SERENITY_ONBOARDING_OPEN_ITEMS_MAX.
    onboarding_open_items_max = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Onboarding items this org may have in progress at once (empty: the "
        "default). An onboarding that would go past it is refused (429 onboardingLimit).",
    )
    drift_repair = models.CharField(
        max_length=8,
        choices=DriftRepair.choices,
        default=DriftRepair.OFF,
        help_text="What the drift sweep does with what it finds: report it (off), or repair it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def is_serenity_org(self) -> bool:
        return self.serenity_enabled and bool(self.semrush_parent_workspace_id)

    @property
    def has_semrush_credential(self) -> bool:
        return bool(self.semrush_credential_encrypted)

    def set_semrush_credential(self, token: str) -> None:
        self.semrush_credential_encrypted = encrypt_secret(token) if token else ""

    def semrush_credential(self) -> str | None:
        """The org's own Semrush token, or None (callers fall back to SEMRUSH_API_TOKEN)."""
        if not self.semrush_credential_encrypted:
            return None
        return decrypt_secret(self.semrush_credential_encrypted)


class Role(models.TextChoices):
    READER = "reader", "Reader"
    WRITER = "writer", "Writer"


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.READER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="uniq_membership"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization.name} as {self.role}"


class ApiToken(models.Model):
    """An API token, stored as its SHA-256 digest.

    Tokens are 256-bit random strings, so a fast unsalted digest is safe (no dictionary to
    attack) and lets authentication look a token up by one indexed equality.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=12, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class BrandStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACTIVE = "active", "Active"
    DELETED = "deleted", "Deleted"


class Brand(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="brands")
    # The validators are the API's rule (serenity.names): the admin cannot save what it refuses.
    name = models.CharField(max_length=200, validators=[validate_brand_name])
    # What names collide on (SPEC §10.2): `brand_name_key(name)`, kept in step by `save()`.
    name_key = models.CharField(max_length=400, editable=False)
    workspace_mode = models.CharField(
        max_length=20, choices=WorkspaceMode.choices, default=WorkspaceMode.SUBWORKSPACE
    )
    status = models.CharField(
        max_length=10, choices=BrandStatus.choices, default=BrandStatus.PENDING
    )
    base_url = models.URLField(max_length=2000, null=True, blank=True)
    urls = models.JSONField(default=list, blank=True)
    aliases = models.JSONField(default=list, blank=True, validators=[validate_brand_names])
    serenity_enabled = models.BooleanField(null=True, blank=True)
    # The only canonical pointer to the brand's sub-workspace. Written only by conditional
    # updates (`… WHERE pointer IS NULL OR pointer = candidate`), never by Model.save().
    semrush_sub_workspace_id = models.CharField(max_length=100, null=True, blank=True, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            # In the database, not in Python: two concurrent creates of look-alike names
            # cannot both commit.
            models.UniqueConstraint(
                "organization",
                "name_key",
                condition=~Q(status="deleted"),
                name="uniq_live_brand_name_key_per_org",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.name_key = brand_name_key(self.name)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "name" in update_fields:
            kwargs["update_fields"] = {*update_fields, "name_key"}
        super().save(*args, **kwargs)

    @property
    def is_serenity_active(self) -> bool:
        """Serenity is on for this brand: its override, else the org's flag."""
        if self.serenity_enabled is not None:
            return self.serenity_enabled
        return self.organization.serenity_enabled


class MarketStatus(models.TextChoices):
    CREATING = "creating", "Creating (slice reserved)"
    DRAFT = "draft", "Draft"
    PUBLISHING = "publishing", "Publishing"
    PUBLISH_FAILED = "publish_failed", "Publish failed"
    LIVE = "live", "Live"
    LIVE_WITH_UNPUBLISHED_UPDATES = "live_with_unpublished_updates", "Live, unpublished updates"


class Market(models.Model):
    """A (brand, geoTargetId, languageCode) slice; one non-deleted row per slice.

    A create reserves the slice with a `creating` row before any upstream call; the owner of the
    reservation (an attempt, a job, or a sync request) is recorded so that a create meeting a
    reservation whose owner has finished can resume it instead of answering 409.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    brand = models.ForeignKey(Brand, on_delete=models.CASCADE, related_name="markets")
    geo_target_id = models.PositiveIntegerField()
    language_code = models.CharField(max_length=12)
    name = models.CharField(max_length=200)
    status = models.CharField(
        max_length=32, choices=MarketStatus.choices, default=MarketStatus.CREATING
    )
    semrush_project_id = models.CharField(max_length=100, null=True, blank=True)
    workspace_id = models.CharField(max_length=100, null=True, blank=True)
    reserved_by = models.UUIDField(null=True, blank=True)
    # Publishing confirmed (SPEC §12.1): when the last publish was accepted (202), how long it
    # had run when a read found it live (what `provisioning.publishing` learns from), and why
    # it did not end live (`{code, message}`, plus Semrush's own `reason` for operators only).
    publish_started_at = models.DateTimeField(null=True, blank=True)
    publish_seconds = models.FloatField(null=True, blank=True)
    publish_error = models.JSONField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["geo_target_id", "language_code"]
        constraints = [
            models.UniqueConstraint(
                fields=["brand", "geo_target_id", "language_code"],
                condition=Q(deleted_at__isnull=True),
                name="uniq_live_market_slice",
            ),
        ]
        # An org's queued markets are counted at every accept (provisioning.caps).
        indexes = [
            models.Index(
                fields=["brand"],
                condition=Q(status="creating", deleted_at__isnull=True),
                name="market_queued_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.brand.name} {self.geo_target_id}/{self.language_code}"


class PromptIntent(models.TextChoices):
    INFORMATIONAL = "informational"
    NAVIGATIONAL = "navigational"
    COMMERCIAL = "commercial"
    TRANSACTIONAL = "transactional"


class Prompt(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    market = models.ForeignKey(Market, on_delete=models.CASCADE, related_name="prompts")
    text = models.TextField()
    # Trimmed, case-folded text: duplicates within a market are skipped.
    text_key = models.TextField(editable=False)
    geo_target_id = models.PositiveIntegerField()
    language_code = models.CharField(max_length=12)
    tags = models.JSONField(default=list, blank=True)
    intent = models.CharField(max_length=20, choices=PromptIntent.choices, null=True, blank=True)
    semrush_prompt_id = models.CharField(max_length=100, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["market", "text_key"], name="uniq_prompt_per_market"),
        ]

    def __str__(self) -> str:
        return self.text[:60]


class IdempotencyKey(models.Model):
    """The first answer to a keyed POST or PATCH under `/v2` (SPEC §10.3).

    The row is claimed by its INSERT, before the work starts: the unique constraint on the scope
    (user, org, method, path, key) lets exactly one of several concurrent requests in. Until the
    answer is recorded `response_status` is NULL ("in flight"). A 5xx answer deletes the row
    (the key is released); any other answer is kept until `expires_at`.
    """

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=2000)
    key = models.CharField(max_length=255)
    # SHA-256 of the request body as canonical JSON (sorted keys, no whitespace).
    request_digest = models.CharField(max_length=64)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    # Only the headers SPEC §10.3 replays: Location and Retry-After.
    response_headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "organization", "method", "path", "key"],
                name="uniq_idempotency_key_scope",
            ),
        ]
        indexes = [models.Index(fields=["expires_at"], name="idempotency_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} [{self.key}]"

    @property
    def is_in_flight(self) -> bool:
        return self.response_status is None
