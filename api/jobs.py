"""Job polling and cancel (SPEC §4.6, §6.6)."""

from __future__ import annotations

import uuid

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api import schemas
from api.base import OrgScopedView
from api.pagination import PageQuerySerializer
from api.responses import JobListSerializer, OrgJobListSerializer
from jobs.models import AsyncJob, JobStatus, JobType
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
from provisioning.serializers import JobSerializer


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
    status = serializers.ChoiceField(choices=JobStatus.choices, required=False)


class OrgJobListQuerySerializer(JobListQuerySerializer):
    brandId = serializers.UUIDField(required=False)  # noqa: N815
    jobType = serializers.ChoiceField(choices=JobType.choices, required=False)  # noqa: N815
    createdAfter = serializers.DateTimeField(required=False)  # noqa: N815


class JobCollectionView(OrgScopedView):
    """The brand's jobs by the ids clients hold (root jobs), newest first (SPEC §10.3)."""

    serenity_route = True
    query_serializers = {"GET": JobListQuerySerializer}

    @schemas.job_list_schema
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

    @schemas.job_get_schema
    def get(self, request: Request, org_id: str, brand_id: str, job_id: str) -> Response:
        assert self.scope.brand is not None
        return _render(job_id, brand_id=self.scope.brand.pk)


class JobCancelView(OrgScopedView):
    serenity_route = True

    @schemas.job_cancel_schema
    def post(self, request: Request, org_id: str, brand_id: str, job_id: str) -> Response:
        assert self.scope.brand is not None
        provisioning_services.job_cancel(brand_id=self.scope.brand.pk, job_id=uuid.UUID(job_id))
        return _render(job_id, brand_id=self.scope.brand.pk)


class OrgJobCollectionView(OrgScopedView):
    """The org's jobs across its brands, by the ids clients hold, newest first (SPEC §12.2)."""

    query_serializers = {"GET": OrgJobListQuerySerializer}

    @schemas.org_job_list_schema
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

    @schemas.org_job_get_schema
    def get(self, request: Request, org_id: str, job_id: str) -> Response:
        return _render(job_id, organization_id=self.scope.organization.pk)
