"""Admin for markets and prompts (SPEC §8): read-only, since the provisioning services and the
API write them."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from serenity.models import Market, Prompt


@admin.register(Market)
class MarketAdmin(admin.ModelAdmin):
    """Read-only: markets are reserved, created and tombstoned by the provisioning services."""

    list_display = [
        "brand",
        "geo_target_id",
        "language_code",
        "name",
        "status",
        "semrush_project_id",
        "deleted_at",
        "updated_at",
    ]
    list_filter = ["status", ("deleted_at", admin.EmptyFieldListFilter)]
    search_fields = ["=id", "brand__name", "=brand__id", "=semrush_project_id"]
    list_select_related = ["brand"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Prompt)
class PromptAdmin(admin.ModelAdmin):
    """Read-only: prompts are added through the API."""

    list_display = ["text", "market", "intent", "language_code", "created_at"]
    list_filter = ["intent", "language_code"]
    search_fields = ["text", "=market__id", "=semrush_prompt_id"]
    list_select_related = ["market", "market__brand"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
