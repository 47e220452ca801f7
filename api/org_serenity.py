"""`GET O/serenity` (SPEC §13.2): the org's Serenity switch and the state of the Semrush
credential its calls use (never the credential itself)."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import OrgScopedView
from api.routes import answer, route
from provisioning import credentials


class CredentialStateSerializer(serializers.Serializer):
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["org", "service"],
        help_text="`org`: the organization's own credential; `service`: the service-wide one.",
    )
    status = serializers.ChoiceField(
        choices=["ok", "refused"],
        help_text="`refused`: Semrush refuses a credential it accepted before; the work that "
        "needs it waits (its job's step reads `waitingFor: credential`), nothing fails, and it "
        "resumes once Semrush accepts the credential again.",
    )
    refusedAt = serializers.DateTimeField(  # noqa: N815
        source="refused_at", allow_null=True, help_text="When the refusal began; null when ok."
    )
    checkedAt = serializers.DateTimeField(  # noqa: N815
        source="checked_at",
        allow_null=True,
        help_text="When the service last learnt the credential's state; null: not yet.",
    )
    ratePerSecond = serializers.FloatField(  # noqa: N815
        source="rate_per_second",
        help_text="The requests per second the credential is paced at now: the configured rate "
        "at most, lower while Semrush answers 429 without saying when to come back.",
    )


class SerenityStateSerializer(serializers.Serializer):
    serenityEnabled = serializers.BooleanField(source="serenity_enabled")  # noqa: N815
    credential = CredentialStateSerializer()


EXAMPLE = {
    "serenityEnabled": True,
    "credential": {
        "source": "service",
        "status": "ok",
        "refusedAt": None,
        "checkedAt": "2026-12-07T08:00:00Z",
        "ratePerSecond": 10.0,
    },
}


class SerenityStateView(OrgScopedView):
    @route(
        operation_id="serenityGet",
        tag="serenity",
        summary="The organization's Serenity state and its Semrush credential's",
        description="Whether Serenity is on for the organization, and the state of the Semrush "
        "credential its calls use: its own or the service's, refused or not, and the rate it "
        "is paced at now. Never the credential.",
        answers={200: answer(SerenityStateSerializer, "The state.", {"A state": EXAMPLE})},
    )
    def get(self, request: Request, org_id: str) -> Response:
        organization = self.scope.organization
        credential = credentials.credential_of(organization)
        state = credentials.state_of(credential)
        document = {
            "serenity_enabled": organization.serenity_enabled,
            "credential": {
                "source": credential.source,
                "status": state.status.value,
                "refused_at": state.refused_at,
                "checked_at": state.checked_at,
                "rate_per_second": credentials.rate_per_second(credential),
            },
        }
        return Response(SerenityStateSerializer(document).data)
