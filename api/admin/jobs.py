"""Admin for async jobs: one row per chain (the id clients hold) with the chain's effective
status, the chain's steps on its page, and an action that re-publishes a stuck chain's current
step through `jobs.dispatch.job_republish` (SPEC §8, §10.4).

Job metadata holds ids and parameters, never secrets; it is shown read-only. `jobs` knows no
brand: the admin registered for the site (`provisioning.admin`) extends this one with the
brand's name (a column and a search).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs.dispatch import job_republish
from jobs.models import AsyncJob, JobStatus, JobType
from jobs.selectors import OVERDUE_AFTER_SECONDS, overdue_chains_q
from jobs.services import REQUEST_ID_KEY

if TYPE_CHECKING:
    from django.contrib.admin.filters import _ListFilterChoices


def _pretty_json(value: Any) -> SafeString:
    if value is None:
        return format_html("<code>{}</code>", "null")
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, default=str))


class ChainStatusFilter(admin.SimpleListFilter):
    """The chain's effective status: its current step's (a chain that FAILED is FAILED, even
    though its first step COMPLETED)."""

    title = "chain status"
    parameter_name = "chain_status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(status.value, status.label) for status in JobStatus]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AsyncJob]) -> QuerySet[AsyncJob]:
        if self.value():
            return queryset.filter(
                Q(current__status=self.value()) | Q(current__isnull=True, status=self.value())
            )
        return queryset


class OverdueFilter(admin.SimpleListFilter):
    """Chains whose current step is runnable (due, unfinished, no live claim) and was due more
    than OVERDUE_AFTER_SECONDS ago: work no worker has taken although it could have."""

    title = "overdue"
    parameter_name = "overdue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", f"Runnable, due more than {OVERDUE_AFTER_SECONDS:g} s ago")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AsyncJob]) -> QuerySet[AsyncJob]:
        if self.value() == "yes":
            return queryset.filter(overdue_chains_q())
        return queryset


class JobKindFilter(admin.SimpleListFilter):
    """Provisioning chains by default (the client-facing job types); webhook deliveries (and
    any other background work) only when asked: a burst of deliveries must not bury the
    chains an operator is looking for (SPEC §12.4)."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("background", "Webhook deliveries and other background work"), ("all", "All")]

    def choices(self, changelist: Any) -> Iterator[_ListFilterChoices]:
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "Provisioning",
        }
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[AsyncJob]) -> QuerySet[AsyncJob]:
        if self.value() == "all":
            return queryset
        if self.value() == "background":
            return queryset.exclude(job_type__in=JobType.values)
        return queryset.filter(job_type__in=JobType.values)


def effective_step(job: AsyncJob) -> AsyncJob:
    """The step whose status is the chain's (`jobs.selectors.job_chain_get`)."""
    root = job.root or job
    return root.current or root


class AsyncJobAdmin(admin.ModelAdmin):
    """The list shows chains (root rows); a step row's page is reachable from its chain's."""

    # Narrow enough for a 1400 px window without scrolling sideways: the brand and org ids are
    # on the chain's page and searchable (`=id`), not columns.
    list_display = [
        "id",
        "job_type",
        "mode",
        "chain_status",
        "current_step",
        "step_count",
        "created_at",
        "chain_finished_at",
    ]
    list_filter = [JobKindFilter, ChainStatusFilter, OverdueFilter, "job_type", "mode"]
    search_fields = ["=id", "=brand_id", "=organization_id"]
    list_select_related = ["current"]
    date_hierarchy = "created_at"
    actions = ["republish_jobs"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "id",
                    "job_type",
                    "mode",
                    "chain_status",
                    "organization_id",
                    "brand_id",
                    "request_id",
                    "chain",
                ]
            },
        ),
        (
            "Outcome of the chain",
            {"fields": ["chain_result_json", "chain_error_json"]},
        ),
        (
            "This row",
            {"fields": ["step", "status", "result_json", "error_json", "metadata_json"]},
        ),
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

    def get_queryset(self, request: HttpRequest) -> QuerySet[AsyncJob]:
        queryset = super().get_queryset(request).select_related("current", "root__current")
        match = request.resolver_match
        if match is not None and match.url_name == "jobs_asyncjob_changelist":
            # One row per chain: the root, whose id is the one clients hold.
            queryset = queryset.filter(root__isnull=True)
        return queryset

    @admin.display(description="chain status")
    def chain_status(self, obj: AsyncJob) -> str:
        return str(effective_step(obj).status)

    @admin.display(description="current step")
    def current_step(self, obj: AsyncJob) -> str:
        return str(effective_step(obj).step)

    @admin.display(description="finished")
    def chain_finished_at(self, obj: AsyncJob) -> Any:
        return effective_step(obj).finished_at

    @admin.display(description="request id")
    def request_id(self, obj: AsyncJob) -> str:
        return str((obj.metadata or {}).get(REQUEST_ID_KEY) or "—")

    @admin.display(description="result")
    def chain_result_json(self, obj: AsyncJob) -> SafeString:
        return _pretty_json(effective_step(obj).result)

    @admin.display(description="error")
    def chain_error_json(self, obj: AsyncJob) -> SafeString:
        return _pretty_json(effective_step(obj).error)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in AsyncJob._meta.fields] + [
            "chain",
            "chain_status",
            "request_id",
            "chain_result_json",
            "chain_error_json",
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
        """Re-publish each selected chain's current step (or the selected step row itself)."""
        published = 0
        selected = list(queryset.select_related("root__current", "current"))
        for job in selected:
            step = effective_step(job) if job.root_id is None else job
            if job_republish(job_id=step.id):
                published += 1
                self.log_change(request, job, f"Re-published step {step.step} ({step.id}).")
        skipped = len(selected) - published
        self.message_user(request, f"Re-published {published} job(s).", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"{skipped} job(s) were not re-published (finished, not runnable yet, or the "
                "broker refused the message).",
                messages.WARNING,
            )
