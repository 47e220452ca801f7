"""Request bodies of the market, activation and prompt routes (the brand routes' are beside their
views: api.brands). Serializers validate shape only; domain rules live in services."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from api.fields import (
    BodyObjectSerializer,
    BrandNameField,
    HostField,
    LanguageCodeField,
    MarketField,
    StrictCharField,
)


def _brand_names_field() -> serializers.ListField:
    return serializers.ListField(
        child=BrandNameField(max_length=200),
        required=False,
        allow_empty=False,
        min_length=1,
        max_length=50,
    )


class MarketCreateSerializer(BodyObjectSerializer):
    market = MarketField()
    languageCode = LanguageCodeField()  # noqa: N815
    name = StrictCharField(required=False, max_length=200)
    brandNames = _brand_names_field()  # noqa: N815
    brandDomain = HostField(required=False, max_length=253)  # noqa: N815

    def validate_brandNames(self, value: list[str]) -> list[str]:  # noqa: N802
        if any(not v.strip() for v in value):
            raise serializers.ValidationError("must be non-empty strings.")
        return [v.strip() for v in value]


class ActivateMarketSerializer(serializers.Serializer):
    market = MarketField()
    languageCode = LanguageCodeField()  # noqa: N815
    name = StrictCharField(required=False, max_length=200)


class ActivateSerializer(BodyObjectSerializer):
    brandDomain = HostField(required=False, max_length=253)  # noqa: N815
    brandNames = _brand_names_field()  # noqa: N815
    markets = serializers.ListField(
        child=ActivateMarketSerializer(),
        required=False,
        allow_empty=False,
        min_length=1,
        max_length=settings.SERENITY_MAX_ACTIVATE_MARKETS,
        error_messages={"max_length": "at most {max_length} markets per request."},
    )


class PromptItemSerializer(serializers.Serializer):
    text = StrictCharField(max_length=2000)
    geoTargetId = serializers.IntegerField(min_value=1)  # noqa: N815
    languageCode = LanguageCodeField()  # noqa: N815
    tags = serializers.ListField(
        child=StrictCharField(max_length=100), required=False, max_length=50
    )

    def validate_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank.")
        return value


class PromptsSerializer(BodyObjectSerializer):
    prompts = serializers.ListField(
        child=PromptItemSerializer(),
        allow_empty=False,
        min_length=1,
        max_length=settings.SERENITY_MAX_PROMPTS,
        error_messages={"max_length": "at most {max_length} prompts per request."},
    )

    def to_internal_value(self, data: Any) -> Any:
        # Name an item's field `prompts[3].text`, as the service names its own checks, not
        # DRF's `prompts.3.text`.
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail = exc.detail
            items = detail.get("prompts") if isinstance(detail, dict) else None
            if isinstance(detail, dict) and isinstance(items, dict):
                rest = {k: v for k, v in detail.items() if k != "prompts"}
                indexed = {f"prompts[{index}]": error for index, error in items.items()}
                raise serializers.ValidationError({**indexed, **rest}) from None
            raise
