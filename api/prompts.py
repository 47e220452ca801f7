"""`POST B/serenity/prompts` (SPEC §4.5): shape-check the body, hand it to the service."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from api.base import SerenityView
from api.responses import JobAcceptedSerializer, PromptsAnswerSerializer
from api.routes import UPSTREAM, accepted, answer, route
from api.schemas import examples as ex
from api.serenity_routes import render
from api.serializers import PromptsSerializer
from provisioning.exceptions import SubworkspaceGoneError
from provisioning.flows.prompts import prompts_add


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
