"""The `Idempotency-Key` header on every POST and PATCH under `/v2` (SPEC §10.3).

`OrgScopedView` mixes this in and calls `idempotency_key_begin` once the caller and the org are
known (so 401/403/404 of the tenancy checks are never stored and never consume a key). The
storage rules (claim by INSERT, 422/409, replay, TTL) live in `serenity.idempotency`.

A secret is never stored in the clear with an answer (SPEC §12.4): a view whose answer carries
one names its members in `idempotency_withheld`; the stored answer keeps them encrypted (as
credentials are: `kernel.crypto`) in one member of its own, and a replay answers them as they
were first shown (SPEC §13.6: a replayed rotation shows the secret it issued, not the current
one), whatever happened since (the endpoint rotated again, or deleted).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel.crypto import decrypt_secret, encrypt_secret
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
# The stored answer's member holding its withheld members, encrypted (never a member of an
# answer: the API's members are camelCase names).
WITHHELD_MEMBER = "_withheldEncrypted"

logger = logging.getLogger("serenity.api")


class AnswerReplayedError(Exception):
    """Raised by `initial` to end the request with a stored answer (see `handle_exception`):
    DRF's `dispatch` runs the handler unless `initial` raises."""

    def __init__(self, answer: StoredAnswer) -> None:
        super().__init__("idempotent replay")
        self.answer = answer


class IdempotencyMixin(APIView):
    idempotency_claim: IdempotencyKey | None = None
    # Members of a POST's or PATCH's answer written to the idempotency record encrypted only.
    idempotency_withheld: tuple[str, ...] = ()

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
            return Response(
                _withheld_restored(answer.body),
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
        """The answer as stored: its withheld members encrypted, in `WITHHELD_MEMBER`."""
        if not self.idempotency_withheld or not isinstance(body, dict):
            return body
        withheld = {name: body[name] for name in self.idempotency_withheld if name in body}
        stored = {name: value for name, value in body.items() if name not in withheld}
        if withheld:
            stored[WITHHELD_MEMBER] = encrypt_secret(json.dumps(withheld))
        return stored


def _withheld_restored(body: Any) -> Any:
    """A stored answer as first shown: its withheld members decrypted in place. Should no
    configured key decrypt them any more (the key that did was dropped since), the answer is
    replayed without them."""
    if not isinstance(body, dict) or WITHHELD_MEMBER not in body:
        return body
    restored = {name: value for name, value in body.items() if name != WITHHELD_MEMBER}
    try:
        withheld = json.loads(decrypt_secret(body[WITHHELD_MEMBER]))
    except ValueError:
        logger.warning("idempotent replay: the withheld members cannot be decrypted")
        return restored
    return {**restored, **withheld}
