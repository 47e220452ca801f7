"""Admin for provisioning attempts: read-only history with its timeline and who started and
cancelled each one, filters by status/reason/age, and an action that cancels an attempt through
`provisioning.services.attempt_cancel`, recorded in the admin log (SPEC §8, §10.4).

The jobs admin is registered here too: `api.admin.jobs.AsyncJobAdmin` plus the brand's name, which
`jobs` (it imports nothing of ours) cannot look up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from api.admin.jobs import AsyncJobAdmin
from jobs.models import AsyncJob
from kernel import context
from provisioning.models import AttemptStatus, ProvisioningAttempt
from provisioning.services import attempt_cancel, attempts_stale
from serenity.models import Brand


@admin.register(AsyncJob)
class ChainAdmin(AsyncJobAdmin):
    """Chains with their brand's name (a column, and searchable)."""

    list_display = [*AsyncJobAdmin.list_display[:5], "brand_name", *AsyncJobAdmin.list_display[5:]]
    search_fields = [*AsyncJobAdmin.search_fields, "brand_name"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AsyncJob]:
        names = Brand.objects.filter(pk=OuterRef("brand_id")).values("name")[:1]
        return super().get_queryset(request).annotate(brand_name=Subquery(names))

    @admin.display(description="brand", ordering="brand_name")
    def brand_name(self, obj: AsyncJob) -> str:
        return getattr(obj, "brand_name", None) or "—"


class AttemptAgeFilter(admin.SimpleListFilter):
    """Pending attempts by the staleness rule (`services.attempts_stale`, SPEC §11.1)."""

    title = "age"
    parameter_name = "age"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("stale", "pending, stale (nothing drives it)"),
            ("fresh", "pending, live"),
        ]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[ProvisioningAttempt]
    ) -> QuerySet[ProvisioningAttempt]:
        pending = queryset.filter(status=AttemptStatus.PENDING)
        stale = attempts_stale().values("pk")
        if self.value() == "stale":
            return pending.filter(pk__in=stale)
        if self.value() == "fresh":
            return pending.exclude(pk__in=stale)
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
        "started_by_actor",
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
    # The job column names the chain with its effective status (AsyncJob.__str__).
    list_select_related = ["brand", "job", "job__current"]
    date_hierarchy = "created_at"
    actions = ["cancel_attempts"]

    fieldsets = [
        (None, {"fields": ["id", "brand", "status", "reason", "error", "job", "age"]}),
        ("Timeline", {"fields": ["timeline"]}),
        (
            "Who",
            {
                "fields": [
                    "started_by",
                    "started_by_actor",
                    "started_request_id",
                    "cancelled_by_actor",
                    "cancelled_request_id",
                ]
            },
        ),
        (
            "Workspace",
            {
                "fields": [
                    "candidate_workspace_id",
                    "freshly_created",
                    "workspace_promoted",
                    "cleanup_done",
                    "created_at",
                    "candidate_at",
                    "promoted_at",
                    "finished_at",
                    "updated_at",
                ]
            },
        ),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in ProvisioningAttempt._meta.fields] + ["age", "timeline"]

    @admin.display(description="timeline")
    def timeline(self, obj: ProvisioningAttempt) -> SafeString:
        finished = f"finished ({obj.status}{f', {obj.reason}' if obj.reason else ''})"
        events = [
            ("began", obj.created_at, f"{obj.started_by} by {obj.started_by_actor or '—'}"),
            ("candidate", obj.candidate_at, obj.candidate_workspace_id or ""),
            ("promoted", obj.promoted_at, ""),
            (finished, obj.finished_at, obj.error or ""),
        ]
        if obj.cancelled_by_actor or obj.cancelled_request_id:
            events.append(
                (
                    "cancelled by",
                    obj.finished_at,
                    f"{obj.cancelled_by_actor or '—'} (request {obj.cancelled_request_id or '—'})",
                )
            )
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td>{}</td><td>{}</td></tr>",
            ((label, at.isoformat() if at else "—", note) for label, at, note in events),
        )
        return format_html("<table class='attempt-timeline'><tbody>{}</tbody></table>", rows)

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
        pending = list(queryset.filter(status=AttemptStatus.PENDING))
        cancelled = 0
        with context.scope(actor=context.admin_actor(request.user.get_username())):
            for attempt in pending:
                if attempt_cancel(attempt_id=attempt.id):
                    cancelled += 1
                    self.log_change(request, attempt, "Cancelled the attempt.")
        skipped = queryset.count() - cancelled
        self.message_user(request, f"Cancelled {cancelled} attempt(s).", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"{skipped} attempt(s) were not pending (or finished meanwhile) and were left as "
                "they are.",
                messages.WARNING,
            )
