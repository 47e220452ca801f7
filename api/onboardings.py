"""Bulk onboarding routes (SPEC §11.2, §13.2): accept (JSON or CSV), read with paginated items,
list, cancel, redrive, and the items alone (a page as JSON, or every item as CSV)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.http import HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.onboarding_csv import CSV_MEDIA_TYPE, CsvRenderer, csv_brands, csv_table, items_csv
from api.onboarding_serializers import (
    MAX_BRANDS,
    OnboardingAcceptedSerializer,
    OnboardingCreateQuerySerializer,
    OnboardingCreateSerializer,
    OnboardingItemsPageSerializer,
    OnboardingItemsQuerySerializer,
    OnboardingListQuerySerializer,
    OnboardingListSerializer,
    OnboardingRetrySerializer,
    OnboardingSerializer,
    brands_input,
)
from api.parsers import BoundedJSONParser, CsvParser
from api.routes import answer, route
from api.schemas import examples as ex
from api.schemas.routes import accepted_headers, polling_header
from jobs.models import JobStatus
from provisioning import selectors
from provisioning.exceptions import (
    NothingToRetryError,
    OnboardingFinishedError,
    OnboardingInProgressError,
    OnboardingLimitError,
    OnboardingNotFoundError,
    QueuedMarketsLimitError,
)
from provisioning.flows.onboarding import onboarding_begin, onboarding_markets_check
from provisioning.flows.onboarding_cancel import onboarding_cancel
from provisioning.flows.redrive import SAME_THRESHOLD, onboarding_redrive
from provisioning.models import Onboarding
from serenity.exceptions import (
    BrandExistsError,
    SerenityNotEnabledError,
    UnknownLanguageError,
    UnknownMarketError,
)

# Polling an onboarding: a brand takes seconds to minutes, so every few seconds is enough.
RETRY_AFTER_SECONDS = 5
# A CSV body or answer, as the document describes it, and the examples of the redrive and the
# items.
CSV_BODY = OpenApiTypes.STR
REDRIVE_ACCEPTED = {
    **ex.ONBOARDING_ACCEPTED,
    "onboardingId": "8c3e1a57-4d92-4b0f-a6e8-1f5b9d2c7e40",
    "total": 1,
    "retryOf": ex.ONBOARDING_ID,
}
CREATE_CSV = (
    "name,baseUrl,aliases,markets\r\n"
    "Acme,https://acme.example,,US:en\r\n"
    'Globex,https://globex.example,"Globex Corp",DE:de;FR:fr\r\n'
)
ITEMS_CSV = (
    "name,baseUrl,markets,status,brandId,errorCode,errorMessage\r\n"
    f"Acme,https://acme.example,US:en,COMPLETED,{ex.BRAND_ID},,\r\n"
    "Acme,https://acme.example,US:en,FAILED,,brandExists,"
    "A brand with this name already exists in the organization.\r\n"
)
POLL_HEADER = polling_header(
    "Sent while the onboarding is `IN_PROGRESS`: seconds before polling again."
)


def onboarding_location(onboarding: Onboarding) -> str:
    return f"/v2/orgs/{onboarding.organization_id}/serenity/onboardings/{onboarding.pk}"


def _accepted(onboarding: Onboarding) -> Response:
    return Response(
        OnboardingAcceptedSerializer(onboarding).data,
        status=202,
        headers={
            "Location": onboarding_location(onboarding),
            "Retry-After": str(RETRY_AFTER_SECONDS),
        },
    )


def _markets_given(body: Any) -> int:
    """How many markets the body's items list, counted before they are validated (a list over
    its own limit is not counted: its validation refuses it at once, naming it)."""
    brands = body.get("brands") if isinstance(body, dict) else None
    if not isinstance(brands, list) or len(brands) > MAX_BRANDS:
        return 0
    per_item = settings.SERENITY_MAX_ACTIVATE_MARKETS
    counts = (
        len(item["markets"])
        for item in brands
        if isinstance(item, dict) and isinstance(item.get("markets"), list)
    )
    return sum(count for count in counts if count <= per_item)


def _document(
    onboarding: Onboarding, *, cursor: str | None, limit: int, status: str | None = None
) -> Response:
    document = selectors.onboarding_document(
        onboarding=onboarding, status=status, cursor=cursor, limit=limit
    )
    in_progress = document.status == JobStatus.IN_PROGRESS
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if in_progress else {}
    return Response(OnboardingSerializer(document).data, headers=headers)


class OnboardingCollectionView(OrgScopedView):
    parser_classes = [BoundedJSONParser, CsvParser]

    @route(
        operation_id="onboardingList",
        tag="onboardings",
        summary="List the organization's onboardings (newest first, without their items)",
        query=OnboardingListQuerySerializer,
        answers={
            200: answer(
                OnboardingListSerializer,
                "A page of onboardings.",
                {"A page": {"items": [ex.ONBOARDING], "nextCursor": None}},
            )
        },
    )
    def get(self, request: Request, org_id: str) -> Response:
        query = self.query_parse(request)
        page = selectors.onboarding_list(
            organization=self.scope.organization,
            status=query.get("status"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        summaries = [selectors.onboarding_summary(o) for o in page.items]
        body = {"items": summaries, "next_cursor": page.next_cursor}
        return Response(OnboardingListSerializer(body).data)

    @route(
        operation_id="onboardingCreate",
        tag="onboardings",
        summary="Onboard up to 1000 brands with their markets in one request (always async)",
        description="Each item is an async brand create (status `active`) with its markets: "
        "its own brand, attempt and chain (provision-workspace → create the markets). The whole "
        "body is validated before anything is written: a bad item → 400 naming `brands[i].field` "
        "in `details.field` (e.g. `brands[3].markets[0].market`); a member the body does not "
        "have → 400 `invalidRequest` naming it (`async`, which an earlier release took, is "
        "accepted and ignored, with a `Deprecation` header: it is always asynchronous). An "
        "item whose "
        "name exists in the organization or repeats an earlier item's ends `FAILED` "
        "`brandExists`, alone. `maxFailedItems`: once that many items failed, the onboarding "
        "is cancelled (`cancelledBy`: `failureThreshold`).\n\n"
        "**CSV** (`Content-Type: text/csv`, UTF-8, with or without a byte order mark): a header "
        "row naming the columns `name`, `baseUrl` (both required), `aliases` (`;`-separated) "
        "and `markets` (`US:en;DE:de`), then one brand per row, each validated as a JSON item "
        "is; a bad cell → 400 `invalidRequest` naming it in `details.field` as "
        "`rows[N].column`, the first data row being 1, nothing written; the threshold is the "
        "query's `maxFailedItems`. The organization's cap of open items is checked before the "
        "rows.\n\nAn organization's items in progress are capped (5,000 unless an "
        "operator set its own cap) and one onboarding holds at most 5,000 markets in all: past "
        "either → 429 `onboardingLimit` with `Retry-After`, nothing written. Poll `Location`.",
        body=OnboardingCreateSerializer,
        other_bodies={CSV_MEDIA_TYPE: CSV_BODY},
        query=OnboardingCreateQuerySerializer,
        examples={"Two brands": ex.ONBOARDING_CREATE, "Two brands as CSV": CREATE_CSV},
        headers=accepted_headers(
            location="The onboarding's path, to poll.",
            retry_after="Seconds before the first poll.",
        ),
        answers={
            202: answer(
                OnboardingAcceptedSerializer,
                "Accepted: every item's chain is started.",
                {"Accepted": ex.ONBOARDING_ACCEPTED},
            )
        },
        # An item is validated before anything is written (SPEC §11.2); its markets' slices as
        # a market create's. A name taken by a concurrent create at every try of the accept's
        # transaction is `brandExists` for the whole request.
        raises=[
            UnknownMarketError,
            UnknownLanguageError,
            SerenityNotEnabledError,
            BrandExistsError,
            OnboardingLimitError,
            QueuedMarketsLimitError,
        ],
    )
    def post(self, request: Request, org_id: str) -> Response:
        organization = self.scope.organization
        threshold = self.query_parse(request).get("maxFailedItems")
        table = csv_table(request)
        if table is not None:
            brands = csv_brands(table, organization=organization)
        else:
            # Cheap refusals first: the markets in all are counted before any member is
            # validated.
            onboarding_markets_check(_markets_given(request.data))
            body = self.body(request)
            brands = brands_input(body["brands"])
            threshold = body.get("maxFailedItems", threshold)
        onboarding = onboarding_begin(
            organization=organization, brands=brands, max_failed_items=threshold
        )
        return _accepted(onboarding)


class OnboardingDetailView(OrgScopedView):
    @route(
        operation_id="onboardingGet",
        tag="onboardings",
        summary="Read an onboarding: counts over every item, and a page of its items",
        description="`counts` cover every item; `items` are paginated in `index` order. An "
        "item's `status`, `result` and `error` are its chain's, as job polling reports them. "
        "`IN_PROGRESS` until every item has ended, then `COMPLETED` (whatever the items' "
        "outcomes) or `CANCELLED` if it was cancelled.",
        query=OnboardingItemsQuerySerializer,
        headers=[POLL_HEADER],
        answers={
            200: answer(
                OnboardingSerializer,
                "The onboarding with a page of its items.",
                {"In progress": ex.ONBOARDING_DOCUMENT},
            )
        },
        raises=[OnboardingNotFoundError],
    )
    def get(self, request: Request, org_id: str, onboarding_id: str) -> Response:
        query = self.query_parse(request)
        onboarding = selectors.onboarding_get(
            organization=self.scope.organization, onboarding_id=uuid.UUID(onboarding_id)
        )
        return _document(
            onboarding, status=query.get("status"), cursor=query["cursor"], limit=query["limit"]
        )


class OnboardingCancelView(OrgScopedView):
    @route(
        operation_id="onboardingCancel",
        tag="onboardings",
        summary="Cancel every item of an onboarding that has not ended",
        description="Each item is cancelled as the job cancel route cancels a chain; an item "
        "whose chained work is already running ends on its own. Answers the onboarding (first "
        "page). An onboarding that has ended (`COMPLETED` or `CANCELLED`) → 409 "
        "`onboardingFinished`, and nothing changes.",
        answers={
            200: answer(
                OnboardingSerializer,
                "The onboarding after the cancel.",
                {"Cancelled": ex.ONBOARDING_CANCELLED},
            )
        },
        raises=[OnboardingNotFoundError, OnboardingFinishedError],
    )
    def post(self, request: Request, org_id: str, onboarding_id: str) -> Response:
        onboarding = selectors.onboarding_get(
            organization=self.scope.organization, onboarding_id=uuid.UUID(onboarding_id)
        )
        onboarding_cancel(onboarding=onboarding)
        onboarding.refresh_from_db()
        return _document(onboarding, cursor=None, limit=settings.SERENITY_PAGE_SIZE_DEFAULT)


class OnboardingRetryView(OrgScopedView):
    @route(
        operation_id="onboardingRetry",
        tag="onboardings",
        summary="Redrive an onboarding: a new one with its failed and cancelled items",
        description="A new onboarding (`retryOf`: this one) holding every item of this one whose "
        "status is `FAILED` or `CANCELLED`, with the same brand data, in `index` order. An item "
        "whose brand the first run created resumes on that brand (its workspace and markets as "
        "they are: a market already live costs no call) instead of creating another; an item "
        "that completed is not part of it and costs no upstream call. `maxFailedItems`: the "
        "redrive's threshold (absent: this onboarding's; null: none). While this onboarding "
        "(or an earlier redrive of it) runs → 409 `onboardingInProgress` naming it in "
        "`details.onboardingId`; no item failed or was cancelled → 409 `nothingToRetry`. Poll "
        "`Location`.",
        body=OnboardingRetrySerializer,
        examples={"The original's threshold": {}, "A threshold of its own": {"maxFailedItems": 5}},
        headers=accepted_headers(
            location="The new onboarding's path, to poll.",
            retry_after="Seconds before the first poll.",
        ),
        answers={
            202: answer(
                OnboardingAcceptedSerializer,
                "Accepted: the redrive's items are started.",
                {"Accepted": REDRIVE_ACCEPTED},
            )
        },
        raises=[
            OnboardingNotFoundError,
            OnboardingInProgressError,
            NothingToRetryError,
            SerenityNotEnabledError,
            OnboardingLimitError,
        ],
    )
    def post(self, request: Request, org_id: str, onboarding_id: str) -> Response:
        onboarding = selectors.onboarding_get(
            organization=self.scope.organization, onboarding_id=uuid.UUID(onboarding_id)
        )
        body = self.body(request)
        threshold = body.get("maxFailedItems", SAME_THRESHOLD)
        return _accepted(onboarding_redrive(onboarding=onboarding, max_failed_items=threshold))


class OnboardingItemsView(OrgScopedView):
    renderer_classes = [JSONRenderer, CsvRenderer]

    @route(
        operation_id="onboardingItems",
        tag="onboardings",
        summary="An onboarding's items: a page as JSON, or every item as CSV",
        description="JSON: a page of items in `index` order, as the onboarding's document lists "
        "them. With `Accept: text/csv`: every item (not a page: `limit` and `cursor` do not "
        "apply; `status` filters), streamed, with the header "
        "`name,baseUrl,markets,status,brandId,errorCode,errorMessage`: `markets` as a CSV "
        "onboarding takes them (`US:en;DE:de`), `status` the item's as JSON gives it, an "
        "absent value an empty cell. Errors are JSON whatever `Accept` says.",
        query=OnboardingItemsQuerySerializer,
        answers={
            (200, "application/json"): answer(
                OnboardingItemsPageSerializer,
                "A page of items.",
                {"A page": {"items": ex.ONBOARDING_ITEMS, "nextCursor": None}},
            ),
            (200, CSV_MEDIA_TYPE): OpenApiResponse(
                CSV_BODY,
                "Every item (`status` filters), streamed.",
                [OpenApiExample("Items", value=ITEMS_CSV, media_type=CSV_MEDIA_TYPE)],
            ),
        },
        raises=[OnboardingNotFoundError],
    )
    def get(self, request: Request, org_id: str, onboarding_id: str) -> HttpResponseBase:
        query = self.query_parse(request)
        onboarding = selectors.onboarding_get(
            organization=self.scope.organization, onboarding_id=uuid.UUID(onboarding_id)
        )
        if request.accepted_media_type == CSV_MEDIA_TYPE:
            items = selectors.onboarding_items_all(
                onboarding=onboarding, status=query.get("status")
            )
            return StreamingHttpResponse(
                items_csv(items), content_type=f"{CSV_MEDIA_TYPE}; charset=utf-8"
            )
        page = selectors.onboarding_items(
            onboarding=onboarding,
            status=query.get("status"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        body = {
            "items": [selectors.onboarding_item_document(item) for item in page.items],
            "next_cursor": page.next_cursor,
        }
        return Response(OnboardingItemsPageSerializer(body).data)

    def finalize_response(
        self, request: Request, response: Any, *args: Any, **kwargs: Any
    ) -> Response:
        """Errors are answered as JSON even to `Accept: text/csv`."""
        if isinstance(response, Response) and response.status_code >= 400:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
