"""The `Idempotency-Key` header on every POST and PATCH under `/v2` (SPEC §10.3).

`OrgScopedView` mixes this in and calls `idempotency_key_begin` once the caller and the org are
known (so 401/403/404 of the tenancy checks are never stored and never consume a key). The
storage rules (claim by INSERT, 422/409, replay, TTL) live in `serenity.idempotency`.

A secret is never stored with an answer (SPEC §12.4): a view whose answer carries one names its
members in `idempotency_withheld`; they are left out of the stored answer, and the replay asks
the view for them again (`idempotency_withheld_fill`, which re-reads them where they are kept
encrypted).
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from serenity.idempotency import (
    StoredAnswer,
    idempotency_key_claim,
    idempotency_key_parse,
    idempotency_key_record,
    idempotency_key_release,
    request_digest,
)
from serenity.models import IdempotencyKey, Organization

IDEMPOTENT_METHODS = frozenset({"POST", "PATCH"})
HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


class AnswerReplayedError(Exception):
    """Raised by `initial` to end the request with a stored answer (see `handle_exception`):
    DRF's `dispatch` runs the handler unless `initial` raises."""

    def __init__(self, answer: StoredAnswer) -> None:
        super().__init__("idempotent replay")
        self.answer = answer


class IdempotencyMixin(APIView):
    idempotency_claim: IdempotencyKey | None = None
    # Members of a POST's or PATCH's answer never written to the idempotency record.
    idempotency_withheld: tuple[str, ...] = ()

    def idempotency_withheld_fill(self, body: dict[str, Any]) -> dict[str, Any]:
        """The stored answer `body` with its withheld members read again (a view that
        withholds members overrides this)."""
        return body

    def idempotency_key_begin(self, request: Request, organization: Organization) -> None:
        """Claim the request's key, or end the request with the stored answer (raises)."""
        if request.method not in IDEMPOTENT_METHODS or HEADER not in request.headers:
            return
        key = idempotency_key_parse(request.headers[HEADER])
        user_id = request.user.pk
        assert user_id is not None  # IsAuthenticated ran before (a 401 never claims a key)
        outcome = idempotency_key_claim(
            user_id=user_id,
            organization=organization,
            method=str(request.method),
            path=request.path,
            key=key,
            digest=request_digest(request.data),
        )
        if isinstance(outcome, StoredAnswer):
            raise AnswerReplayedError(outcome)
        self.idempotency_claim = outcome

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, AnswerReplayedError):
            answer = exc.answer
            body = answer.body
            if self.idempotency_withheld and answer.status < 300 and isinstance(body, dict):
                body = self.idempotency_withheld_fill(body)
            return Response(
                body,
                status=answer.status,
                headers={**answer.headers, REPLAYED_HEADER: "true"},
            )
        return super().handle_exception(exc)

    def finalize_response(
        self, request: Request, response: Any, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        claim, self.idempotency_claim = self.idempotency_claim, None
        if claim is not None:
            if response.status_code >= 500:
                idempotency_key_release(claim=claim)
            else:
                idempotency_key_record(
                    claim=claim,
                    status=response.status_code,
                    body=self._storable(getattr(response, "data", None)),
                    headers=dict(response.headers),
                )
        return response

    def _storable(self, body: Any) -> Any:
        if not self.idempotency_withheld or not isinstance(body, dict):
            return body
        return {
            name: value for name, value in body.items() if name not in self.idempotency_withheld
        }
