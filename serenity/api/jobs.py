"""Job polling and cancel (SPEC §4.6, §6.6)."""

from __future__ import annotations

import uuid

from django.conf import settings
from rest_framework.request import Request
from rest_framework.response import Response

from jobs.models import AsyncJob, JobStatus
from jobs.selectors import chain_payload, job_chain_get
from provisioning import services as provisioning_services
from serenity.api import schemas
from serenity.api.base import OrgScopedView


def job_location(job: AsyncJob) -> str:
    return f"/v2/orgs/{job.organization_id}/brands/{job.brand_id}/serenity/jobs/{job.pk}"


def retry_after_seconds() -> str:
    first = (
        settings.SERENITY_PROVISION_BACKOFF_SECONDS[0]
        if settings.SERENITY_PROVISION_BACKOFF_SECONDS
        else 1
    )
    return str(max(1, min(5, int(first))))


def accepted_headers(job: AsyncJob) -> dict[str, str]:
    return {"Location": job_location(job), "Retry-After": retry_after_seconds()}


def accepted_body(job: AsyncJob) -> dict[str, str]:
    return {"jobId": str(job.pk), "jobType": job.job_type, "status": JobStatus.IN_PROGRESS}


def _render(job_id: str, brand_id: uuid.UUID) -> Response:
    view = job_chain_get(job_id=uuid.UUID(job_id), brand_id=brand_id)
    body = chain_payload(view)
    headers = (
        {"Retry-After": retry_after_seconds()} if body["status"] == JobStatus.IN_PROGRESS else {}
    )
    return Response(body, headers=headers)


class JobDetailView(OrgScopedView):
    serenity_route = True

    @schemas.job_get_schema
    def get(self, request: Request, org_id: str, brand_id: str, job_id: str) -> Response:
        assert self.scope.brand is not None
        return _render(job_id, self.scope.brand.pk)


class JobCancelView(OrgScopedView):
    serenity_route = True

    @schemas.job_cancel_schema
    def post(self, request: Request, org_id: str, brand_id: str, job_id: str) -> Response:
        assert self.scope.brand is not None
        provisioning_services.job_cancel(brand_id=self.scope.brand.pk, job_id=uuid.UUID(job_id))
        return _render(job_id, self.scope.brand.pk)
