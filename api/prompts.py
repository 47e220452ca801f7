"""`POST B/serenity/prompts` (SPEC §4.5): shape-check the body, hand it to the service."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from api import schemas
from api.base import SerenityView
from api.responses import PromptsAnswerSerializer
from api.serenity_routes import render
from api.serializers import PromptsSerializer
from provisioning.flows.prompts import prompts_add


class PromptCollectionView(SerenityView):
    @schemas.prompts_create_schema
    def post(self, request: Request, org_id: str, brand_id: str) -> Response:
        assert self.scope.brand is not None
        body = PromptsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        return render(
            prompts_add(
                brand=self.scope.brand, prompts=data["prompts"], run_async=data["run_async"]
            ),
            {200: PromptsAnswerSerializer},
        )
