"""drf-spectacular extensions: how our authentication class, our request fields' rules, our
strict boolean field and the fields that hold another answer's body are documented. The output
serializers themselves are documented as they are (`api.responses`, `provisioning.serializers`)."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework import serializers

from api.responses import (
    ActivateAnswerSerializer,
    ActivationIncompleteSerializer,
    DeactivateAnswerSerializer,
    ErrorEnvelopeSerializer,
    MarketCreatedSerializer,
    PromptsAnswerSerializer,
    RepairAnswerSerializer,
    WorkspaceReadySerializer,
)

# Every string of a request body is trimmed, must not be blank and must not contain NUL
# (DRF's `CharField`: `allow_blank=False`, `ProhibitNullCharactersValidator`).
NOT_BLANK_PATTERN = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from `create_api_token`: `Authorization: Bearer <token>`.",
        }


class StrictBooleanFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "api.fields.StrictBooleanField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "boolean",
            "description": "JSON `true` or `false` only: a string, number or null is "
            "400 `invalidRequest`.",
        }


class CharFieldRulesExtension(OpenApiSerializerFieldExtension):
    """A request string field's rule, from its class (api.fields `openapi`): by default, as
    DRF's `CharField` checks, not blank (unless `allow_blank`) and without NUL."""

    target_class = "rest_framework.serializers.CharField"
    match_subclasses = True
    priority = -1  # a more specific extension (OpenCodeField's) comes first

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer_field(
            self.target, direction, bypass_extensions=True
        )
        # A blank-allowing string only refuses NUL: api.schemas.hooks says so after the fact
        # (drf-spectacular would make a patterned one `oneOf` itself or the empty string).
        if direction == "request" and not self.target.allow_blank:
            schema.update({"pattern": NOT_BLANK_PATTERN, **getattr(self.target, "openapi", {})})
        return schema


class OpenCodeFieldExtension(OpenApiSerializerFieldExtension):
    """A code whose set grows: a component named by the field (the same in every release), its
    known values listed once (`x-extensible-enum`, and described), not an enum (SPEC §13.6)."""

    target_class = "provisioning.serializers.OpenCodeField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        known, name = list(self.target.known), self.target.schema_name
        schema = {"type": "string", "x-extensible-enum": known}
        component = ResolvedComponent(name, ResolvedComponent.SCHEMA, object=name, schema=schema)
        component.schema["description"] = self.target.schema_description()
        auto_schema.registry.register_on_missing(component)  # the first field of that name
        assert auto_schema.registry[component].schema["x-extensible-enum"] == known, name
        return component.ref


class AnswerBodyExtension(OpenApiSerializerFieldExtension):
    """A field that holds the body of another answer: any of the answers it may stand for
    (`anyOf`, not `oneOf`: an `ActivationIncomplete` body is an error envelope too)."""

    answers: ClassVar[list[type[serializers.Serializer]]]

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "anyOf": [
                auto_schema.resolve_serializer(answer, direction).ref for answer in self.answers
            ]
        }


class OutcomeBodyExtension(AnswerBodyExtension):
    """A job's `result.body`: what the sync path of the chain's operation answered."""

    target_class = "provisioning.serializers.OutcomeBodyField"
    answers: ClassVar[list[type[serializers.Serializer]]] = [
        MarketCreatedSerializer,
        ActivateAnswerSerializer,
        PromptsAnswerSerializer,
        WorkspaceReadySerializer,
        ActivationIncompleteSerializer,
        RepairAnswerSerializer,
        DeactivateAnswerSerializer,
        ErrorEnvelopeSerializer,
    ]


class MarketAnswerExtension(AnswerBodyExtension):
    """A market entry's `body` in an activation: what a market create would have answered."""

    target_class = "api.responses.MarketAnswerField"
    answers: ClassVar[list[type[serializers.Serializer]]] = [
        MarketCreatedSerializer,
        ErrorEnvelopeSerializer,
    ]
