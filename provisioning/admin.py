"""Admin for provisioning attempts: read-only history, filters by status/reason/age, and an
action that cancels an attempt through `provisioning.services.attempt_cancel` (SPEC §8)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from provisioning.models import AttemptStatus, ProvisioningAttempt


def _stale_cutoff() -> Any:
    return timezone.now() - timedelta(seconds=settings.SERENITY_PROVISIONING_STALE_AFTER_SECONDS)


class AttemptAgeFilter(admin.SimpleListFilter):
    """Pending attempts by their staleness clock (`updated_at`) against the stale threshold."""

    title = "age"
    parameter_name = "age"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("stale", "pending > stale threshold"),
            ("fresh", "pending ≤ stale threshold"),
        ]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[ProvisioningAttempt]
    ) -> QuerySet[ProvisioningAttempt]:
        pending = queryset.filter(status=AttemptStatus.PENDING)
        if self.value() == "stale":
            return pending.filter(updated_at__lt=_stale_cutoff())
        if self.value() == "fresh":
            return pending.filter(updated_at__gte=_stale_cutoff())
        return queryset


@admin.register(ProvisioningAttempt)
class ProvisioningAttemptAdmin(admin.ModelAdmin):
    """Attempts are history written only by the provisioning services; operators read them and
    may cancel a pending one."""

    list_display = [
        "id",
        "brand",
        "status",
        "reason",
        "started_by",
        "candidate_workspace_id",
        "freshly_created",
        "workspace_promoted",
        "job",
        "age",
        "created_at",
        "updated_at",
    ]
    list_filter = ["status", "reason", "started_by", AttemptAgeFilter]
    search_fields = ["=id", "=brand__id", "brand__name", "=candidate_workspace_id", "=job__id"]
    list_select_related = ["brand", "job"]
    date_hierarchy = "created_at"
    actions = ["cancel_attempts"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in ProvisioningAttempt._meta.fields] + ["age"]

    @admin.display(description="age")
    def age(self, obj: ProvisioningAttempt) -> str:
        seconds = int((timezone.now() - obj.updated_at).total_seconds())
        return str(timedelta(seconds=max(seconds, 0)))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("provisioning.change_provisioningattempt")

    @admin.action(description="Cancel attempt", permissions=["cancel"])
    def cancel_attempts(
        self, request: HttpRequest, queryset: QuerySet[ProvisioningAttempt]
    ) -> None:
        from provisioning.services import attempt_cancel

        pending_ids = list(
            queryset.filter(status=AttemptStatus.PENDING).values_list("id", flat=True)
        )
        cancelled = sum(bool(attempt_cancel(attempt_id=attempt_id)) for attempt_id in pending_ids)
        skipped = queryset.count() - cancelled
        self.message_user(request, f"Cancelled {cancelled} attempt(s).", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"{skipped} attempt(s) were not pending (or finished meanwhile) and were left as "
                "they are.",
                messages.WARNING,
            )
