"""Request and response bodies of the webhook routes (SPEC §11.3, §12.2), and the events
an endpoint receives. The views render with the response classes and the OpenAPI document
(the routes' declarations in api.webhooks) describes the same classes: what is documented is
what is rendered. The events' `data` are rendered by the classes of `provisioning.serializers` (the
API's own job and onboarding documents); the event classes here document the envelope
`{type, timestamp, data}` that `webhooks.services` wraps around them, one per event type, and
tests/api/test_answers_conform.py checks every event actually sent against them."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from api.fields import BoundedListField, StrictBooleanField, WebhookUrlField
from api.pagination import PageQuerySerializer, status_query
from api.responses import NEXT_CURSOR_HELP
from provisioning.serializers import (
    JobSummarySerializer,
    OnboardingSummarySerializer,
    OpenCodeField,
)
from webhooks.addresses import URL_MAX_LENGTH
from webhooks.models import SUBSCRIBABLE_EVENT_TYPES, DeliveryStatus, WebhookEventType

DESCRIPTION_MAX_LENGTH = 500

# --- Request ------------------------------------------------------------------------------------


def _url_field(*, required: bool = True) -> WebhookUrlField:
    return WebhookUrlField(
        max_length=URL_MAX_LENGTH,
        required=required,
        help_text="`https://` (`http://` only where private addresses are allowed); its host "
        "must resolve only to public addresses.",
    )


class SubscribableEventField(OpenCodeField):
    """An event type an endpoint subscribes to: documented as every event type (one open
    schema, `WebhookEventType`), accepting those of today but `webhook.test`, which is sent on
    request only."""

    default_error_messages = {"unsubscribable": "webhook.test is sent on request only."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            known=WebhookEventType.values,
            schema_name="WebhookEventType",
            known_only=True,
            help_text="Any event type but `webhook.test`",
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if value not in SUBSCRIBABLE_EVENT_TYPES:
            self.fail("unsubscribable")
        return value


def _events_field() -> serializers.ListField:
    return BoundedListField(
        child=SubscribableEventField(),
        required=False,
        min_length=1,
        max_length=len(SUBSCRIBABLE_EVENT_TYPES),
        help_text="Default: every event type (`webhook.test` is sent on request only).",
    )


def _description_field() -> serializers.CharField:
    return serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=DESCRIPTION_MAX_LENGTH,
        help_text="Free text for the organization's own use.",
    )


class WebhookCreateSerializer(serializers.Serializer):
    url = _url_field()
    events = _events_field()
    description = _description_field()


class WebhookUpdateSerializer(serializers.Serializer):
    """PATCH: only the members given change."""

    url = _url_field(required=False)
    events = _events_field()
    enabled = StrictBooleanField(
        required=False, help_text="A disabled endpoint gets no new deliveries."
    )
    description = _description_field()


class DeliveryListQuerySerializer(PageQuerySerializer):
    status = status_query(DeliveryStatus.choices, "Only deliveries in this status")


# --- Responses ----------------------------------------------------------------------------------


class WebhookSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    events = serializers.ListField(
        child=OpenCodeField(known=WebhookEventType.values, schema_name="WebhookEventType"),
        help_text="Every event type but `webhook.test` (sent on request only), unless chosen.",
    )
    enabled = serializers.BooleanField(help_text="A disabled endpoint gets no new deliveries.")
    disabledReason = serializers.CharField(  # noqa: N815
        source="disabled_reason",
        allow_null=True,
        help_text="Why the service disabled the endpoint (every attempt failed for 24 h); null "
        "when it did not. Enabling the endpoint again clears it.",
    )
    description = serializers.CharField(allow_blank=True)
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
    type = OpenCodeField(
        source="event_type", known=WebhookEventType.values, schema_name="WebhookEventType"
    )
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField(help_text="How many attempts were made.")
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


class AttemptSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the attempt began.")
    statusCode = serializers.IntegerField(  # noqa: N815
        source="status_code", allow_null=True, help_text="The receiver's status; null: none."
    )
    error = serializers.CharField(
        allow_null=True, help_text="`timeout`, `connection failed` or `answered <status>`."
    )
    durationMs = serializers.IntegerField(source="duration_ms")  # noqa: N815


class AttemptListSerializer(serializers.Serializer):
    items = AttemptSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


# --- Events (the body of each delivery: the callbacks of a webhook create) ---------------------


class WebhookTestDataSerializer(serializers.Serializer):
    webhookId = serializers.UUIDField(help_text="The endpoint this test was sent to.")  # noqa: N815


class _EventSerializer(serializers.Serializer):
    timestamp = serializers.DateTimeField(help_text="When the event happened.")


class JobCompletedEventSerializer(_EventSerializer):
    type = serializers.ChoiceField(choices=[WebhookEventType.JOB_COMPLETED.value])
    data = JobSummarySerializer()  # type: ignore[assignment]  # a field (DRF's metaclass takes it)


class JobFailedEventSerializer(_EventSerializer):
    type = serializers.ChoiceField(choices=[WebhookEventType.JOB_FAILED.value])
    data = JobSummarySerializer()  # type: ignore[assignment]  # a field (DRF's metaclass takes it)


class JobCancelledEventSerializer(_EventSerializer):
    type = serializers.ChoiceField(choices=[WebhookEventType.JOB_CANCELLED.value])
    data = JobSummarySerializer()  # type: ignore[assignment]  # a field (DRF's metaclass takes it)


class OnboardingCompletedEventSerializer(_EventSerializer):
    type = serializers.ChoiceField(choices=[WebhookEventType.ONBOARDING_COMPLETED.value])
    data = OnboardingSummarySerializer()  # type: ignore[assignment]  # a field (DRF's metaclass takes it)


class OnboardingCancelledEventSerializer(_EventSerializer):
    type = serializers.ChoiceField(choices=[WebhookEventType.ONBOARDING_CANCELLED.value])
    data = OnboardingSummarySerializer()  # type: ignore[assignment]  # a field (DRF's metaclass takes it)


class WebhookTestEventSerializer(_EventSerializer):
    type = serializers.ChoiceField(choices=[WebhookEventType.WEBHOOK_TEST.value])
    data = WebhookTestDataSerializer()  # type: ignore[assignment]  # a field (DRF's metaclass takes it)


class CredentialRefusedDataSerializer(serializers.Serializer):
    source = serializers.ChoiceField(choices=["org", "service"])  # type: ignore[assignment]
    status = serializers.ChoiceField(choices=["refused"])
    refusedAt = serializers.DateTimeField()  # noqa: N815


class CredentialRefusedEventSerializer(_EventSerializer):
    """Semrush refuses the org's credential after accepting it before (once per refusal): the
    work that needs it waits until it is accepted again (`GET O/serenity` shows its state)."""

    type = serializers.ChoiceField(choices=[WebhookEventType.CREDENTIAL_REFUSED.value])
    data = CredentialRefusedDataSerializer()  # type: ignore[assignment]  # a field (DRF's metaclass takes it)


EVENT_SERIALIZERS: dict[str, type[serializers.Serializer]] = {
    WebhookEventType.JOB_COMPLETED.value: JobCompletedEventSerializer,
    WebhookEventType.JOB_FAILED.value: JobFailedEventSerializer,
    WebhookEventType.JOB_CANCELLED.value: JobCancelledEventSerializer,
    WebhookEventType.ONBOARDING_COMPLETED.value: OnboardingCompletedEventSerializer,
    WebhookEventType.ONBOARDING_CANCELLED.value: OnboardingCancelledEventSerializer,
    WebhookEventType.WEBHOOK_TEST.value: WebhookTestEventSerializer,
    WebhookEventType.CREDENTIAL_REFUSED.value: CredentialRefusedEventSerializer,
}
