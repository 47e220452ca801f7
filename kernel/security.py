"""HTTP answers that carry a caller's data are never stored by a cache (SPEC §10.5)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control


class NoStoreMiddleware:
    """`Cache-Control: no-store` on every JSON answer to a request that presented credentials
    (an `Authorization` header): a shared or browser cache must not keep one tenant's data, nor
    an error that tells which token was refused."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if "HTTP_AUTHORIZATION" in request.META and content_type.startswith("application/json"):
            patch_cache_control(response, no_store=True)
        return response
