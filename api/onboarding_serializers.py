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
from kernel.errors import InvalidRequestError
from provisioning.flows.common import MarketPlan
from provisioning.flows.onboarding import OnboardingBrand
from provisioning.models import Onboarding, OnboardingStatus
from provisioning.serializers import OnboardingItemSerializer, OnboardingSummarySerializer
from serenity.slices import slice_parse

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


# The largest failure threshold: the column's range (PostgreSQL `integer`); past it a 400, not
# the database's refusal.
MAX_FAILED_ITEMS_LIMIT = 2**31 - 1


class OnboardingCreateSerializer(serializers.Serializer):
    """Always asynchronous. A member the body does not have → 400 `invalidRequest` naming it;
    `async`, which an earlier release took, is accepted and ignored (SPEC §13.6)."""

    brands = BoundedListField(
        child=OnboardingBrandSerializer(), min_length=1, max_length=MAX_BRANDS
    )
    async_ = DeprecatedBooleanField(source="run_async")  # always asynchronous
    maxFailedItems = serializers.IntegerField(  # noqa: N815
        min_value=1,
        max_value=MAX_FAILED_ITEMS_LIMIT,
        required=False,
        allow_null=True,
        help_text="Once this many items failed, the onboarding is cancelled (`cancelledBy`: "
        "`failureThreshold`): its items that have not ended are cancelled, and a redrive takes "
        "them. Absent or null: no threshold.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["async"] = self.fields.pop("async_")


class OnboardingCreateQuerySerializer(serializers.Serializer):
    maxFailedItems = serializers.IntegerField(  # noqa: N815
        min_value=1,
        max_value=MAX_FAILED_ITEMS_LIMIT,
        required=False,
        help_text="A CSV onboarding's failure threshold (a JSON body says `maxFailedItems` "
        "itself, which wins).",
    )


class OnboardingRetrySerializer(serializers.Serializer):
    """A redrive's body: optional (an empty body is `{}`)."""

    maxFailedItems = serializers.IntegerField(  # noqa: N815
        min_value=1,
        max_value=MAX_FAILED_ITEMS_LIMIT,
        required=False,
        allow_null=True,
        help_text="The redrive's failure threshold; absent: the original's; null: none.",
    )


class OnboardingListQuerySerializer(PageQuerySerializer):
    status = status_query(OnboardingStatus.choices, "Only onboardings in this status")


class OnboardingItemsQuerySerializer(PageQuerySerializer):
    status = status_query(
        JobStatus.choices, "Only items in this status (`counts` still cover every item)"
    )


def brands_input(brands: list[dict[str, Any]]) -> list[OnboardingBrand]:
    """The validated items with their markets parsed (400 naming `brands[i].markets[j].…`;
    a repeated market within an item names `brands[i].markets`)."""
    parsed = []
    for i, brand in enumerate(brands):
        plans = []
        seen: set[tuple[int, str]] = set()
        for j, market in enumerate(brand.get("markets") or []):
            slice_ = slice_parse(
                market=market["market"],
                language_code=market["languageCode"],
                prefix=f"brands[{i}].markets[{j}].",
            )
            key = (slice_.geo_target_id, slice_.language_code)
            if key in seen:
                raise InvalidRequestError(
                    f"brands[{i}].markets: {market['market']}/"
                    f"{slice_.language_code} is listed twice.",
                    details={"field": f"brands[{i}].markets"},
                )
            seen.add(key)
            plans.append(MarketPlan(slice=slice_, name=market.get("name")))
        # The brand's fields by the model's names (api.brands.BrandFieldsSerializer).
        parsed.append(OnboardingBrand(**{**brand, "markets": plans}))
    return parsed


# --- Responses ----------------------------------------------------------------------------------


class OnboardingAcceptedSerializer(serializers.Serializer):
    """202 of an onboarding create, from the onboarding just accepted."""

    onboardingId = serializers.UUIDField(source="id")  # noqa: N815
    status = serializers.SerializerMethodField()
    total = serializers.IntegerField()

    retryOf = serializers.UUIDField(  # noqa: N815
        source="retry_of_id",
        allow_null=True,
        help_text="The onboarding this one redrives; null for an onboarding of its own.",
    )

    @extend_schema_field(serializers.ChoiceField(choices=[JobStatus.IN_PROGRESS]))
    def get_status(self, onboarding: Onboarding) -> str:
        return JobStatus.IN_PROGRESS


class OnboardingSerializer(OnboardingSummarySerializer):
    """An onboarding with one page of its items (`provisioning.selectors.OnboardingDocument`)."""

    items = OnboardingItemSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


class OnboardingItemsPageSerializer(serializers.Serializer):
    """A page of an onboarding's items (`GET …/onboardings/{id}/items`, JSON)."""

    items = OnboardingItemSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


class OnboardingListSerializer(serializers.Serializer):
    items = OnboardingSummarySerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )
