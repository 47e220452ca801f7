"""Binds a request id to the log context and echoes it in `X-Request-Id`."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from kernel import context

_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-Id", "")
        request_id = incoming if _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        context.clear()
        context.bind(request_id=request_id)
        try:
            response = self.get_response(request)
        finally:
            context.clear()
        response["X-Request-Id"] = request_id
        return response


class RequestMetricsMiddleware:
    """Counts served requests by method (a known one, else "other") and status (Prometheus)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from kernel.metrics import record_request

        response = self.get_response(request)
        record_request(request.method, response.status_code)
        return response
