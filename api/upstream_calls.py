"""`GET S/upstream-calls`: the ledger of upstream writes (SPEC §13.4), a reader's route."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.pagination import PageQuerySerializer
from api.responses import NEXT_CURSOR_HELP
from api.routes import answer, route
from provisioning.ledger.selectors import UpstreamCallFilters, upstream_call_list

EXAMPLE_ITEM = {
    "id": "6b0f6f4e-3f7c-4d0a-9a51-2b1f0b6b5c11",
    "at": "2026-01-05T10:00:03.120000Z",
    "operation": "projects-post-project",
    "method": "POST",
    "statusCode": 201,
    "durationMs": 212,
    "brandId": "9b2f3c1e-8a7d-4c5b-9e10-1f2a3b4c5d6e",
    "jobId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
    "stepJobId": "4c3d2e1f-0a9b-4c8d-8e7f-6a5b4c3d2e1f",
    "objectIds": {"workspaceId": "ws-7f3a", "projectId": "4411"},
    "requestId": "1d2c3b4a-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
}


class ObjectIdsSerializer(serializers.Serializer):
    workspaceId = serializers.CharField(  # noqa: N815
        source="workspace_id", allow_null=True, help_text="The Semrush workspace; null: none."
    )
    projectId = serializers.CharField(  # noqa: N815
        source="project_id", allow_null=True, help_text="The Semrush project; null: none."
    )


class UpstreamCallSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    at = serializers.DateTimeField(help_text="When the call was sent.")
    operation = serializers.CharField(
        help_text="The operationId of Semrush's contract (e.g. `projects-post-project`)."
    )
    method = serializers.CharField()
    statusCode = serializers.IntegerField(  # noqa: N815
        source="status_code", allow_null=True, help_text="null: no answer arrived (a timeout)."
    )
    durationMs = serializers.IntegerField(source="duration_ms")  # noqa: N815
    brandId = serializers.UUIDField(source="brand_id", allow_null=True)  # noqa: N815
    jobId = serializers.UUIDField(  # noqa: N815
        source="job_id",
        allow_null=True,
        help_text="The chain's root job (the id a 202 answered with); null outside a chain.",
    )
    stepJobId = serializers.UUIDField(  # noqa: N815
        source="step_job_id", allow_null=True, help_text="The step's own row in the chain."
    )
    objectIds = ObjectIdsSerializer(source="*")  # noqa: N815
    requestId = serializers.CharField(  # noqa: N815
        source="request_id", help_text="The correlation id sent to Semrush as `X-Request-Id`."
    )


class UpstreamCallListSerializer(serializers.Serializer):
    items = UpstreamCallSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


class UpstreamCallQuerySerializer(PageQuerySerializer):
    brandId = serializers.UUIDField(  # noqa: N815
        required=False, help_text="Only this brand's calls; not a UUID → 400 `invalidRequest`."
    )
    jobId = serializers.UUIDField(  # noqa: N815
        required=False,
        help_text="Only the calls of this chain (its root job: the id a 202 answered with); not "
        "a UUID → 400 `invalidRequest`.",
    )
    objectId = serializers.CharField(  # noqa: N815
        required=False,
        max_length=100,
        help_text="Only the calls naming or returning this Semrush workspace or project id.",
    )
    since = serializers.DateTimeField(
        required=False,
        help_text="Only calls sent at or after this instant (ISO 8601); not one → 400 "
        "`invalidRequest`.",
    )


class UpstreamCallCollectionView(OrgScopedView):
    """The org's recorded upstream calls, newest first (SPEC §13.4)."""

    @route(
        operation_id="upstreamCallList",
        tag="upstream-calls",
        summary="List the organization's recorded Semrush calls (newest first)",
        description="Every call to Semrush that created, changed or deleted something, and the "
        "reads that confirmed one (a workspace's status, a project's publish state), each "
        "attempt with its status, duration, the objects it named or returned, the job and "
        "step that made it and the `X-Request-Id` it was sent with. Kept 90 days. Filters "
        "combine; `objectId` answers which call made a project or workspace.",
        query=UpstreamCallQuerySerializer,
        answers={
            200: answer(
                UpstreamCallListSerializer,
                "A page of calls, newest first.",
                {"A page": {"items": [EXAMPLE_ITEM], "nextCursor": None}},
            )
        },
    )
    def get(self, request: Request, org_id: str) -> Response:
        query = self.query_parse(request)
        filters = UpstreamCallFilters(
            brand_id=query.get("brandId"),
            job_id=query.get("jobId"),
            object_id=query.get("objectId"),
            since=query.get("since"),
        )
        page = upstream_call_list(
            organization_id=self.scope.organization.pk,
            filters=filters,
            cursor=query["cursor"],
            limit=query["limit"],
        )
        body = {"items": page.items, "next_cursor": page.next_cursor}
        return Response(UpstreamCallListSerializer(body).data)
