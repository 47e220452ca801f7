"""Brand routes: list, create, read, update (SPEC §4, §4.1), with their bodies and answers.

A brand's writable fields are declared once (`BrandFieldsSerializer`, by the model's names): a
create, an update and an onboarding item (api.onboarding_serializers) take them, and the flows
and `serenity.services.brand_update` receive them as they are."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.fields import (
    BodyObjectSerializer,
    BoundedListField,
    BrandNameField,
    HttpUrlField,
    LanguageCodeField,
    MarketField,
    StrictCharField,
)
from api.jobs import accepted_headers
from api.pagination import PageQuerySerializer, status_query
from api.responses import (
    NEXT_CURSOR_HELP,
    ContextChoiceField,
    ContextMarketSerializer,
    ContextUUIDField,
    DriftSerializer,
    ProvisioningErrorSerializer,
)
from api.routes import SETTLE, UPSTREAM, accepted, answer, route
from api.schemas import examples as ex
from jobs.models import JobStatus
from provisioning import selectors
from provisioning.exceptions import (
    AmbiguousWorkspaceError,
    NoParentWorkspaceError,
    PublishFailedError,
    QueuedMarketsLimitError,
    QuotaExceededError,
    WorkspaceNotEmptyError,
)
from provisioning.flows.brand_create import BrandInput, brand_create
from provisioning.flows.common import MarketPlan
from provisioning.reconcile.selectors import drift_of
from provisioning.selectors import brand_provisioning_state
from serenity import services
from serenity.exceptions import (
    BaseUrlRequiredError,
    BrandExistsError,
    SerenityNotEnabledError,
    SliceExistsError,
    UnknownLanguageError,
    UnknownMarketError,
)
from serenity.models import Brand, BrandStatus
from serenity.slices import slice_parse

# --- Bodies -------------------------------------------------------------------------------------


# A brand's writable fields (sources: the model's names); an update leaves out `name`. No
# docstring: the document would show it as the description of every body that inherits them.
class BrandFieldsSerializer(serializers.Serializer):
    name = BrandNameField(max_length=200)
    baseUrl = HttpUrlField(  # noqa: N815
        source="base_url", required=False, allow_null=True, max_length=2000
    )
    urls = BoundedListField(child=HttpUrlField(max_length=2000), required=False, max_length=100)
    aliases = BoundedListField(child=BrandNameField(max_length=200), required=False, max_length=100)

    def validate_name(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank.")
        return value.strip()


class SemrushMarketSerializer(serializers.Serializer):
    market = MarketField()
    languageCode = LanguageCodeField()  # noqa: N815
    name = StrictCharField(required=False, max_length=200)


class BrandCreateSerializer(BodyObjectSerializer, BrandFieldsSerializer):
    status = serializers.ChoiceField(
        choices=[BrandStatus.ACTIVE, BrandStatus.PENDING], required=False
    )
    semrushMarket = SemrushMarketSerializer(  # noqa: N815
        source="market", required=False, allow_null=True
    )


class BrandUpdateSerializer(BrandFieldsSerializer):
    name = None  # type: ignore[assignment]  # a brand is not renamed (DRF: None drops it)
    serenityEnabled = serializers.BooleanField(  # noqa: N815
        source="serenity_enabled", required=False, allow_null=True
    )

    def to_internal_value(self, data: Any) -> Any:
        value = data.get("serenityEnabled") if isinstance(data, dict) else None
        if value is not None and not isinstance(value, bool):
            raise serializers.ValidationError(
                {"serenityEnabled": ["must be a JSON boolean or null."]}
            )
        return super().to_internal_value(data)


class BrandListQuerySerializer(PageQuerySerializer):
    status = status_query(
        BrandStatus.choices, "Only brands in this status (default: every status but `deleted`)"
    )
    drift = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="`true`: only brands with drift, the brand's own or one of its markets'.",
    )


# --- Answers ------------------------------------------------------------------------------------


class BrandSerializer(serializers.Serializer):
    """A brand read by the brand selectors (`provisioning.selectors`), which annotate its
    latest attempt: its provisioning state (SPEC §6.5) is derived from that, with no query."""

    id = serializers.UUIDField()
    organizationId = serializers.UUIDField(source="organization_id")  # noqa: N815
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=BrandStatus.choices)
    baseUrl = serializers.URLField(source="base_url", allow_null=True)  # noqa: N815
    urls = serializers.ListField(child=serializers.URLField())
    aliases = serializers.ListField(child=serializers.CharField())
    serenityEnabled = serializers.BooleanField(  # noqa: N815
        source="serenity_enabled",
        allow_null=True,
        help_text="The brand's override; null inherits the organization's flag.",
    )
    semrushSubWorkspaceId = serializers.CharField(  # noqa: N815
        source="semrush_sub_workspace_id", allow_null=True
    )
    semrushProvisioningStatus = serializers.SerializerMethodField(  # noqa: N815
        help_text="null: never provisioned, or deactivated."
    )
    semrushProvisioningError = serializers.SerializerMethodField(  # noqa: N815
        help_text="Set only when semrushProvisioningStatus is `failed`."
    )
    drift = serializers.SerializerMethodField(
        help_text="The brand's workspace drifted from the record (a reconciliation found it "
        "gone or failed upstream): null when it did not, or once it was repaired. A market's "
        "drift is on the market."
    )
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815
    updatedAt = serializers.DateTimeField(source="updated_at")  # noqa: N815

    @extend_schema_field(DriftSerializer(allow_null=True))
    def get_drift(self, brand: Brand) -> dict[str, Any] | None:
        drift = drift_of(brand.drifts, market_level=False)
        return None if drift is None else DriftSerializer(drift).data

    @extend_schema_field(
        serializers.ChoiceField(choices=["pending", "failed", "ready"], allow_null=True)
    )
    def get_semrushProvisioningStatus(self, brand: Brand) -> str | None:  # noqa: N802
        return brand_provisioning_state(brand).status

    @extend_schema_field(ProvisioningErrorSerializer(allow_null=True))
    def get_semrushProvisioningError(self, brand: Brand) -> dict[str, str] | None:  # noqa: N802
        error = brand_provisioning_state(brand).error
        return None if error is None else ProvisioningErrorSerializer(error).data


class _NewBrandDrift:
    @extend_schema_field(DriftSerializer(allow_null=True))
    def get_drift(self, brand: Brand) -> None:
        return None  # a brand just created has none (no query)


class BrandCreatedSerializer(_NewBrandDrift, BrandSerializer):
    """201 of a brand create; `context["market"]`: the market created with it, if any."""

    market = ContextMarketSerializer(
        required=False, help_text="Present when the request carried `semrushMarket`."
    )


class BrandAcceptedSerializer(_NewBrandDrift, BrandSerializer):
    """202 of an async brand create: the brand as inserted, and `context["job"]`, the job to
    poll."""

    jobId = ContextUUIDField(source="job.pk")  # noqa: N815
    jobStatus = ContextChoiceField(  # noqa: N815
        source="job.status", choices=JobStatus.choices, help_text="Always `IN_PROGRESS`."
    )


class BrandListSerializer(serializers.Serializer):
    brands = BrandSerializer(many=True, source="items")
    nextCursor = serializers.CharField(  # noqa: N815
        source="next_cursor", allow_null=True, help_text=NEXT_CURSOR_HELP
    )


# --- Routes -------------------------------------------------------------------------------------


def _brand_input(data: dict[str, Any]) -> BrandInput:
    """The validated body as the flow takes it: the brand's fields by the model's names, the
    market's slice parsed."""
    fields = {"status": None, "base_url": None, **data}
    fields.pop("run_async", None)
    market = fields.pop("market", None)
    return BrandInput(
        **fields,
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
            drift=query.get("drift"),
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
            QueuedMarketsLimitError,
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
        return Response(
            BrandCreatedSerializer(brand, context=market).data,
            status=201,
            headers={"Location": f"/v2/orgs/{brand.organization_id}/brands/{brand.pk}"},
        )


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
