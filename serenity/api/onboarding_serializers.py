"""Request and response bodies of the onboarding routes (SPEC §11.2). The views render with the
response classes and the OpenAPI document (serenity.api.schemas.onboardings) describes the same
classes: what is documented is what is rendered."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from jobs.models import JobStatus
from provisioning.models import OnboardingStatus
from serenity.api.fields import BodyObjectSerializer, BrandNameField, HttpUrlField
from serenity.api.serializers import ActivateMarketSerializer, BrandCreateSerializer

MAX_BRANDS = 1000
NEXT_CURSOR_HELP = "Pass as `?cursor=` for the next page; null on the last page."
STATUSES = OnboardingStatus.choices

# --- Request ------------------------------------------------------------------------------------


class OnboardingBrandSerializer(serializers.Serializer):
    name = BrandNameField(max_length=200)
    baseUrl = HttpUrlField(max_length=2000)  # noqa: N815
    urls = serializers.ListField(
        child=HttpUrlField(max_length=2000), required=False, max_length=100
    )
    aliases = serializers.ListField(
        child=BrandNameField(max_length=200), required=False, max_length=100
    )
    markets = serializers.ListField(
        child=ActivateMarketSerializer(),
        required=False,
        max_length=settings.SERENITY_MAX_ACTIVATE_MARKETS,
        help_text="0 to 50 distinct markets (`market` and `languageCode`).",
    )

    def validate_name(self, value: str) -> str:
        return BrandCreateSerializer().validate_name(value)


class OnboardingCreateSerializer(BodyObjectSerializer):
    """Always asynchronous: no `async` field."""

    brands = serializers.ListField(
        child=OnboardingBrandSerializer(), min_length=1, max_length=MAX_BRANDS
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict) and "async" in data:
            data = {k: v for k, v in data.items() if k != "async"}
        return super().to_internal_value(data)


# --- Responses ----------------------------------------------------------------------------------


class OnboardingAcceptedSerializer(serializers.Serializer):
    onboardingId = serializers.UUIDField(source="id")  # noqa: N815
    status = serializers.ChoiceField(choices=[JobStatus.IN_PROGRESS])
    total = serializers.IntegerField()


class OnboardingCountsSerializer(serializers.Serializer):
    inProgress = serializers.IntegerField()  # noqa: N815
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()


class OnboardingItemErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    retryable = serializers.BooleanField()


class OnboardingItemResultSerializer(serializers.Serializer):
    status = serializers.IntegerField(help_text="The sync path's HTTP status.")
    body = serializers.DictField(help_text="The sync path's answer.")
    outcome = serializers.ChoiceField(choices=["succeeded", "partial", "failed"])


class OnboardingItemSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The item's position in `brands`, from 0.")
    name = serializers.CharField()
    brandId = serializers.UUIDField(allow_null=True)  # noqa: N815
    jobId = serializers.UUIDField(allow_null=True)  # noqa: N815
    status = serializers.ChoiceField(choices=JobStatus.choices)
    result = OnboardingItemResultSerializer(allow_null=True)
    error = OnboardingItemErrorSerializer(allow_null=True)


class OnboardingSummarySerializer(serializers.Serializer):
    onboardingId = serializers.UUIDField()  # noqa: N815
    status = serializers.ChoiceField(choices=STATUSES)
    total = serializers.IntegerField()
    counts = OnboardingCountsSerializer()
    createdAt = serializers.DateTimeField()  # noqa: N815
    updatedAt = serializers.DateTimeField()  # noqa: N815


class OnboardingSerializer(OnboardingSummarySerializer):
    items = OnboardingItemSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True, help_text=NEXT_CURSOR_HELP)  # noqa: N815


class OnboardingListSerializer(serializers.Serializer):
    items = OnboardingSummarySerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True, help_text=NEXT_CURSOR_HELP)  # noqa: N815
