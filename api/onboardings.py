"""Bulk onboarding routes (SPEC §11.2): accept, read with paginated items, list, cancel."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.response import Response

from api import schemas
from api.base import OrgScopedView
from api.onboarding_serializers import (
    OnboardingAcceptedSerializer,
    OnboardingCreateSerializer,
    OnboardingItemsQuerySerializer,
    OnboardingListQuerySerializer,
    OnboardingListSerializer,
    OnboardingSerializer,
)
from jobs.models import JobStatus
from kernel.errors import InvalidRequestError
from provisioning import selectors
from provisioning.flows.common import MarketPlan
from provisioning.flows.onboarding import OnboardingBrand, onboarding_begin, onboarding_cancel
from provisioning.models import Onboarding
from serenity.slices import slice_parse

# Polling an onboarding: a brand takes seconds to minutes, so every few seconds is enough.
RETRY_AFTER_SECONDS = 5


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
        parsed.append(
            OnboardingBrand(
                name=brand["name"],
                base_url=brand["baseUrl"],
                urls=brand.get("urls") or [],
                aliases=brand.get("aliases") or [],
                markets=plans,
            )
        )
    return parsed


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
    query_serializers = {"GET": OnboardingListQuerySerializer}

    @schemas.onboarding_list_schema
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

    @schemas.onboarding_create_schema
    def post(self, request: Request, org_id: str) -> Response:
        body = OnboardingCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        onboarding = onboarding_begin(
            organization=self.scope.organization,
            brands=_brands_input(body.validated_data["brands"]),
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
    query_serializers = {"GET": OnboardingItemsQuerySerializer}

    @schemas.onboarding_get_schema
    def get(self, request: Request, org_id: str, onboarding_id: str) -> Response:
        query = self.query_parse(request)
        onboarding = selectors.onboarding_get(
            organization=self.scope.organization, onboarding_id=uuid.UUID(onboarding_id)
        )
        return _document(
            onboarding, status=query.get("status"), cursor=query["cursor"], limit=query["limit"]
        )


class OnboardingCancelView(OrgScopedView):
    @schemas.onboarding_cancel_schema
    def post(self, request: Request, org_id: str, onboarding_id: str) -> Response:
        onboarding = selectors.onboarding_get(
            organization=self.scope.organization, onboarding_id=uuid.UUID(onboarding_id)
        )
        onboarding_cancel(onboarding=onboarding)
        onboarding.refresh_from_db()
        return _document(onboarding, cursor=None, limit=settings.SERENITY_PAGE_SIZE_DEFAULT)
