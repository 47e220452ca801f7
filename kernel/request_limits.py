"""Bounds every request meets before any view (SPEC §10.2: bad input never answers 500).

- a body larger than `SERENITY_MAX_BODY_BYTES` → 413 `requestTooLarge`, read no further;
- a control character (NUL included) in the path → 400 `invalidRequest` (PostgreSQL refuses
  NUL in text, and no id, code or route of ours contains one);
- a chunked body (`Transfer-Encoding: chunked`, no Content-Length) is read, within the same
  limit, before Django sees the request (`ChunkedBodyMiddleware`, a WSGI wrapper: Django reads
  Content-Length bytes and would take a chunked body for an empty one), or refused with 411
  `lengthRequired` when the server did not de-chunk it.

One middleware, so that every route (and every route added later) gets the same answer.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

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


# --- Chunked bodies (SPEC §11.4) ------------------------------------------------------------

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class ChunkedBodyMiddleware:
    """WSGI wrapper: a chunked request body becomes an ordinary one with its Content-Length.

    gunicorn de-chunks the body and says so (`wsgi.input_terminated`: the input ends where the
    body does); the body is then read here, at most SERENITY_MAX_BODY_BYTES (one byte more
    answers 413 `requestTooLarge` without reading further), and handed on with its length. A
    server that does not de-chunk (the development server) would hand over the raw framing:
    the request is refused with 411 `lengthRequired` rather than read as empty or as garbage.
    """

    def __init__(self, application: WsgiApp) -> None:
        self.application = application

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            return self.application(environ, start_response)
        from django.conf import settings

        if not environ.get("wsgi.input_terminated"):
            return _wsgi_error(
                start_response,
                411,
                "lengthRequired",
                "A chunked body is not accepted here: send Content-Length.",
            )
        limit = settings.SERENITY_MAX_BODY_BYTES
        body = environ["wsgi.input"].read(limit + 1)
        if len(body) > limit:
            return _wsgi_error(
                start_response, 413, "requestTooLarge", f"The body is larger than {limit} bytes."
            )
        environ = {
            **environ,
            "wsgi.input": io.BytesIO(body),
            "CONTENT_LENGTH": str(len(body)),
        }
        del environ["HTTP_TRANSFER_ENCODING"]
        return self.application(environ, start_response)


_REASONS = {411: "Length Required", 413: "Content Too Large"}


def _wsgi_error(
    start_response: Callable[..., Any], status: int, code: str, message: str
) -> list[bytes]:
    body = json.dumps({"error": code, "message": message}).encode()
    start_response(
        f"{status} {_REASONS[status]}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]
