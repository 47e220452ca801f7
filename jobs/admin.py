"""Admin for async jobs: read-only rows, the chain shown as its steps, and an action that
re-publishes a stuck job through `jobs.services.job_republish` (SPEC §8).

Job metadata holds ids and parameters, never secrets; it is shown read-only.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs.models import AsyncJob


def _pretty_json(value: Any) -> SafeString:
    if value is None:
        return format_html("<code>{}</code>", "null")
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, default=str))


@admin.register(AsyncJob)
class AsyncJobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "job_type",
        "step",
        "status",
        "position",
        "brand_id",
        "organization_id",
        "run_after",
        "lease_expires_at",
        "run_count",
        "created_at",
        "finished_at",
    ]
    list_filter = ["job_type", "step", "status"]
    search_fields = ["=id", "=brand_id", "=organization_id", "=root__id"]
    date_hierarchy = "created_at"
    actions = ["republish_jobs"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "id",
                    "job_type",
                    "step",
                    "status",
                    "organization_id",
                    "brand_id",
                    "chain",
                ]
            },
        ),
        ("Outcome", {"fields": ["result_json", "error_json", "metadata_json"]}),
        (
            "Delivery",
            {
                "fields": [
                    "root",
                    "next",
                    "current",
                    "position",
                    "step_count",
                    "run_after",
                    "published_at",
                    "publish_count",
                    "claim_token",
                    "lease_expires_at",
                    "run_count",
                    "started_at",
                    "finished_at",
                    "created_at",
                    "updated_at",
                ]
            },
        ),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in AsyncJob._meta.fields] + [
            "chain",
            "result_json",
            "error_json",
            "metadata_json",
        ]

    @admin.display(description="result")
    def result_json(self, obj: AsyncJob) -> SafeString:
        return _pretty_json(obj.result)

    @admin.display(description="error")
    def error_json(self, obj: AsyncJob) -> SafeString:
        return _pretty_json(obj.error)

    @admin.display(description="metadata")
    def metadata_json(self, obj: AsyncJob) -> SafeString:
        return _pretty_json(obj.metadata)

    @admin.display(description="chain (steps in order)")
    def chain(self, obj: AsyncJob) -> SafeString:
        root_id = obj.root_id or obj.id
        steps = AsyncJob.objects.filter(Q(pk=root_id) | Q(root_id=root_id)).order_by(
            "position", "created_at"
        )
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td><a href='{}'>{}</a></td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td></tr>",
            (
                (
                    "→" if step.pk == obj.pk else "",
                    reverse("admin:jobs_asyncjob_change", args=[step.pk]),
                    step.step,
                    step.status,
                    step.run_after or "—",
                    step.started_at or "—",
                    step.finished_at or "—",
                )
                for step in steps
            ),
        )
        return format_html(
            "<table><thead><tr><th></th><th>step</th><th>status</th><th>run after</th>"
            "<th>started</th><th>finished</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_republish_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobs.change_asyncjob")

    @admin.action(description="Re-publish", permissions=["republish"])
    def republish_jobs(self, request: HttpRequest, queryset: QuerySet[AsyncJob]) -> None:
        from jobs.services import job_republish

        published = 0
        for job_id in queryset.values_list("id", flat=True):
            if job_republish(job_id=job_id):
                published += 1
        skipped = queryset.count() - published
        self.message_user(request, f"Re-published {published} job(s).", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"{skipped} job(s) were not re-published (finished, not runnable yet, or the "
                "broker refused the message).",
                messages.WARNING,
            )
