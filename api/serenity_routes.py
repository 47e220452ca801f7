"""`B/serenity/*` routes: markets, activate, deactivate, languages (SPEC §4.2 to §4.4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api import schemas
from api.base import OrgScopedView, SerenityView
from api.jobs import accepted_headers
from api.pagination import PageQuerySerializer
from api.responses import (
    ActivateAnswerSerializer,
    ActivationIncompleteSerializer,
    DeactivateAnswerSerializer,
    ErrorEnvelopeSerializer,
    JobAcceptedSerializer,
    LanguageListSerializer,
    MarketCreatedSerializer,
    MarketListSerializer,
    MarketSerializer,
)
from api.serializers import ActivateSerializer, MarketCreateSerializer
from kernel.errors import InvalidRequestError
from provisioning.catalogue import languages_list
from provisioning.flows.activate import activate
from provisioning.flows.common import MarketPlan
from provisioning.flows.deactivate import deactivate, market_delete
from provisioning.flows.market_create import market_create
from provisioning.outcome import Accepted, Outcome
from serenity.exceptions import MarketNotFoundError
from serenity.models import Market
from serenity.selectors import market_list
from serenity.slices import normalize_language, slice_parse

DEFAULT_ACTIVATE_MARKETS = [{"market": "US", "languageCode": "en"}]

Answers = Mapping[int, type[serializers.Serializer]]
MARKET_CREATED: Answers = {201: MarketCreatedSerializer}
ACTIVATED: Answers = {
    200: ActivateAnswerSerializer,
    207: ActivateAnswerSerializer,
    502: ActivationIncompleteSerializer,
}
DEACTIVATED: Answers = {200: DeactivateAnswerSerializer}


def render(result: Outcome | Accepted, answers: Answers) -> Response:
    """A flow's answer: the 202 of the job an async request started, or the outcome's body
    rendered by the serializer `answers` names for its status (an error status it does not
    name: the error envelope)."""
    if isinstance(result, Accepted):
        return Response(
            JobAcceptedSerializer(result.job).data,
            status=202,
            headers=accepted_headers(result.job),
        )
    serializer = answers.get(result.status, ErrorEnvelopeSerializer)
    return Response(serializer(result.body).data, status=result.status, headers=result.headers)


def _market_plans(
    items: list[dict[str, Any]], *, brand_names: list[str] | None, brand_domain: str | None
) -> list[MarketPlan]:
    plans = []
    seen = set()
    for index, item in enumerate(items):
        parsed = slice_parse(
            market=item["market"], language_code=item["languageCode"], prefix=f"markets[{index}]."
        )
        key = (parsed.geo_target_id, parsed.language_code)
        if key in seen:
            raise InvalidRequestError(
                f"markets[{index}]: duplicate market.", field=f"markets[{index}]"
            )
        seen.add(key)
        plans.append(
            MarketPlan(
                slice=parsed,
                name=item.get("name"),
                brand_names=brand_names,
                brand_domain=brand_domain,
            )
        )
    return plans


class MarketCollectionView(SerenityView):
    query_serializers = {"GET": PageQuerySerializer}

    @schemas.market_list_schema
    def get(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        query = self.query_parse(request)
        page = market_list(brand=self.scope.brand, cursor=query["cursor"], limit=query["limit"])
        return Response(MarketListSerializer(page).data)

    @schemas.market_create_schema
    def post(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        body = MarketCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        plan = MarketPlan(
            slice=slice_parse(market=data["market"], language_code=data["languageCode"]),
            name=data.get("name"),
            brand_names=data.get("brandNames"),
            brand_domain=data.get("brandDomain"),
        )
        created = market_create(brand=self.scope.brand, plan=plan, run_async=data["run_async"])
        return render(created, MARKET_CREATED)


class MarketDetailView(SerenityView):
    def _market(self, geo_target_id: str, language_code: str) -> Market | None:
        return Market.objects.filter(
            brand=self.scope.brand,
            geo_target_id=int(geo_target_id),
            language_code=language_code.lower(),
            deleted_at__isnull=True,
        ).first()

    @schemas.market_get_schema
    def get(
        self, request: Request, org_id: str, brand_id: str, geo_target_id: str, language_code: str
    ) -> Response:
        market = self._market(geo_target_id, language_code)
        if market is None:
            raise MarketNotFoundError()
        return Response(MarketSerializer(market).data)

    @schemas.market_delete_schema
    def delete(
        self, request: Request, org_id: str, brand_id: str, geo_target_id: str, language_code: str
    ) -> Response:
        assert self.scope.brand is not None
        market_delete(
            brand=self.scope.brand,
            geo_target_id=int(geo_target_id),
            language_code=normalize_language(language_code),
        )
        return Response(status=204)


class ActivateView(SerenityView):
    @schemas.activate_schema
    def post(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        # An absent body parses as {}; `null`, a list or a string is not a JSON object: 400.
        body = ActivateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        return render(
            activate(
                brand=self.scope.brand,
                brand_domain=data.get("brandDomain"),
                brand_names=data.get("brandNames"),
                plans=_market_plans(
                    data.get("markets") or DEFAULT_ACTIVATE_MARKETS,
                    brand_names=data.get("brandNames"),
                    brand_domain=data.get("brandDomain"),
                ),
                run_async=data["run_async"],
            ),
            ACTIVATED,
        )


class DeactivateView(OrgScopedView):
    serenity_route = True

    @schemas.deactivate_schema
    def post(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        return render(deactivate(brand=self.scope.brand), DEACTIVATED)


class LanguagesView(OrgScopedView):
    @schemas.language_list_schema
    def get(self, request: Request, org_id: str) -> Response:
        items = languages_list(organization=self.scope.organization)
        return Response(LanguageListSerializer({"items": items}).data)
