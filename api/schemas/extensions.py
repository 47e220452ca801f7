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
    ErrorEnvelopeSerializer,
    MarketCreatedSerializer,
    PromptsAnswerSerializer,
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


class DeprecatedBooleanFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "api.fields.DeprecatedBooleanField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "type": "boolean",
            "deprecated": True,
            "description": f"Deprecated: {self.target.why} Accepted (a JSON boolean) and "
            "ignored until the next major version; the answer then carries a `Deprecation` "
            "header.",
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
    """A code whose set grows: a named component (`OpenCodeField.schema_name`, the same name in
    every release, never a generated `CodeEnum`), a string with its known values listed once
    (Zalando's `x-extensible-enum`, and in the component's description), not a closed enum
    (SPEC §12.2, §13.6). A request field that takes the known values only says so in its own
    description: the set still grows."""

    target_class = "provisioning.serializers.OpenCodeField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        field = self.target
        component = ResolvedComponent(
            name=field.schema_name,
            type=ResolvedComponent.SCHEMA,
            object=field.schema_name,
            schema={
                "type": "string",
                "x-extensible-enum": list(field.known),
                "description": field.schema_description(),
            },
        )
        # The first field of that name registers it; every other one names the same values.
        auto_schema.registry.register_on_missing(component)
        known = auto_schema.registry[component].schema["x-extensible-enum"]
        assert known == list(field.known), (field.schema_name, known, field.known)
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
        ErrorEnvelopeSerializer,
    ]


class MarketAnswerExtension(AnswerBodyExtension):
    """A market entry's `body` in an activation: what a market create would have answered."""

    target_class = "api.responses.MarketAnswerField"
    answers: ClassVar[list[type[serializers.Serializer]]] = [
        MarketCreatedSerializer,
        ErrorEnvelopeSerializer,
    ]
