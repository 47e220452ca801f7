"""`B/serenity/*` routes: markets, activate, deactivate, languages (SPEC §4.2 to §4.4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView, SerenityView
from api.fields import (
    ActivateMarketSerializer,
    BodyObjectSerializer,
    BoundedListField,
    BrandNameField,
    HostField,
    LanguageCodeField,
    MarketField,
    StrictCharField,
)
from api.jobs import accepted_headers
from api.pagination import PageQuerySerializer
from api.responses import (
    NEXT_CURSOR_HELP,
    ActivateAnswerSerializer,
    ActivationIncompleteSerializer,
    DeactivateAnswerSerializer,
    ErrorEnvelopeSerializer,
    JobAcceptedSerializer,
    MarketCreatedSerializer,
    MarketSerializer,
)
from api.routes import SETTLE, UPSTREAM, accepted, answer, route
from api.schemas import examples as ex
from kernel.errors import InvalidRequestError
from provisioning.catalogue import languages_list
from provisioning.exceptions import (
    ActivationIncompleteError,
    AmbiguousWorkspaceError,
    NoParentWorkspaceError,
    ProvisioningIncompleteError,
    ProvisioningInProgressError,
    PublishFailedError,
    QueuedMarketsLimitError,
    QuotaExceededError,
    SubworkspaceGoneError,
    WorkspaceMisconfiguredError,
    WorkspaceNotEmptyError,
)
from provisioning.flows.activate import activate
from provisioning.flows.common import MarketPlan
from provisioning.flows.deactivate import deactivate, market_delete
from provisioning.flows.market_create import market_create
from provisioning.outcome import Accepted, Outcome
from serenity.exceptions import (
    BaseUrlRequiredError,
    MarketBusyError,
    MarketNotFoundError,
    SliceExistsError,
    UnknownLanguageError,
    UnknownMarketError,
)
from serenity.models import Market
from serenity.selectors import market_list
from serenity.slices import normalize_language, slice_parse

# --- Bodies and answers -------------------------------------------------------------------------


def _brand_names_field() -> BoundedListField:
    return BoundedListField(
        child=BrandNameField(max_length=200),
        required=False,
        allow_empty=False,
        min_length=1,
        max_length=50,
    )


class MarketCreateSerializer(BodyObjectSerializer):
    market = MarketField()
    languageCode = LanguageCodeField()  # noqa: N815
    name = StrictCharField(required=False, max_length=200)
    brandNames = _brand_names_field()  # noqa: N815
    brandDomain = HostField(required=False, max_length=253)  # noqa: N815

    def validate_brandNames(self, value: list[str]) -> list[str]:  # noqa: N802
        if any(not v.strip() for v in value):
            raise serializers.ValidationError("must be non-empty strings.")
        return [v.strip() for v in value]


class ActivateSerializer(BodyObjectSerializer):
    brandDomain = HostField(required=False, max_length=253)  # noqa: N815
    brandNames = _brand_names_field()  # noqa: N815
    markets = BoundedListField(
        child=ActivateMarketSerializer(),
        required=False,
        allow_empty=False,
        min_length=1,
        max_length=settings.SERENITY_MAX_ACTIVATE_MARKETS,
        error_messages={"max_length": "at most {max_length} markets per request."},
    )


class MarketListSerializer(serializers.Serializer):
    items = MarketSerializer(many=True)
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


class LanguageSerializer(serializers.Serializer):
    id = serializers.CharField()
    code = serializers.CharField()


class LanguageListSerializer(serializers.Serializer):
    items = LanguageSerializer(many=True)


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
    @route(
        operation_id="marketList",
        tag="markets",
        summary="List the brand's markets",
        description="The brand's markets that are not deleted, by geoTargetId then languageCode.",
        query=PageQuerySerializer,
        answers={
            200: answer(
                MarketListSerializer,
                "A page of markets.",
                {"The last page": {"items": [ex.MARKET], "nextCursor": None}},
            )
        },
    )
    def get(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        query = self.query_parse(request)
        page = market_list(brand=self.scope.brand, cursor=query["cursor"], limit=query["limit"])
        return Response(MarketListSerializer(page).data)

    @route(
        operation_id="marketCreate",
        tag="markets",
        summary="Create a market, sync or async",
        description="Creates (or resumes a draft of) the slice's project, sets its tracked URL "
        "and publishes it: in the brand's sub-workspace, or in the organization's parent for a "
        "flat brand. `brandNames` defaults to the brand's name and aliases, `brandDomain` to the "
        "host of `baseUrl`. `async: true` → 202 `{jobId, jobType, status}`.",
        body=MarketCreateSerializer,
        examples={"Async create": {"market": "US", "languageCode": "en", "async": True}},
        answers={
            201: answer(
                MarketCreatedSerializer, "Created and published.", {"Created": ex.MARKET_CREATED}
            ),
            202: accepted(JobAcceptedSerializer, ex.JOB_ACCEPTED),
        },
        raises=[
            UnknownMarketError,
            UnknownLanguageError,
            NoParentWorkspaceError,
            SliceExistsError,
            QueuedMarketsLimitError,
            WorkspaceMisconfiguredError,
            ProvisioningIncompleteError,
            QuotaExceededError,
            ProvisioningInProgressError,
            *UPSTREAM,
            *SETTLE,
            SubworkspaceGoneError,
            PublishFailedError,
        ],
    )
    def post(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        data = self.body(request)
        plan = MarketPlan(
            slice=slice_parse(market=data["market"], language_code=data["languageCode"]),
            name=data.get("name"),
            brand_names=data.get("brandNames"),
            brand_domain=data.get("brandDomain"),
        )
        created = market_create(brand=self.scope.brand, plan=plan, run_async=data["run_async"])
        response = render(created, MARKET_CREATED)
        if response.status_code == 201:
            body = response.data
            brand = self.scope.brand
            response["Location"] = (
                f"/v2/orgs/{brand.organization_id}/brands/{brand.pk}/serenity/markets/"
                f"{body['geoTargetId']}/{body['languageCode']}"
            )
        return response


class MarketDetailView(SerenityView):
    def _market(self, geo_target_id: str, language_code: str) -> Market | None:
        return Market.objects.filter(
            brand=self.scope.brand,
            geo_target_id=int(geo_target_id),
            language_code=language_code.lower(),
            deleted_at__isnull=True,
        ).first()

    @route(
        operation_id="marketGet",
        tag="markets",
        summary="Read one market",
        description="One market by slice; none → 404 `marketNotFound`.",
        answers={200: answer(MarketSerializer, "The market.", {"A market": ex.MARKET})},
        raises=[MarketNotFoundError],
    )
    def get(
        self, request: Request, org_id: str, brand_id: str, geo_target_id: str, language_code: str
    ) -> Response:
        market = self._market(geo_target_id, language_code)
        if market is None:
            raise MarketNotFoundError()
        return Response(MarketSerializer(market).data)

    @route(
        operation_id="marketDelete",
        tag="markets",
        summary="Delete a market (idempotent)",
        description="Deletes the upstream project (an upstream 404 counts as done), then "
        "tombstones the market; no market → 204. Any other upstream failure → 502 and the market "
        "is kept; a market still being created → 409 `marketBusy`.",
        answers={204: answer(None, "Deleted, or there was no such market.")},
        raises=[MarketBusyError, *UPSTREAM],
    )
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
    @route(
        operation_id="brandActivate",
        tag="activation",
        summary="Activate a brand or its markets, sync or async",
        description="The branch comes from the stored brand: A `pending` → `active`; B bare "
        "re-activation (`active`, no `brandDomain`); C project activation (`active` with "
        "`brandDomain`). An empty or absent body is valid.",
        body=ActivateSerializer,
        examples={"Project activation": ex.ACTIVATE},
        answers={
            200: answer(
                ActivateAnswerSerializer,
                "Active (every market live).",
                {"Project activation": ex.ACTIVATED},
            ),
            202: accepted(JobAcceptedSerializer, ex.JOB_ACCEPTED),
            207: answer(
                ActivateAnswerSerializer,
                "B: the status write failed; C: some markets are not live.",
                {"A market failed": ex.ACTIVATED_PARTLY},
            ),
            502: answer(
                ActivationIncompleteSerializer,
                "Error envelope; `error` is one of `serenityActivationIncomplete` "
                "(with `brandId`, `status`, `markets`), `serenityUpstreamError`, "
                "`subworkspaceCreationFailed`, `subworkspaceGone`, `workspaceNotEmpty`.",
                {"502 serenityActivationIncomplete": ex.ACTIVATION_INCOMPLETE},
            ),
        },
        raises=[
            QueuedMarketsLimitError,
            ActivationIncompleteError,
            BaseUrlRequiredError,
            UnknownMarketError,
            UnknownLanguageError,
            ProvisioningInProgressError,
            NoParentWorkspaceError,
            AmbiguousWorkspaceError,
            WorkspaceMisconfiguredError,
            *UPSTREAM,
            *SETTLE,
            SubworkspaceGoneError,
            WorkspaceNotEmptyError,
        ],
    )
    def post(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        # An absent body parses as {}; `null`, a list or a string is not a JSON object: 400.
        data = self.body(request)
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

    @route(
        operation_id="brandDeactivate",
        tag="activation",
        summary="Decommission the brand's Semrush objects",
        description="Cancels the brand's pending provisioning work, deletes every project in "
        "its sub-workspace (never the workspace itself), clears the pointer, tombstones the "
        "markets and sets the brand `pending`. A failure → 502 with the pointer and status "
        "untouched.",
        answers={
            200: answer(
                DeactivateAnswerSerializer,
                "Decommissioned.",
                {"Deactivated": {"brandId": ex.BRAND_ID, "status": "pending"}},
            )
        },
        # a flat brand's projects are in the parent; a pointer equal to the parent is refused
        raises=[
            ProvisioningInProgressError,
            NoParentWorkspaceError,
            WorkspaceMisconfiguredError,
            *UPSTREAM,
        ],
    )
    def post(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        return render(deactivate(brand=self.scope.brand), DEACTIVATED)


class LanguagesView(OrgScopedView):
    @route(
        operation_id="languageList",
        tag="languages",
        summary="The upstream language catalogue (cached)",
        description="The languages Semrush accepts for markets, from a cached catalogue.",
        answers={
            200: answer(
                LanguageListSerializer,
                "The catalogue.",
                {"Languages": {"items": [{"id": "1", "code": "en"}, {"id": "7", "code": "de"}]}},
            )
        },
        raises=UPSTREAM,
    )
    def get(self, request: Request, org_id: str) -> Response:
        items = languages_list(organization=self.scope.organization)
        return Response(LanguageListSerializer({"items": items}).data)
