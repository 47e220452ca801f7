"""Brand routes: list, create, read, update (SPEC §4, §4.1)."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.jobs import accepted_headers
from api.pagination import PageQuerySerializer, status_query
from api.responses import (
    BrandAcceptedSerializer,
    BrandCreatedSerializer,
    BrandListSerializer,
    BrandSerializer,
)
from api.routes import SETTLE, UPSTREAM, accepted, answer, route
from api.schemas import examples as ex
from api.serializers import BrandCreateSerializer, BrandUpdateSerializer
from provisioning import selectors
from provisioning.exceptions import (
    AmbiguousWorkspaceError,
    NoParentWorkspaceError,
    PublishFailedError,
    QuotaExceededError,
    WorkspaceNotEmptyError,
)
from provisioning.flows.brand_create import BrandInput, brand_create
from provisioning.flows.common import MarketPlan
from serenity import services
from serenity.exceptions import (
    BaseUrlRequiredError,
    BrandExistsError,
    SerenityNotEnabledError,
    SliceExistsError,
    UnknownLanguageError,
    UnknownMarketError,
)
from serenity.models import BrandStatus
from serenity.slices import slice_parse


class BrandListQuerySerializer(PageQuerySerializer):
    status = status_query(
        BrandStatus.choices, "Only brands in this status (default: every status but `deleted`)"
    )


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
    @route(
        operation_id="brandList",
        tag="brands",
        summary="List brands",
        description="By name; excludes `deleted` brands unless `status=deleted` is asked for.",
        query=BrandListQuerySerializer,
        answers={
            200: answer(
                BrandListSerializer,
                "A page of brands by name, then id.",
                {"A page": {"brands": [ex.BRAND], "nextCursor": ex.CURSOR}},
            )
        },
    )
    def get(self, request: Request, org_id: str) -> Response:
        query = self.query_parse(request)
        page = selectors.brand_list(
            organization=self.scope.organization,
            status=query.get("status"),
            cursor=query["cursor"],
            limit=query["limit"],
        )
        return Response(BrandListSerializer(page).data)

    @route(
        operation_id="brandCreate",
        tag="brands",
        summary="Create a brand (optionally with an initial market), sync or async",
        description="The stored status is `active` when `baseUrl` is given, else `pending`; "
        '`"status": "pending"` makes a draft (no provisioning; `async` ignored). In a Serenity '
        "org the brand's sub-workspace is created or adopted and, with `semrushMarket`, that "
        "market's project is created and published (201 with `market`); elsewhere a plain row "
        "is created (`semrushMarket` → 403 `serenityNotEnabled`). `async: true` → 202 with the "
        "brand payload plus `jobId` and `jobStatus`.",
        body=BrandCreateSerializer,
        examples={"Async create with a market": ex.BRAND_CREATE},
        answers={
            201: answer(
                BrandCreatedSerializer,
                "Created (and provisioned, sync).",
                {"Created with a market": {**ex.BRAND, "market": ex.MARKET}},
            ),
            202: accepted(BrandAcceptedSerializer, ex.BRAND_ACCEPTED),
        },
        raises=[
            BaseUrlRequiredError,
            UnknownMarketError,
            UnknownLanguageError,
            SerenityNotEnabledError,
            NoParentWorkspaceError,
            BrandExistsError,
            SliceExistsError,
            QuotaExceededError,
            AmbiguousWorkspaceError,
            WorkspaceNotEmptyError,
            *UPSTREAM,
            *SETTLE,
            PublishFailedError,
        ],
    )
    def post(self, request: Request, org_id: str) -> Response:
        data = self.body(request)
        created = brand_create(
            organization=self.scope.organization,
            data=_brand_input(data),
            run_async=data["run_async"],
        )
        if created.job is not None:
            # Accepted: the brand as inserted with its pending attempt (no re-read).
            accepted = BrandAcceptedSerializer(created.brand, context={"job": created.job})
            return Response(accepted.data, status=202, headers=accepted_headers(created.job))
        brand = selectors.brand_get(brand_id=created.brand.pk)
        market = {"market": created.market} if created.market is not None else {}
        return Response(BrandCreatedSerializer(brand, context=market).data, status=201)


class BrandDetailView(OrgScopedView):
    @route(
        operation_id="brandGet",
        tag="brands",
        summary="Read a brand",
        description="The brand payload, with `semrushProvisioningStatus` and "
        "`semrushProvisioningError` so a client can tell when a workspace is being provisioned.",
        answers={200: answer(BrandSerializer, "The brand.", {"A brand": ex.BRAND})},
    )
    def get(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        return Response(BrandSerializer(selectors.brand_get(brand_id=self.scope.brand.pk)).data)

    @route(
        operation_id="brandUpdate",
        tag="brands",
        summary="Update baseUrl, urls, aliases, serenityEnabled (no upstream call)",
        description="Changes only the fields given; `serenityEnabled: null` inherits the "
        "organization's flag. Never calls Semrush.",
        body=BrandUpdateSerializer,
        examples={"New aliases": {"aliases": ["ACME Corp", "Acme Inc"]}},
        answers={
            200: answer(
                BrandSerializer,
                "The updated brand.",
                {"Updated": {**ex.BRAND, "aliases": ["ACME Corp", "Acme Inc"]}},
            )
        },
    )
    def patch(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        services.brand_update(brand=self.scope.brand, changes=self.body(request))
        return Response(BrandSerializer(selectors.brand_get(brand_id=self.scope.brand.pk)).data)
