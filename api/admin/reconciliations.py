"""The admin of drift (SPEC §13.1): reconciliations with their items, and the brands' and
markets' current drift, listed and filtered, with an action that repairs the selected brands
(a reconciliation of those brands with `repair`, as the API begins one, recorded in the admin
log)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from kernel import context
from kernel.errors import DomainError
from provisioning.reconcile.models import Drift, Reconciliation, ReconciliationItem
from provisioning.reconcile.services import reconciliation_begin
from serenity.models import Organization


def _link(url_name: str, pk: Any, label: str) -> SafeString | str:
    if pk is None:
        return "—"
    return format_html('<a href="{}">{}</a>', reverse(url_name, args=[pk]), label)


class _ReadOnly:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReconciliationItemInline(_ReadOnly, admin.TabularInline):
    model = ReconciliationItem
    extra = 0
    fields = readonly_fields = (
        "brand_link",
        "market",
        "project_id",
        "kind",
        "action",
        "planned_calls",
        "status",
        "error",
        "job_link",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReconciliationItem]:
        return super().get_queryset(request).select_related("brand", "market")

    @admin.display(description="brand")
    def brand_link(self, obj: ReconciliationItem) -> SafeString | str:
        return _link("admin:serenity_brand_change", obj.brand_id, obj.brand.name)

    @admin.display(description="repair job")
    def job_link(self, obj: ReconciliationItem) -> SafeString | str:
        return _link("admin:jobs_asyncjob_change", obj.job_id, str(obj.job_id))


@admin.register(Reconciliation)
class ReconciliationAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = [
        "id",
        "organization",
        "status",
        "repair",
        "swept",
        "checked",
        "drifted",
        "repaired",
        "failed",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "repair", "swept"]
    list_select_related = ["organization"]
    search_fields = ["=id", "organization__name", "=organization__id"]
    date_hierarchy = "created_at"
    inlines = [ReconciliationItemInline]
    fields = readonly_fields = (
        "id",
        "organization",
        "status",
        "repair",
        "swept",
        "brand_ids",
        "checked",
        "drifted",
        "repaired",
        "failed",
        "error",
        "started_by_actor",
        "started_request_id",
        "created_at",
        "updated_at",
        "finished_at",
    )


@admin.register(Drift)
class DriftAdmin(_ReadOnly, admin.ModelAdmin):
    """Every brand's and market's current drift; "Repair" begins a repairing reconciliation
    of the selected rows' brands (one per org)."""

    list_display = ["brand_link", "organization", "market", "kind", "detected_at"]
    list_filter = ["kind", ("market", admin.EmptyFieldListFilter)]
    list_select_related = ["brand__organization", "market"]
    search_fields = ["brand__name", "=brand__id", "=brand__organization__id"]
    date_hierarchy = "detected_at"
    actions = ["repair_brands"]

    @admin.display(description="brand")
    def brand_link(self, obj: Drift) -> SafeString | str:
        return _link("admin:serenity_brand_change", obj.brand_id, obj.brand.name)

    @admin.display(description="organization")
    def organization(self, obj: Drift) -> Organization:
        return obj.brand.organization

    def has_repair_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("reconcile.add_reconciliation")

    @admin.action(description="Repair the selected brands", permissions=["repair"])
    def repair_brands(self, request: HttpRequest, queryset: QuerySet[Drift]) -> None:
        brands: dict[Organization, set[Any]] = defaultdict(set)
        for drift in queryset.select_related("brand__organization"):
            brands[drift.brand.organization].add(drift.brand_id)
        begun = 0
        with context.scope(actor=context.admin_actor(request.user.get_username())):
            for organization, brand_ids in brands.items():
                try:
                    reconciliation = reconciliation_begin(
                        organization=organization, brand_ids=sorted(brand_ids), repair=True
                    )
                except DomainError as error:
                    self.message_user(
                        request, f"{organization.name}: {error.message}", messages.WARNING
                    )
                    continue
                begun += 1
                self.log_addition(request, reconciliation, f"Repair of {len(brand_ids)} brand(s).")
        self.message_user(request, f"Began {begun} repairing reconciliation(s).", messages.SUCCESS)
