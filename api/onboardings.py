"""Bulk onboarding routes (SPEC §11.2): accept, read with paginated items, list, cancel."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.onboarding_serializers import (
    MAX_BRANDS,
    OnboardingAcceptedSerializer,
    OnboardingCreateSerializer,
    OnboardingItemsQuerySerializer,
    OnboardingListQuerySerializer,
    OnboardingListSerializer,
    OnboardingSerializer,
)
from api.routes import answer, route
from api.schemas import examples as ex
from api.schemas.routes import accepted_headers, polling_header
from jobs.models import JobStatus
from kernel.errors import InvalidRequestError
from provisioning import selectors
from provisioning.exceptions import (
    OnboardingFinishedError,
    OnboardingLimitError,
    OnboardingNotFoundError,
    QueuedMarketsLimitError,
)
from provisioning.flows.common import MarketPlan
from provisioning.flows.onboarding import (
    OnboardingBrand,
    onboarding_begin,
    onboarding_cancel,
    onboarding_markets_check,
)
from provisioning.models import Onboarding
from serenity.exceptions import (
    BrandExistsError,
    SerenityNotEnabledError,
    UnknownLanguageError,
    UnknownMarketError,
)
from serenity.slices import slice_parse

# Polling an onboarding: a brand takes seconds to minutes, so every few seconds is enough.
RETRY_AFTER_SECONDS = 5
POLL_HEADER = polling_header(
    "Sent while the onboarding is `IN_PROGRESS`: seconds before polling again."
)


def onboarding_location(onboarding: Onboarding) -> str:
    return f"/v2/orgs/{onboarding.organization_id}/serenity/onboardings/{onboarding.pk}"


def _brands_input(brands: list[dict[str, Any]]) -> list[OnboardingBrand]:
    """The validated items with their markets parsed (400 naming `brands[i].markets[j].…`;
    a repeated market within an item names `brands[i].markets`)."""
    parsed = []
    for i, brand in enumerate(brands):
        plans = []
        seen: set[tuple[int, str]] = set()
        for j, market in enumerate(brand.get("markets") or []):
            slice_ = slice_parse(
                market=market["market"],
                language_code=market["languageCode"],
                prefix=f"brands[{i}].markets[{j}].",
            )
            key = (slice_.geo_target_id, slice_.language_code)
            if key in seen:
                raise InvalidRequestError(
                    f"brands[{i}].markets: {market['market']}/"
                    f"{slice_.language_code} is listed twice.",
                    details={"field": f"brands[{i}].markets"},
                )
            seen.add(key)
            plans.append(MarketPlan(slice=slice_, name=market.get("name")))
        # The brand's fields by the model's names (api.brands.BrandFieldsSerializer).
        parsed.append(OnboardingBrand(**{**brand, "markets": plans}))
    return parsed


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
        "`brandExists`, alone. An organization's items in progress are capped (5,000 unless an "
        "operator set its own cap) and one onboarding holds at most 5,000 markets in all: past "
        "either → 429 `onboardingLimit` with `Retry-After`, nothing written. Poll `Location`.",
        body=OnboardingCreateSerializer,
        examples={"Two brands": ex.ONBOARDING_CREATE},
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
        # Cheap refusals first: the markets in all are counted before any member is validated.
        onboarding_markets_check(_markets_given(request.data))
        onboarding = onboarding_begin(
            organization=self.scope.organization,
            brands=_brands_input(self.body(request)["brands"]),
        )
        return Response(
            OnboardingAcceptedSerializer(onboarding).data,
            status=202,
            headers={
                "Location": onboarding_location(onboarding),
                "Retry-After": str(RETRY_AFTER_SECONDS),
            },
        )


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
