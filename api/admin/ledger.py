"""Admin for the ledger of upstream writes (SPEC §13.4): read-only, newest first; search by a
Semrush workspace or project id answers "which call made this project, in which job" (the
job links to its chain)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from provisioning.ledger.models import UpstreamCall

FIELDS: tuple[str, ...] = (
    "id",
    "at",
    "operation",
    "method",
    "status_code",
    "duration_ms",
    "organization_id",
    "brand_id",
    "job_link",
    "step_job_id",
    "attempt_id",
    "workspace_id",
    "project_id",
    "request_id",
)


@admin.register(UpstreamCall)
class UpstreamCallAdmin(admin.ModelAdmin):
    list_display = [
        "at",
        "operation",
        "status_code",
        "duration_ms",
        "workspace_id",
        "project_id",
        "job_link",
        "brand_id",
        "request_id",
    ]
    list_filter = ["operation", "status_code"]
    # Exact matches only: every one is an index or the primary key.
    search_fields = ["=workspace_id", "=project_id", "=job_id", "=request_id", "=brand_id"]
    search_help_text = (
        "A Semrush workspace or project id (which call made it, in which job), a job id, a "
        "brand id or an X-Request-Id."
    )
    date_hierarchy = "at"
    ordering = ["-at", "-id"]
    fields = FIELDS
    readonly_fields = FIELDS
    show_full_result_count = False

    @admin.display(description="job (chain)", ordering="job_id")
    def job_link(self, obj: UpstreamCall) -> SafeString | str:
        if obj.job_id is None:
            return "—"
        url = reverse("admin:jobs_asyncjob_change", args=[obj.job_id])
        return format_html('<a href="{}">{}</a>', url, obj.job_id)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
