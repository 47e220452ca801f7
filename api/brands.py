"""Brand routes: list, create, read, update (SPEC §4, §4.1)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api import schemas
from api.base import OrgScopedView
from api.jobs import accepted_headers
from api.pagination import PageQuerySerializer
from api.responses import (
    BrandAcceptedSerializer,
    BrandCreatedSerializer,
    BrandListSerializer,
    BrandSerializer,
)
from api.serializers import BrandCreateSerializer, BrandUpdateSerializer
from provisioning import selectors
from provisioning.flows.brand_create import BrandInput, brand_create
from provisioning.flows.common import MarketPlan
from serenity import services
from serenity.models import BrandStatus
from serenity.slices import slice_parse


class BrandListQuerySerializer(PageQuerySerializer):
    status = serializers.ChoiceField(choices=BrandStatus.choices, required=False)


def _brand_input(data: dict[str, Any]) -> BrandInput:
    market = data.get("semrushMarket")
    return BrandInput(
        name=data["name"],
        status=data.get("status"),
        base_url=data.get("baseUrl"),
        urls=data.get("urls") or [],
        aliases=data.get("aliases") or [],
        market=MarketPlan(
            slice=slice_parse(
                market=market["market"],
                language_code=market["languageCode"],
                prefix="semrushMarket.",
            ),
            name=market.get("name"),
        )
        if market
        else None,
    )


class BrandCollectionView(OrgScopedView):
    query_serializers = {"GET": BrandListQuerySerializer}

    @schemas.brand_list_schema
    def get(self, request: Request, org_id: str) -> Response:
        query = self.query_parse(request)
        page = selectors.brand_list(
            organization=self.scope.organization,
            status=query.get("status"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        return Response(BrandListSerializer(page).data)

    @schemas.brand_create_schema
    def post(self, request: Request, org_id: str) -> Response:
        body = BrandCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        created = brand_create(
            organization=self.scope.organization,
            data=_brand_input(body.validated_data),
            run_async=body.validated_data["run_async"],
        )
        if created.job is not None:
            # Accepted: the brand as inserted with its pending attempt (no re-read).
            accepted = BrandAcceptedSerializer(created.brand, context={"job": created.job})
            return Response(accepted.data, status=202, headers=accepted_headers(created.job))
        brand = selectors.brand_get(brand_id=created.brand.pk)
        market = {"market": created.market} if created.market is not None else {}
        return Response(BrandCreatedSerializer(brand, context=market).data, status=201)


class BrandDetailView(OrgScopedView):
    @schemas.brand_get_schema
    def get(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        return Response(BrandSerializer(selectors.brand_get(brand_id=self.scope.brand.pk)).data)

    @schemas.brand_update_schema
    def patch(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        body = BrandUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.brand_update(brand=self.scope.brand, changes=body.validated_data)
        return Response(BrandSerializer(selectors.brand_get(brand_id=self.scope.brand.pk)).data)
