"""`POST B/serenity/prompts` (SPEC §4.5): shape-check the body, hand it to the service."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import SerenityView
from api.fields import BodyObjectSerializer, BoundedListField, LanguageCodeField, StrictCharField
from api.responses import JobAcceptedSerializer, PromptsAnswerSerializer
from api.routes import UPSTREAM, accepted, answer, route
from api.schemas import examples as ex
from api.serenity_routes import render
from provisioning.exceptions import SubworkspaceGoneError
from provisioning.flows.prompts import prompts_add


class PromptItemSerializer(serializers.Serializer):
    text = StrictCharField(max_length=2000)
    geoTargetId = serializers.IntegerField(min_value=1)  # noqa: N815
    languageCode = LanguageCodeField()  # noqa: N815
    tags = BoundedListField(child=StrictCharField(max_length=100), required=False, max_length=50)

    def validate_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank.")
        return value


class PromptsSerializer(BodyObjectSerializer):
    prompts = BoundedListField(
        child=PromptItemSerializer(),
        allow_empty=False,
        min_length=1,
        max_length=settings.SERENITY_MAX_PROMPTS,
        error_messages={"max_length": "at most {max_length} prompts per request."},
    )

    def to_internal_value(self, data: Any) -> Any:
        # Name an item's field `prompts[3].text`, as the service names its own checks, not
        # DRF's `prompts.3.text`.
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail = exc.detail
            items = detail.get("prompts") if isinstance(detail, dict) else None
            if isinstance(detail, dict) and isinstance(items, dict):
                rest = {k: v for k, v in detail.items() if k != "prompts"}
                indexed = {f"prompts[{index}]": error for index, error in items.items()}
                raise serializers.ValidationError({**indexed, **rest}) from None
            raise


class PromptCollectionView(SerenityView):
    @route(
        operation_id="promptsCreate",
        tag="prompts",
        summary="Add prompts to the brand's markets, sync or async",
        description="1 to 500 prompts, each naming a market of the brand whose project exists; "
        "duplicates (same market, same text trimmed and case-folded) are skipped. Sync → 200 "
        "counts; `async: true` → 202, a `classifyPrompts` job whose result is the same counts.",
        body=PromptsSerializer,
        examples={"Two prompts": ex.PROMPTS},
        answers={
            200: answer(
                PromptsAnswerSerializer,
                "Prompt counts.",
                {"Counts": {"created": 2, "skipped": 0, "failed": 0}},
            ),
            202: accepted(JobAcceptedSerializer, {**ex.JOB_ACCEPTED, "jobType": "classifyPrompts"}),
        },
        # A failed push is not an error here: its prompts count as `failed`. A workspace gone
        # upstream is (after the heal, whose own upstream read may fail: UPSTREAM).
        raises=[*UPSTREAM, SubworkspaceGoneError],
    )
    def post(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        data = self.body(request)
        return render(
            prompts_add(
                brand=self.scope.brand, prompts=data["prompts"], run_async=data["run_async"]
            ),
            {200: PromptsAnswerSerializer},
        )
