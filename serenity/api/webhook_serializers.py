"""Request and response bodies of the webhook routes (SPEC §11.3). The views render with the
response classes and the OpenAPI document (serenity.api.schemas.webhooks) describes the same
classes: what is documented is what is rendered."""

from __future__ import annotations

from rest_framework import serializers

from serenity.api.fields import HttpUrlField
from serenity.api.responses import NEXT_CURSOR_HELP
from webhooks.addresses import URL_MAX_LENGTH
from webhooks.models import DeliveryStatus, WebhookEventType

# --- Request ------------------------------------------------------------------------------------


class WebhookCreateSerializer(serializers.Serializer):
    url = HttpUrlField(
        max_length=URL_MAX_LENGTH,
        help_text="`https://` (`http://` only where private addresses are allowed); its host "
        "must resolve only to public addresses.",
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=WebhookEventType.choices),
        required=False,
        min_length=1,
        max_length=len(WebhookEventType.values),
        help_text="Default: every event type.",
    )


# --- Responses ----------------------------------------------------------------------------------


class WebhookSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.ChoiceField(choices=WebhookEventType.choices))
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(
        help_text="`whsec_` + base64 of 32 random bytes: the signing key of Standard Webhooks. "
        "Shown in this answer only."
    )


class WebhookListSerializer(serializers.Serializer):
    items = WebhookSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


class DeliverySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    eventId = serializers.UUIDField(  # noqa: N815
        source="event_id", help_text="The `webhook-id` header of every attempt."
    )
    type = serializers.ChoiceField(source="event_type", choices=WebhookEventType.choices)
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField()
    lastStatusCode = serializers.IntegerField(  # noqa: N815
        source="last_status_code", allow_null=True
    )
    lastError = serializers.CharField(source="last_error", allow_null=True)  # noqa: N815
    nextAttemptAt = serializers.DateTimeField(  # noqa: N815
        source="next_attempt_at", allow_null=True
    )
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815


class DeliveryListSerializer(serializers.Serializer):
    items = DeliverySerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )
