"""Webhook endpoints of an organization and their deliveries (SPEC §11.3).

A delivery is one event for one endpoint: its body is fixed when the event happens (every
attempt signs and sends the same bytes, under the same `webhook-id`, the event's id); its
attempts run as a job row of the outbox (`job_id`, the row carrying the next attempt).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import models

from kernel.crypto import decrypt_secret, encrypt_secret


class WebhookEventType(models.TextChoices):
    """Every event type (SPEC §11.3, §12.2). The set grows: clients treat it as open."""

    JOB_COMPLETED = "job.completed"
    JOB_FAILED = "job.failed"
    JOB_CANCELLED = "job.cancelled"
    ONBOARDING_COMPLETED = "onboarding.completed"
    ONBOARDING_CANCELLED = "onboarding.cancelled"
    DRIFT_DETECTED = "drift.detected"
    DRIFT_REPAIRED = "drift.repaired"
    WEBHOOK_TEST = "webhook.test"
    CREDENTIAL_REFUSED = "credential.refused"


# What an endpoint subscribes to (`events`): every type but `webhook.test`, which is sent on
# request to one endpoint only (`POST …/webhooks/{id}/test`).
SUBSCRIBABLE_EVENT_TYPES = [
    t for t in WebhookEventType.values if t != WebhookEventType.WEBHOOK_TEST
]


class Webhook(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        "serenity.Organization", on_delete=models.CASCADE, related_name="webhooks"
    )
    url = models.CharField(max_length=2048)
    events = models.JSONField(default=list)
    # A disabled endpoint gets no new deliveries (SPEC §12.2).
    enabled = models.BooleanField(default=True)
    # Why the service disabled it (SPEC §12.4: every attempt failed for 24 h); null otherwise.
    disabled_reason = models.CharField(max_length=200, null=True, blank=True, editable=False)
    # When its attempts began failing without a 2xx since (null: the last attempt delivered).
    failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    description = models.CharField(max_length=500, blank=True, default="")
    # The `whsec_…` signing secret, encrypted like org credentials (kernel.crypto).
    secret_encrypted = models.TextField(editable=False)
    # After a rotation, the secret it replaced (encrypted the same way), which also signs every
    # delivery until `previous_secret_expires_at` (SPEC §12.2: 24 h).
    previous_secret_encrypted = models.TextField(editable=False, blank=True, default="")
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The secret that one replaced, while it still signs (SPEC §13.6: a second rotation within
    # 24 h, a retried rotate, keeps the first secret signing: at most three signatures).
    older_secret_encrypted = models.TextField(editable=False, blank=True, default="")
    older_secret_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["organization", "-created_at", "-id"], name="webhook_org_idx")
        ]

    def __str__(self) -> str:
        return self.url

    def set_secret(self, secret: str) -> None:
        self.secret_encrypted = encrypt_secret(secret)

    def secret(self) -> str:
        """The signing secret. Raises `ValueError` when no configured key decrypts it."""
        return decrypt_secret(self.secret_encrypted)

    def signing_secrets(self, *, now: datetime) -> list[str]:
        """The secrets every delivery is signed with: the current one, then those it replaced
        that are still valid, newest first (at most three). Raises `ValueError` when no
        configured key decrypts one."""
        secrets = [self.secret()]
        for encrypted, expires in (
            (self.previous_secret_encrypted, self.previous_secret_expires_at),
            (self.older_secret_encrypted, self.older_secret_expires_at),
        ):
            if encrypted and expires is not None and expires > now:
                secrets.append(decrypt_secret(encrypted))
        return secrets


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class WebhookDelivery(models.Model):
    # Derived from (event, webhook): an event published twice is one delivery.
    id = models.UUIDField(primary_key=True, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.UUIDField()
    event_type = models.CharField(max_length=64, choices=WebhookEventType.choices)
    # The exact body sent (and signed) on every attempt.
    body = models.TextField()
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # The job row that carries the next attempt (a redelivery of a finished delivery is a new
    # one); by id only: retention purges finished jobs, never deliveries.
    job_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["webhook", "event_id"], name="delivery_event_unique")
        ]
        indexes = [
            models.Index(fields=["webhook", "-created_at", "-id"], name="delivery_webhook_idx"),
            # An org's pending deliveries, oldest first: the cap's count and overflow.
            models.Index(
                fields=["webhook", "created_at", "id"],
                name="delivery_pending_idx",
                condition=models.Q(status="pending"),
            ),
        ]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event_type} {self.id} [{self.status}]"


class WebhookAttempt(models.Model):
    """One attempt of a delivery (SPEC §12.2), recorded in the transaction that records its
    outcome on the delivery (whose `attempts` is their count)."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, null=True, blank=True)
    duration_ms = models.PositiveIntegerField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["delivery", "-at", "-id"], name="attempt_delivery_idx")]

    def __str__(self) -> str:
        return f"{self.delivery_id} at {self.at}: {self.status_code or self.error}"


class SlotKind(models.TextChoices):
    ORG = "org"  # holder: the org's id
    WORKER = "worker"  # holder: the Celery worker's node name


class AttemptSlot(models.Model):
    """One webhook attempt in flight, counted against a cap (SPEC §13.6, §13.7): `number` is
    below the cap of its kind, and unique per holder, so two workers racing for the last slot
    cannot both have it. A slot lapses at `held_until` (the attempt's lease): a worker killed
    in the middle of an attempt leaks nothing (`webhooks.slots`)."""

    kind = models.CharField(max_length=8, choices=SlotKind.choices)
    holder = models.CharField(max_length=200)
    number = models.PositiveSmallIntegerField()
    job_id = models.UUIDField()
    held_until = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "holder", "number"], name="webhook_slot_unique")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.holder} #{self.number}: {self.job_id}"
