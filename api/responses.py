"""The output serializers several routes share (SPEC §4): the error envelope, a market, the
answers of the flows (which a job's result and an activation's markets carry too). A route's
own answers are beside its view (api.brands, api.serenity_routes, api.jobs, …). The OpenAPI
document describes the classes the routes' declarations name (api.routes), so what is
documented is what is rendered. The job and onboarding documents, which webhook events carry
too, are in `provisioning.serializers`.

They read models and the selectors' and flows' values; they decide nothing. Field order is
the order of the answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import SkipField, get_attribute

from jobs import exceptions as job_errors
from jobs.models import JobStatus
from kernel import errors as kernel_errors
from kernel.errors import DomainError
from provisioning import exceptions as provisioning_errors
from provisioning.models import AttemptReason
from provisioning.reconcile import exceptions as reconcile_errors
from provisioning.reconcile.models import DriftKind
from provisioning.reconcile.selectors import drift_of
from provisioning.serializers import OpenCodeField, job_type_field
from serenity import exceptions as serenity_errors
from serenity.models import BrandStatus, Market, MarketStatus
from serenity.slices import country_for_geo_target_id
from webhooks import exceptions as webhook_errors

NEXT_CURSOR_HELP = "Pass as `?cursor=` for the next page; null on the last page."

# Codes of the errors that are not a class of ours: DRF's refusals as the exception handler
# names them (api.errors), the request limits of the WSGI and middleware layers
# (kernel.request_limits), and a database that refuses connections (api.database_unavailable).
FRAMEWORK_ERROR_CODES = [
    "authenticationRequired",
    "unsupportedMediaType",
    "methodNotAllowed",
    "notAcceptable",
    "rateLimited",
    "requestTooLarge",
    "lengthRequired",
    "databaseUnavailable",
]
# Every `error` an envelope can carry: the codes of the domain error classes of every app, and
# the framework's.
ERROR_CODES = sorted(
    {
        *FRAMEWORK_ERROR_CODES,
        *(
            error.code
            for module in (
                kernel_errors,
                serenity_errors,
                provisioning_errors,
                reconcile_errors,
                job_errors,
                webhook_errors,
            )
            for error in vars(module).values()
            if isinstance(error, type) and issubclass(error, DomainError)
        ),
    }
)


class PresentOnlyMixin:
    """An optional field that may hold null: left out of the answer when the body has no such
    key, null when it holds null (DRF alone would show an absent nullable key as null)."""

    source: str | None

    def get_attribute(self, instance: Any) -> Any:
        if isinstance(instance, Mapping) and self.source not in instance:
            raise SkipField()
        return super().get_attribute(instance)  # type: ignore[misc]


class PresentOnlyUUIDField(PresentOnlyMixin, serializers.UUIDField):
    pass


class PresentOnlyURLField(PresentOnlyMixin, serializers.URLField):
    pass


class ErrorDetailsSerializer(serializers.Serializer):
    field = serializers.CharField(
        required=False, help_text="The refused field, e.g. `brands[3].markets[0].market`."
    )
    jobId = PresentOnlyUUIDField(  # noqa: N815
        required=False,
        allow_null=True,
        help_text="`semrush_provisioning_in_progress`: the brand's job in progress, to poll.",
    )
    onboardingId = PresentOnlyUUIDField(  # noqa: N815
        required=False,
        help_text="`onboardingInProgress`: the onboarding (or redrive) still running.",
    )
    reconciliationId = PresentOnlyUUIDField(  # noqa: N815
        required=False,
        allow_null=True,
        help_text="`reconciliationInProgress`: the organization's reconciliation in progress.",
    )


class ErrorEnvelopeSerializer(serializers.Serializer):
    """Renders `DomainError.as_body()`: `details` only when the error has some."""

    error = OpenCodeField(
        known=ERROR_CODES, schema_name="ErrorCode", help_text="A stable machine code."
    )
    message = serializers.CharField(
        help_text="One line, at most 500 characters; never upstream text, URLs or ids."
    )
    details = ErrorDetailsSerializer(required=False)


# --- Brands and markets ---------------------------------------------------------------------


class ProvisioningErrorSerializer(serializers.Serializer):
    code = OpenCodeField(
        known=AttemptReason.values,
        schema_name="ProvisioningErrorCode",
        help_text="Why the latest attempt failed.",
    )
    message = serializers.CharField()


class PublishErrorSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text=(
            "`publishFailed`, `publishTimeout`, or the error code of the upstream call that "
            "failed on the way (e.g. `quotaExceeded`, `serenityUpstreamError`); more may come."
        )
    )
    message = serializers.CharField()


class FromContextMixin:
    """A field whose value is handed to the serializer beside the instance, in `context` (the
    job of a 202 and the market of a 201 are not attributes of the brand): `source` is looked
    up there. Left out of the answer when the context does not have it."""

    source_attrs: list[str]
    context: Mapping[str, Any]

    def get_attribute(self, instance: Any) -> Any:
        try:
            return get_attribute(self.context, self.source_attrs)
        except KeyError:
            raise SkipField() from None


class CountryField(serializers.CharField):
    """A market's ISO 3166-1 alpha-2 country, from its geoTargetId."""

    def to_representation(self, value: int) -> str | None:  # type: ignore[override]
        return country_for_geo_target_id(value)


class DriftSerializer(serializers.Serializer):
    """What Semrush changed behind the service's back (SPEC §13.1), as last detected."""

    kind = OpenCodeField(known=DriftKind.values, schema_name="DriftKind", help_text="What drifted.")
    detectedAt = serializers.DateTimeField()  # noqa: N815


class MarketSerializer(serializers.Serializer):
    brandId = serializers.UUIDField(source="brand_id")  # noqa: N815
    market = CountryField(
        source="geo_target_id", allow_null=True, help_text="ISO 3166-1 alpha-2, upper case."
    )
    geoTargetId = serializers.IntegerField(  # noqa: N815
        source="geo_target_id", help_text="2000 + ISO numeric, e.g. 2840."
    )
    languageCode = serializers.CharField(source="language_code")  # noqa: N815
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=MarketStatus.choices)
    semrushProjectId = serializers.CharField(  # noqa: N815
        source="semrush_project_id", allow_null=True
    )
    workspaceId = serializers.CharField(source="workspace_id", allow_null=True)  # noqa: N815
    publishError = serializers.SerializerMethodField(  # noqa: N815
        help_text=(
            "Why the market's last publish did not end live (`status` `publish_failed`): "
            "`publishFailed` (Semrush could not publish it) or `publishTimeout`; null "
            "otherwise. A later create of the slice publishes it again."
        )
    )
    drift = serializers.SerializerMethodField(
        help_text="The market's project drifted from the record (a reconciliation found it): "
        "null when it did not, or once it was repaired."
    )
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815
    updatedAt = serializers.DateTimeField(source="updated_at")  # noqa: N815

    @extend_schema_field(DriftSerializer(allow_null=True))
    def get_drift(self, market: Market) -> dict[str, Any] | None:
        drift = drift_of(market.drifts, market_level=True)
        return None if drift is None else DriftSerializer(drift).data

    @extend_schema_field(PublishErrorSerializer(allow_null=True))
    def get_publishError(self, market: Market) -> dict[str, str] | None:  # noqa: N802
        error = market.publish_error
        if market.status != MarketStatus.PUBLISH_FAILED or not error:
            return None
        return PublishErrorSerializer(error).data


@extend_schema_field(MarketSerializer)
class ContextMarketSerializer(FromContextMixin, MarketSerializer):
    pass


class ContextUUIDField(FromContextMixin, serializers.UUIDField):
    pass


class ContextChoiceField(FromContextMixin, serializers.ChoiceField):
    pass


# --- Answers of the flows (`provisioning.outcome.Outcome.body`) -------------------------------


class JobAcceptedSerializer(serializers.Serializer):
    """202 of an async request: the job just started."""

    jobId = serializers.UUIDField(source="pk")  # noqa: N815
    jobType = job_type_field(source="job_type")  # noqa: N815
    status = serializers.ChoiceField(choices=JobStatus.choices, help_text="Always `IN_PROGRESS`.")


class MarketCreatedSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    geoTargetId = serializers.IntegerField()  # noqa: N815
    languageCode = serializers.CharField()  # noqa: N815
    workspaceId = serializers.CharField()  # noqa: N815
    projectId = serializers.CharField()  # noqa: N815
    published = serializers.BooleanField()


class MarketAnswerField(serializers.JSONField):
    """What a market create would have answered for this market: a `MarketCreated` body or an
    error envelope (documented as either: `api.schemas.extensions`)."""


class ActivatedMarketSerializer(serializers.Serializer):
    market = serializers.CharField(help_text="ISO 3166-1 alpha-2, upper case.")
    languageCode = serializers.CharField()  # noqa: N815
    status = serializers.IntegerField(
        help_text="This market's own HTTP-like status: 201 created, 409 already live, 4xx/5xx."
    )
    body = MarketAnswerField()


class ActivateAnswerSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    status = serializers.ChoiceField(choices=[BrandStatus.ACTIVE, BrandStatus.PENDING])
    baseUrl = PresentOnlyURLField(  # noqa: N815
        required=False, allow_null=True, help_text="Project activation (branch C) only."
    )
    markets = ActivatedMarketSerializer(
        many=True, help_text="Empty for branches A and B; one entry per market for branch C."
    )


class RepairedMarketSerializer(serializers.Serializer):
    marketId = serializers.UUIDField()  # noqa: N815
    kind = OpenCodeField(
        known=DriftKind.values, schema_name="DriftKind", help_text="The drift it mended."
    )
    repaired = serializers.BooleanField()
    error = PublishErrorSerializer(allow_null=True)


class RepairAnswerSerializer(serializers.Serializer):
    """A `repairBrand` job's answer (SPEC §13.1): each market it repaired, or why not."""

    brandId = serializers.UUIDField()  # noqa: N815
    markets = RepairedMarketSerializer(many=True)


class ActivationIncompleteSerializer(serializers.Serializer):
    """502 on activate: the error envelope; for `serenityActivationIncomplete` (the workspace
    exists but the status write failed) with the brand's fields around it."""

    brandId = serializers.UUIDField(required=False)  # noqa: N815
    status = serializers.ChoiceField(
        choices=[BrandStatus.ACTIVE, BrandStatus.PENDING], required=False
    )
    error = OpenCodeField(
        known=ERROR_CODES, schema_name="ErrorCode", help_text="A stable machine code."
    )
    message = serializers.CharField()
    details = ErrorDetailsSerializer(required=False)
    markets = ActivatedMarketSerializer(many=True, required=False)


class PromptsAnswerSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    skipped = serializers.IntegerField()
    failed = serializers.IntegerField()


class WorkspaceReadySerializer(serializers.Serializer):
    """The result body of an async bare brand create: its workspace is ready."""

    brandId = serializers.UUIDField()  # noqa: N815
    provisioningStatus = serializers.ChoiceField(choices=["ready"])  # noqa: N815


# --- Jobs and languages -------------------------------------------------------------------------


class DeactivateAnswerSerializer(serializers.Serializer):
    """A deactivate's answer (and its job's `result.body`, sync or async)."""

    brandId = serializers.UUIDField()  # noqa: N815
    status = serializers.ChoiceField(
        choices=[BrandStatus.ACTIVE, BrandStatus.PENDING], help_text="Always `pending`."
    )
