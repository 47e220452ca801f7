"""Documentation-only parts of the OpenAPI description: the extensions that describe our
authentication class and strict boolean field, and the response bodies.

The views render plain dicts built by `payloads.py`, `jobs.selectors.chain_payload` and the
orchestration outcomes, so the response serializers below are documentation only: nothing
validates or renders with them. Keep them in step with those builders (the OpenAPI test checks
the routes, not every field).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers

from jobs.models import JobStatus, JobStep, JobType
from serenity.models import BrandStatus, MarketStatus

# --- Extensions ------------------------------------------------------------------------------


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "serenity.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from `create_api_token`: `Authorization: Bearer <token>`.",
        }


class StrictBooleanFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "serenity.api.fields.StrictBooleanField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            **(build_basic_type(OpenApiTypes.BOOL) or {"type": "boolean"}),
            "description": "JSON `true` or `false` only: a string, number or null is "
            "400 `invalidRequest`.",
        }


# --- Response bodies (documentation only) ----------------------------------------------------


class ErrorEnvelopeSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A stable machine code, e.g. `brandNotFound`.")
    message = serializers.CharField(
        help_text="One line, at most 500 characters; never upstream text, URLs or ids."
    )
    details = serializers.DictField(
        required=False, help_text="Optional; e.g. `{field}` for `invalidRequest`."
    )


class ProvisioningErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class BrandSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    organizationId = serializers.UUIDField()  # noqa: N815
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=BrandStatus.choices)
    baseUrl = serializers.URLField(allow_null=True)  # noqa: N815
    urls = serializers.ListField(child=serializers.URLField())
    aliases = serializers.ListField(child=serializers.CharField())
    serenityEnabled = serializers.BooleanField(  # noqa: N815
        allow_null=True, help_text="The brand's override; null inherits the organization's flag."
    )
    semrushSubWorkspaceId = serializers.CharField(allow_null=True)  # noqa: N815
    semrushProvisioningStatus = serializers.ChoiceField(  # noqa: N815
        choices=["pending", "failed", "ready"],
        allow_null=True,
        help_text="null: never provisioned, or deactivated.",
    )
    semrushProvisioningError = ProvisioningErrorSerializer(  # noqa: N815
        allow_null=True, help_text="Set only when semrushProvisioningStatus is `failed`."
    )
    createdAt = serializers.DateTimeField()  # noqa: N815
    updatedAt = serializers.DateTimeField()  # noqa: N815


NEXT_CURSOR_HELP = "Pass as `?cursor=` for the next page; null on the last page."


class BrandListSerializer(serializers.Serializer):
    brands = BrandSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True, help_text=NEXT_CURSOR_HELP)  # noqa: N815


class MarketSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    market = serializers.CharField(allow_null=True, help_text="ISO 3166-1 alpha-2, upper case.")
    geoTargetId = serializers.IntegerField(help_text="2000 + ISO numeric, e.g. 2840.")  # noqa: N815
    languageCode = serializers.CharField()  # noqa: N815
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=MarketStatus.choices)
    semrushProjectId = serializers.CharField(allow_null=True)  # noqa: N815
    workspaceId = serializers.CharField(allow_null=True)  # noqa: N815
    createdAt = serializers.DateTimeField()  # noqa: N815
    updatedAt = serializers.DateTimeField()  # noqa: N815


class MarketListSerializer(serializers.Serializer):
    items = MarketSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True, help_text=NEXT_CURSOR_HELP)  # noqa: N815


class BrandCreatedSerializer(BrandSerializer):
    market = MarketSerializer(
        required=False, help_text="Present when the request carried `semrushMarket`."
    )


class BrandAcceptedSerializer(BrandSerializer):
    jobId = serializers.UUIDField()  # noqa: N815
    jobStatus = serializers.ChoiceField(  # noqa: N815
        choices=JobStatus.choices, help_text="Always `IN_PROGRESS`."
    )


class MarketCreatedSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    geoTargetId = serializers.IntegerField()  # noqa: N815
    languageCode = serializers.CharField()  # noqa: N815
    workspaceId = serializers.CharField()  # noqa: N815
    projectId = serializers.CharField()  # noqa: N815
    published = serializers.BooleanField()


class JobAcceptedSerializer(serializers.Serializer):
    jobId = serializers.UUIDField()  # noqa: N815
    jobType = serializers.ChoiceField(choices=JobType.choices)  # noqa: N815
    status = serializers.ChoiceField(choices=JobStatus.choices, help_text="Always `IN_PROGRESS`.")


class ActivatedMarketSerializer(serializers.Serializer):
    market = serializers.CharField(help_text="ISO 3166-1 alpha-2, upper case.")
    languageCode = serializers.CharField()  # noqa: N815
    status = serializers.IntegerField(
        help_text="This market's own HTTP-like status: 201 created, 409 already live, 4xx/5xx."
    )
    body = serializers.DictField(help_text="What a market create would have answered.")


class ActivateAnswerSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    status = serializers.ChoiceField(choices=[BrandStatus.ACTIVE, BrandStatus.PENDING])
    baseUrl = serializers.URLField(  # noqa: N815
        required=False, allow_null=True, help_text="Project activation (branch C) only."
    )
    markets = ActivatedMarketSerializer(
        many=True, help_text="Empty for branches A and B; one entry per market for branch C."
    )


class ActivationIncompleteSerializer(ErrorEnvelopeSerializer):
    """502 on activate: the error envelope, plus the brand fields for
    `serenityActivationIncomplete` (the workspace exists but the status write failed)."""

    brandId = serializers.UUIDField(required=False)  # noqa: N815
    status = serializers.ChoiceField(
        choices=[BrandStatus.ACTIVE, BrandStatus.PENDING], required=False
    )
    markets = ActivatedMarketSerializer(many=True, required=False)


class DeactivateAnswerSerializer(serializers.Serializer):
    brandId = serializers.UUIDField()  # noqa: N815
    status = serializers.ChoiceField(
        choices=[BrandStatus.ACTIVE, BrandStatus.PENDING], help_text="Always `pending`."
    )


class JobResultSerializer(serializers.Serializer):
    status = serializers.IntegerField(help_text="The HTTP status the sync path would answer.")
    body = serializers.DictField(help_text="The body the sync path would answer.")
    outcome = serializers.ChoiceField(choices=["succeeded", "partial", "failed"])


class JobErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField(help_text="Generic for upstream failures.")
    retryable = serializers.BooleanField()


class JobStepSerializer(serializers.Serializer):
    step = serializers.ChoiceField(choices=JobStep.choices)
    status = serializers.ChoiceField(choices=["PENDING", *JobStatus.values])
    startedAt = serializers.DateTimeField(allow_null=True)  # noqa: N815
    finishedAt = serializers.DateTimeField(allow_null=True)  # noqa: N815
    runAfter = serializers.DateTimeField(  # noqa: N815
        required=False, help_text="`PENDING` steps only: when the step is due."
    )


class JobListItemSerializer(serializers.Serializer):
    """A chain's document without its steps (the job list)."""

    jobId = serializers.UUIDField(help_text="The root job's id: the one clients hold.")  # noqa: N815
    jobType = serializers.ChoiceField(choices=JobType.choices)  # noqa: N815
    status = serializers.ChoiceField(
        choices=JobStatus.choices, help_text="The effective status of the whole chain."
    )
    result = JobResultSerializer(allow_null=True, help_text="Non-null only when `COMPLETED`.")
    error = JobErrorSerializer(
        allow_null=True, help_text="Non-null only when `FAILED` or `CANCELLED`."
    )
    createdAt = serializers.DateTimeField()  # noqa: N815
    updatedAt = serializers.DateTimeField()  # noqa: N815


class JobListSerializer(serializers.Serializer):
    items = JobListItemSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True, help_text=NEXT_CURSOR_HELP)  # noqa: N815


class JobSerializer(serializers.Serializer):
    jobId = serializers.UUIDField(help_text="Always the id that was asked for.")  # noqa: N815
    jobType = serializers.ChoiceField(choices=JobType.choices)  # noqa: N815
    status = serializers.ChoiceField(
        choices=JobStatus.choices, help_text="The effective status of the whole chain."
    )
    result = JobResultSerializer(allow_null=True, help_text="Non-null only when `COMPLETED`.")
    error = JobErrorSerializer(
        allow_null=True, help_text="Non-null only when `FAILED` or `CANCELLED`."
    )
    steps = JobStepSerializer(many=True)
    createdAt = serializers.DateTimeField()  # noqa: N815
    updatedAt = serializers.DateTimeField()  # noqa: N815


class LanguageSerializer(serializers.Serializer):
    id = serializers.CharField()
    code = serializers.CharField()


class LanguageListSerializer(serializers.Serializer):
    items = LanguageSerializer(many=True)


class PromptsAnswerSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    skipped = serializers.IntegerField()
    failed = serializers.IntegerField()
