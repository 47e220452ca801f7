"""Job polling and cancel (SPEC §4.6, §6.6)."""

from __future__ import annotations

import uuid

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.pagination import PageQuerySerializer, status_query
from api.responses import NEXT_CURSOR_HELP
from api.routes import answer, route
from api.schemas import examples as ex
from api.schemas.routes import polling_header
from jobs.exceptions import JobFinishedError, JobNotCancellableError, JobNotFoundError
from jobs.models import AsyncJob, JobStatus
from jobs.selectors import (
    JobFilters,
    chain_document,
    job_chain_get,
    job_list,
    job_list_item,
    org_job_list,
    retry_after_seconds,
)
from provisioning import services as provisioning_services
from provisioning.serializers import (
    JobSerializer,
    JobSummarySerializer,
    job_type_field,
)


class JobListSerializer(serializers.Serializer):
    items = JobSummarySerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


class OrgJobListSerializer(serializers.Serializer):
    items = JobSummarySerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


def job_location(job: AsyncJob) -> str:
    return f"/v2/orgs/{job.organization_id}/brands/{job.brand_id}/serenity/jobs/{job.pk}"


def accepted_headers(job: AsyncJob) -> dict[str, str]:
    """`job` is the root just committed: its first step is the chain's next one."""
    return {"Location": job_location(job), "Retry-After": str(retry_after_seconds(job))}


def _render(
    job_id: str, *, brand_id: uuid.UUID | None = None, organization_id: uuid.UUID | None = None
) -> Response:
    view = job_chain_get(
        job_id=uuid.UUID(job_id), brand_id=brand_id, organization_id=organization_id
    )
    document = chain_document(view)
    in_progress = document.status == JobStatus.IN_PROGRESS
    headers = {"Retry-After": str(retry_after_seconds(view.effective))} if in_progress else {}
    return Response(JobSerializer(document).data, headers=headers)


class JobListQuerySerializer(PageQuerySerializer):
    status = status_query(JobStatus.choices, "Only chains in this effective status")


class OrgJobListQuerySerializer(JobListQuerySerializer):
    brandId = serializers.UUIDField(  # noqa: N815
        required=False, help_text="Only this brand's jobs; not a UUID → 400 `invalidRequest`."
    )
    jobType = job_type_field(  # noqa: N815
        known_only=True,
        required=False,
        help_text="Only jobs of this type.",
    )
    createdAfter = serializers.DateTimeField(  # noqa: N815
        required=False, help_text="Only jobs created after this instant (ISO 8601)."
    )


POLLING_HEADERS = [
    polling_header(
        "Sent while the job is `IN_PROGRESS`: whole seconds (1 to 60) until the chain's next "
        "scheduled step (a `PENDING` step's `runAfter`)."
    )
]


class JobCollectionView(OrgScopedView):
    """The brand's jobs by the ids clients hold (root jobs), newest first (SPEC §10.3)."""

    serenity_route = True

    @route(
        operation_id="jobList",
        tag="jobs",
        summary="List the brand's jobs (newest first)",
        description="The ids clients hold (one per chain: the job a 202 answered with), each "
        "with the chain's effective state as polling reports it, without `steps`.",
        query=JobListQuerySerializer,
        answers={
            200: answer(
                JobListSerializer,
                "A page of jobs, newest first.",
                {"A page": {"items": [ex.JOB_COMPLETED_ITEM], "nextCursor": None}},
            )
        },
    )
    def get(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        query = self.query_parse(request)
        page = job_list(
            brand_id=self.scope.brand.pk,
            status=query.get("status"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        items = [job_list_item(root) for root in page.items]
        return Response(JobListSerializer({"items": items, "next_cursor": page.next_cursor}).data)


class JobDetailView(OrgScopedView):
    serenity_route = True

    @route(
        operation_id="jobGet",
        tag="jobs",
        summary="Poll a job of this brand (the effective state of its chain)",
        description="`IN_PROGRESS` until the chain's last step has finished, then that step's "
        "`status`, `result` and `error`. An unknown job, or a job of another brand → 404 "
        "`jobNotFound`.",
        headers=POLLING_HEADERS,
        answers={
            200: answer(
                JobSerializer,
                "The chain's effective state.",
                {
                    "In progress (a settle read scheduled)": ex.JOB_IN_PROGRESS,
                    "Completed": ex.JOB_COMPLETED,
                },
            )
        },
        raises=[JobNotFoundError],
    )
    def get(self, request: Request, org_id: str, brand_id: str, job_id: str) -> Response:
        assert self.scope.brand is not None
        return _render(job_id, brand_id=self.scope.brand.pk)


class JobCancelView(OrgScopedView):
    serenity_route = True

    @route(
        operation_id="jobCancel",
        tag="jobs",
        summary="Cancel an in-flight provisioning job",
        description="Cancels a provisioning chain that has not finished → 200 with the job's "
        "new state. A finished job → 409 `jobFinished`; a running chained step or a "
        "`classifyPrompts` job → 409 `jobNotCancellable`.",
        headers=POLLING_HEADERS,
        answers={
            200: answer(JobSerializer, "The job's new state.", {"Cancelled": ex.JOB_CANCELLED})
        },
        raises=[JobNotFoundError, JobFinishedError, JobNotCancellableError],
    )
    def post(self, request: Request, org_id: str, brand_id: str, job_id: str) -> Response:
        assert self.scope.brand is not None
        provisioning_services.job_cancel(brand_id=self.scope.brand.pk, job_id=uuid.UUID(job_id))
        return _render(job_id, brand_id=self.scope.brand.pk)


class OrgJobCollectionView(OrgScopedView):
    """The org's jobs across its brands, by the ids clients hold, newest first (SPEC §12.2)."""

    @route(
        operation_id="orgJobList",
        tag="jobs",
        summary="List the organization's jobs across its brands (newest first)",
        description="The ids clients hold (one per chain), each with the chain's effective "
        "state as polling reports it, without `steps`, with its `brandId`. Filters combine.",
        query=OrgJobListQuerySerializer,
        answers={
            200: answer(
                OrgJobListSerializer,
                "A page of jobs, newest first.",
                {"A page": {"items": [ex.JOB_COMPLETED_ITEM], "nextCursor": None}},
            )
        },
    )
    def get(self, request: Request, org_id: str) -> Response:
        query = self.query_parse(request)
        filters = JobFilters(
            status=query.get("status"),
            brand_id=query.get("brandId"),
            job_type=query.get("jobType"),
            created_after=query.get("createdAfter"),
        )
        page = org_job_list(
            organization_id=self.scope.organization.pk,
            filters=filters,
            cursor=query["cursor"],
            limit=query["limit"],
        )
        items = [job_list_item(root) for root in page.items]
        body = {"items": items, "next_cursor": page.next_cursor}
        return Response(OrgJobListSerializer(body).data)


class OrgJobDetailView(OrgScopedView):
    """Any job of the org, without knowing its brand (SPEC §12.2)."""

    @route(
        operation_id="orgJobGet",
        tag="jobs",
        summary="Poll any job of the organization, without knowing its brand",
        description="The same document as the brand's job route. An unknown job, or a job of "
        "another organization → 404 `jobNotFound`.",
        headers=POLLING_HEADERS,
        answers={
            200: answer(
                JobSerializer, "The chain's effective state.", {"Completed": ex.JOB_COMPLETED}
            )
        },
        raises=[JobNotFoundError],
    )
    def get(self, request: Request, org_id: str, job_id: str) -> Response:
        return _render(job_id, organization_id=self.scope.organization.pk)
