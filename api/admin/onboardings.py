"""The admin of bulk onboardings (SPEC §11.2): their counts and a progress bar, their items
linked to brands and chains, and a Cancel action (the cancel route's service, recorded in the
admin log). Registered from `provisioning.admin`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from kernel import context
from provisioning import selectors
from provisioning.flows.onboarding_cancel import onboarding_cancel
from provisioning.models import Onboarding, OnboardingItem, OnboardingStatus


def _link(url_name: str, pk: Any, label: str) -> SafeString | str:
    if pk is None:
        return "—"
    return format_html('<a href="{}">{}</a>', reverse(url_name, args=[pk]), label)


class OnboardingItemInline(admin.TabularInline):
    model = OnboardingItem
    extra = 0
    can_delete = False
    # The brand once: its name, linked to its page when the item has one.
    fields = ("index", "brand_link", "chain_link", "item_status")
    readonly_fields = ("index", "brand_link", "chain_link", "item_status")
    ordering = ["index"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[OnboardingItem]:
        return super().get_queryset(request).select_related("job", "job__current")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="brand")
    def brand_link(self, obj: OnboardingItem) -> SafeString | str:
        if obj.brand_id is None:
            return obj.name  # refused at accept: no brand was created
        return _link("admin:serenity_brand_change", obj.brand_id, obj.name)

    @admin.display(description="chain")
    def chain_link(self, obj: OnboardingItem) -> SafeString | str:
        return _link("admin:jobs_asyncjob_change", obj.job_id, str(obj.job_id))

    @admin.display(description="status")
    def item_status(self, obj: OnboardingItem) -> str:
        if obj.job is None:
            return f"FAILED ({(obj.error or {}).get('code', '')})"
        effective = obj.job.current or obj.job
        code = (effective.error or {}).get("code") if effective.error else None
        return f"{effective.status} ({code})" if code else str(effective.status)


@admin.register(Onboarding)
class OnboardingAdmin(admin.ModelAdmin):
    list_display = ["id", "organization", "total", "progress", "status", "created_at"]
    list_select_related = ["organization"]
    search_fields = ["=id", "organization__name", "=organization__id"]
    date_hierarchy = "created_at"
    inlines = [OnboardingItemInline]
    actions = ["cancel_onboardings"]
    fields = (
        "id",
        "organization",
        "status",
        "progress",
        "counts",
        "total",
        "started_by_actor",
        "started_request_id",
        "max_failed_items",
        "retry_of",
        "cancelled_by",
        "cancelled_at",
        "completed_at",
        "created_at",
        "updated_at",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [str(name) for name in self.fields or ()]

    @admin.display(description="status")
    def status(self, obj: Onboarding) -> str:
        return selectors.onboarding_status(obj, selectors.onboarding_counts(obj))

    @admin.display(description="counts")
    def counts(self, obj: Onboarding) -> str:
        c = selectors.onboarding_counts(obj)
        return (
            f"{c.completed} completed, {c.failed} failed, {c.cancelled} cancelled, "
            f"{c.in_progress} in progress"
        )

    @admin.display(description="progress")
    def progress(self, obj: Onboarding) -> SafeString:
        """Ended items out of all, as a bar (completed green, failed red, cancelled grey)."""
        c = selectors.onboarding_counts(obj)
        total = max(obj.total, 1)
        parts = [
            ("#3a9a5b", c.completed, "completed"),
            ("#c0392b", c.failed, "failed"),
            ("#95a5a6", c.cancelled, "cancelled"),
        ]
        segments = format_html_join(
            "",
            '<span title="{} {}" style="display:inline-block;height:12px;width:{}%;'
            'background:{}"></span>',
            ((n, label, f"{100 * n / total:.2f}", color) for color, n, label in parts if n),
        )
        return format_html(
            '<div class="onboarding-progress" style="width:180px;background:#e8e8e8;'
            "border-radius:3px;overflow:hidden;display:inline-block;vertical-align:middle;"
            'white-space:nowrap;font-size:0">{}</div> <span>{} / {}</span>',
            segments,
            c.finished,
            obj.total,
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("provisioning.change_onboarding")

    @admin.action(description="Cancel onboarding", permissions=["cancel"])
    def cancel_onboardings(self, request: HttpRequest, queryset: QuerySet[Onboarding]) -> None:
        cancelled = 0
        with context.scope(actor=context.admin_actor(request.user.get_username())):
            for onboarding in queryset:
                if self.status(onboarding) != OnboardingStatus.IN_PROGRESS:
                    continue
                onboarding_cancel(onboarding=onboarding)
                cancelled += 1
                self.log_change(request, onboarding, "Cancelled the onboarding's open items.")
        self.message_user(request, f"Cancelled {cancelled} onboarding(s).", messages.SUCCESS)
