"""Request and response bodies of the onboarding routes (SPEC §11.2). The views render with the
response classes (and those of `provisioning.serializers`, which the `onboarding.completed`
event shares) and the OpenAPI document (the routes' declarations in api.onboardings) describes
the same classes: what is documented is what is rendered."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.brands import BrandFieldsSerializer
from api.fields import (
    ActivateMarketSerializer,
    BoundedListField,
    DeprecatedBooleanField,
    HttpUrlField,
)
from api.pagination import PageQuerySerializer, status_query
from api.responses import NEXT_CURSOR_HELP
from jobs.models import JobStatus
from provisioning.models import Onboarding, OnboardingStatus
from provisioning.serializers import OnboardingItemSerializer, OnboardingSummarySerializer

MAX_BRANDS = 1000

# --- Request ------------------------------------------------------------------------------------


# A brand's writable fields (api.brands; `baseUrl` required here), its name and its markets.
class OnboardingBrandSerializer(BrandFieldsSerializer):
    baseUrl = HttpUrlField(source="base_url", max_length=2000)  # noqa: N815
    markets = BoundedListField(
        child=ActivateMarketSerializer(),
        required=False,
        max_length=settings.SERENITY_MAX_ACTIVATE_MARKETS,
        help_text="0 to 50 distinct markets (`market` and `languageCode`).",
    )


class OnboardingCreateSerializer(serializers.Serializer):
    """Always asynchronous. A member the body does not have → 400 `invalidRequest` naming it;
    `async`, which an earlier release took, is accepted and ignored (SPEC §13.6)."""

    brands = BoundedListField(
        child=OnboardingBrandSerializer(), min_length=1, max_length=MAX_BRANDS
    )
    async_ = DeprecatedBooleanField(source="run_async")  # always asynchronous

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["async"] = self.fields.pop("async_")


class OnboardingListQuerySerializer(PageQuerySerializer):
    status = status_query(OnboardingStatus.choices, "Only onboardings in this status")


class OnboardingItemsQuerySerializer(PageQuerySerializer):
    status = status_query(
        JobStatus.choices, "Only items in this status (`counts` still cover every item)"
    )


# --- Responses ----------------------------------------------------------------------------------


class OnboardingAcceptedSerializer(serializers.Serializer):
    """202 of an onboarding create, from the onboarding just accepted."""

    onboardingId = serializers.UUIDField(source="id")  # noqa: N815
    status = serializers.SerializerMethodField()
    total = serializers.IntegerField()

    @extend_schema_field(serializers.ChoiceField(choices=[JobStatus.IN_PROGRESS]))
    def get_status(self, onboarding: Onboarding) -> str:
        return JobStatus.IN_PROGRESS


class OnboardingSerializer(OnboardingSummarySerializer):
    """An onboarding with one page of its items (`provisioning.selectors.OnboardingDocument`)."""

    items = OnboardingItemSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


class OnboardingListSerializer(serializers.Serializer):
    items = OnboardingSummarySerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )
