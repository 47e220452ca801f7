"""Bounds every request meets before any view (SPEC §10.2: bad input never answers 500).

- a body larger than `SERENITY_MAX_BODY_BYTES` → 413 `requestTooLarge`, read no further;
- a control character (NUL included) in the path → 400 `invalidRequest` (PostgreSQL refuses
  NUL in text, and no id, code or route of ours contains one).

One middleware, so that every route (and every route added later) gets the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

# Unicode's Cc category, exactly: C0, DEL and C1 (one search, not a lookup per character).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def has_control_character(text: str) -> bool:
    return _CONTROL.search(text) is not None


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": code, "message": message}, status=status)


class RequestLimitsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if has_control_character(request.path):
            return _error(400, "invalidRequest", "The path contains a control character.")
        if self._declared_length(request) > settings.SERENITY_MAX_BODY_BYTES:
            return _too_large()
        return self.get_response(request)

    @staticmethod
    def _declared_length(request: HttpRequest) -> int:
        try:
            return int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return 0


def _too_large() -> JsonResponse:
    return _error(
        413,
        "requestTooLarge",
        f"The body is larger than {settings.SERENITY_MAX_BODY_BYTES} bytes.",
    )
