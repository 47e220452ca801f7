"""`?limit=` and `?cursor=` of the brand, market and job lists (SPEC §10.3)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.request import Request


class PageQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(
        min_value=1,
        max_value=settings.SERENITY_PAGE_SIZE_MAX,
        default=settings.SERENITY_PAGE_SIZE_DEFAULT,
        help_text="Page size; out of range → 400 `invalidRequest`.",
    )
    cursor = serializers.CharField(
        required=False,
        max_length=1000,
        help_text="The `nextCursor` of the previous page (opaque); a cursor of another list "
        "or a forged one → 400 `invalidRequest`.",
    )


def status_query(choices: Any, description: str) -> serializers.ChoiceField:
    """A list's `?status=` filter."""
    return serializers.ChoiceField(
        choices=choices,
        required=False,
        help_text=f"{description}; an unknown status → 400 `invalidRequest`.",
    )


def query_parse(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The validated query string (400 `invalidRequest` otherwise)."""
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    data = dict(query.validated_data)
    data.setdefault("cursor", None)
    return data
