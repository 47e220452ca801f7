"""Reconciliation routes (SPEC §13.1): begin one (a plan, or a plan and its repairs), read one
with a page of its items, list them. Shaped like the onboarding routes."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.fields import BoundedListField, StrictBooleanField
from api.pagination import PageQuerySerializer, status_query
from api.responses import NEXT_CURSOR_HELP
from api.routes import answer, route
from api.schemas.routes import accepted_headers, polling_header
from kernel.errors import InvalidRequestError
from provisioning.reconcile.exceptions import (
    ReconciliationInProgressError,
    ReconciliationNotFoundError,
)
from provisioning.reconcile.models import (
    DriftAction,
    DriftKind,
    ItemStatus,
    Reconciliation,
    ReconciliationItem,
    ReconciliationStatus,
)
from provisioning.reconcile.selectors import (
    reconciliation_document,
    reconciliation_get,
    reconciliation_list,
)
from provisioning.reconcile.services import reconciliation_begin
from provisioning.serializers import OpenCodeField
from serenity.exceptions import SerenityNotEnabledError

RETRY_AFTER_SECONDS = 5
POLL_HEADER = polling_header(
    "Sent while the reconciliation is `IN_PROGRESS`: seconds before polling again."
)
MAX_BRANDS = 1000


def reconciliation_location(reconciliation: Reconciliation) -> str:
    return f"/v2/orgs/{reconciliation.organization_id}/serenity/reconciliations/{reconciliation.pk}"


# --- Bodies -------------------------------------------------------------------------------------


class ReconciliationCreateSerializer(serializers.Serializer):
    brandIds = BoundedListField(  # noqa: N815
        child=serializers.UUIDField(),
        required=False,
        min_length=1,
        max_length=MAX_BRANDS,
        help_text="Only these brands (default: every active brand with a workspace).",
    )
    repair = StrictBooleanField(
        required=False,
        default=False,
        help_text="`false` (the default): a plan, with no upstream write. `true`: each drift "
        "found is repaired (a `repairBrand` job per brand).",
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [name for name in data if name not in self.fields]
            if unknown:
                raise serializers.ValidationError({unknown[0]: ["is not a member of this body."]})
        return super().to_internal_value(data)


class ReconciliationListQuerySerializer(PageQuerySerializer):
    status = status_query(ReconciliationStatus.choices, "Only reconciliations in this status")


class ReconciliationItemsQuerySerializer(PageQuerySerializer):
    status = status_query(ItemStatus.choices, "Only items in this status (`counts` cover all)")
    kind = serializers.CharField(
        required=False, max_length=64, help_text="Only drift of this kind."
    )


# --- Answers ------------------------------------------------------------------------------------


class ReconciliationCountsSerializer(serializers.Serializer):
    checked = serializers.IntegerField(help_text="Brands compared with Semrush so far.")
    drifted = serializers.IntegerField(help_text="Drift found (items).")
    repaired = serializers.IntegerField(help_text="Items repaired.")
    failed = serializers.IntegerField(help_text="Items whose repair failed.")


class ReconciliationErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class ReconciliationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(
        choices=ReconciliationStatus.choices,
        help_text="`FAILED`: the organization's Semrush could not be read at all.",
    )
    repair = serializers.BooleanField()
    counts = serializers.SerializerMethodField()
    error = ReconciliationErrorSerializer(allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815
    updatedAt = serializers.DateTimeField(source="updated_at")  # noqa: N815
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)  # noqa: N815

    @extend_schema_field(ReconciliationCountsSerializer)
    def get_counts(self, reconciliation: Reconciliation) -> dict[str, int]:
        return {
            "checked": reconciliation.checked,
            "drifted": reconciliation.drifted,
            "repaired": reconciliation.repaired,
            "failed": reconciliation.failed,
        }


class ItemMarketSerializer(serializers.Serializer):
    market = serializers.CharField(allow_null=True)
    languageCode = serializers.CharField()  # noqa: N815


class ReconciliationItemSerializer(serializers.Serializer):
    brandId = serializers.UUIDField(source="brand_id")  # noqa: N815
    market = serializers.SerializerMethodField(
        help_text="The market the drift is on; null: the brand's workspace, or a project no "
        "market records (`unexpectedProject`, see `projectId`)."
    )
    projectId = serializers.CharField(source="project_id", allow_null=True)  # noqa: N815
    kind = OpenCodeField(known=DriftKind.values, schema_name="DriftKind", help_text="What drifted.")
    action = OpenCodeField(
        known=DriftAction.values, schema_name="DriftAction", help_text="What mends it."
    )
    plannedCalls = serializers.IntegerField(  # noqa: N815
        source="planned_calls",
        help_text="The action's upstream calls, confirm reads not counted.",
    )
    status = serializers.ChoiceField(choices=ItemStatus.choices)
    error = ReconciliationErrorSerializer(allow_null=True)
    jobId = serializers.UUIDField(  # noqa: N815
        source="job_id",
        allow_null=True,
        help_text="The `repairBrand` job mending it (poll `S/jobs/{jobId}`); null in a plan.",
    )

    @extend_schema_field(ItemMarketSerializer(allow_null=True))
    def get_market(self, item: ReconciliationItem) -> dict[str, Any] | None:
        if item.kind == DriftKind.UNEXPECTED_PROJECT or not item.slice:
            return None
        return {"market": item.slice.get("market"), "languageCode": item.slice["languageCode"]}


class ReconciliationDocumentSerializer(ReconciliationSerializer):
    items = ReconciliationItemSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


class ReconciliationListSerializer(serializers.Serializer):
    items = ReconciliationSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


def _polling(reconciliation: Reconciliation) -> dict[str, str]:
    if reconciliation.status == ReconciliationStatus.IN_PROGRESS:
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return {}


EXAMPLE: dict[str, Any] = {
    "id": "5b0f3c1e-8d6a-4c2b-9f1e-2a7d4c9e8b10",
    "status": "IN_PROGRESS",
    "repair": False,
    "counts": {"checked": 0, "drifted": 0, "repaired": 0, "failed": 0},
    "error": None,
    "createdAt": "2026-12-07T08:00:00Z",
    "updatedAt": "2026-12-07T08:00:00Z",
    "finishedAt": None,
}
ITEM_EXAMPLE = {
    "brandId": "0b9c4f7e-4a51-4f0e-9e0c-8d2f1a6b3c55",
    "market": {"market": "US", "languageCode": "en"},
    "projectId": "9f1c7a2e-3b4d-4e5f-8a6b-7c8d9e0f1a2b",
    "kind": "projectGone",
    "action": "recreateProject",
    "plannedCalls": 4,
    "status": "planned",
    "error": None,
    "jobId": None,
}


# --- Routes -------------------------------------------------------------------------------------


class ReconciliationCollectionView(OrgScopedView):
    @route(
        operation_id="reconciliationList",
        tag="reconciliations",
        summary="List the organization's reconciliations (newest first, without their items)",
        query=ReconciliationListQuerySerializer,
        answers={
            200: answer(
                ReconciliationListSerializer,
                "A page of reconciliations.",
                {"A page": {"items": [EXAMPLE], "nextCursor": None}},
            )
        },
    )
    def get(self, request: Request, org_id: str) -> Response:
        query = self.query_parse(request)
        page = reconciliation_list(
            organization=self.scope.organization,
            status=query.get("status"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        body = {"items": page.items, "next_cursor": page.next_cursor}
        return Response(ReconciliationListSerializer(body).data)

    @route(
        operation_id="reconciliationCreate",
        tag="reconciliations",
        summary="Compare the record with Semrush (a plan), and optionally repair the drift",
        description="Each active brand with a workspace (or those of `brandIds`) is compared "
        "with Semrush's listings (about one call per brand, at the audit's share of the "
        "credential's rate). `repair: false` (the default) is a plan: every drift found, the "
        "action that would mend it and its upstream calls, with no upstream write. `repair: "
        "true` also begins a `repairBrand` job per drifted brand (a brand with provisioning "
        "in flight is skipped with the guard's 409 code). One reconciliation per organization "
        "at a time: another → 409 `reconciliationInProgress` with `details.reconciliationId`. "
        "Poll `Location`.",
        body=ReconciliationCreateSerializer,
        examples={
            "A plan": {"repair": False},
            "Repair two brands": {"brandIds": [ITEM_EXAMPLE["brandId"]], "repair": True},
        },
        headers=accepted_headers(
            location="The reconciliation's path, to poll.",
            retry_after="Seconds before the first poll.",
        ),
        answers={202: answer(ReconciliationSerializer, "Accepted.", {"Accepted": EXAMPLE})},
        raises=[ReconciliationInProgressError, SerenityNotEnabledError, InvalidRequestError],
    )
    def post(self, request: Request, org_id: str) -> Response:
        body = self.body(request)
        reconciliation = reconciliation_begin(
            organization=self.scope.organization,
            brand_ids=body.get("brandIds"),
            repair=body["repair"],
        )
        return Response(
            ReconciliationSerializer(reconciliation).data,
            status=202,
            headers={
                "Location": reconciliation_location(reconciliation),
                "Retry-After": str(RETRY_AFTER_SECONDS),
            },
        )


class ReconciliationDetailView(OrgScopedView):
    @route(
        operation_id="reconciliationGet",
        tag="reconciliations",
        summary="Read a reconciliation: its counts, and a page of its items",
        description="`counts` cover every item; `items` (the drift found, in the order it was "
        "found) are paginated and filtered by `status` and `kind`.",
        query=ReconciliationItemsQuerySerializer,
        headers=[POLL_HEADER],
        answers={
            200: answer(
                ReconciliationDocumentSerializer,
                "The reconciliation with a page of its items.",
                {"Planned": {**EXAMPLE, "items": [ITEM_EXAMPLE], "nextCursor": None}},
            )
        },
        raises=[ReconciliationNotFoundError],
    )
    def get(self, request: Request, org_id: str, reconciliation_id: str) -> Response:
        query = self.query_parse(request)
        reconciliation = reconciliation_get(
            organization=self.scope.organization, reconciliation_id=uuid.UUID(reconciliation_id)
        )
        document = reconciliation_document(
            reconciliation=reconciliation,
            status=query.get("status"),
            kind=query.get("kind"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        data = {
            **ReconciliationSerializer(document.reconciliation).data,
            "items": ReconciliationItemSerializer(document.items, many=True).data,
            "nextCursor": document.next_cursor,
        }
        return Response(data, headers=_polling(document.reconciliation))
