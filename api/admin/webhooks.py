"""Admin for webhooks (SPEC §11.3): endpoints (never their secret) with their deliveries, and
the deliveries log with a *Redeliver* action (the same service as the API's redeliver; each
recorded in the admin log)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from webhooks.models import Webhook, WebhookDelivery
from webhooks.services import delivery_redeliver

DELIVERY_FIELDS: list[str] = [
    "id",
    "event_id",
    "event_type",
    "status",
    "attempts",
    "last_status_code",
    "last_error",
    "next_attempt_at",
    "created_at",
]


class DeliveryInline(admin.TabularInline):
    model = WebhookDelivery
    fields = tuple(DELIVERY_FIELDS)
    readonly_fields = tuple(DELIVERY_FIELDS)
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    ordering = ["-created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookDelivery]:
        return super().get_queryset(request).defer("body")


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "organization",
        "url",
        "events",
        "enabled",
        "disabled_reason",
        "created_at",
    ]
    list_select_related = ["organization"]
    search_fields = ["=id", "=organization__id", "url"]
    # The secret is never shown (it is encrypted at rest and shown once, to the API caller).
    fields = (
        "id",
        "organization",
        "url",
        "events",
        "enabled",
        "disabled_reason",
        "failing_since",
        "created_at",
    )
    readonly_fields = fields
    inlines = [DeliveryInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # registered through the API, which answers the secret once


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "webhook",
        "event_type",
        "status",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "created_at",
    ]
    list_filter = ["status", "event_type"]
    list_select_related = ["webhook"]
    search_fields = ["=id", "=event_id", "=webhook__id", "=webhook__organization__id"]
    fields = (*DELIVERY_FIELDS, "webhook", "job_id", "body")
    readonly_fields = (*DELIVERY_FIELDS, "webhook", "job_id", "body")
    actions = ["redeliver"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_redeliver_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("webhooks.change_webhookdelivery")

    @admin.action(
        description="Redeliver (a new attempt now, same webhook-id)", permissions=["redeliver"]
    )
    def redeliver(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        count = 0
        for delivery in queryset.select_related("webhook"):
            delivery_redeliver(delivery=delivery)
            self.log_change(request, delivery, "Redelivered (a new attempt now).")
            count += 1
        self.message_user(request, f"Scheduled {count} delivery attempt(s) now.", messages.SUCCESS)
