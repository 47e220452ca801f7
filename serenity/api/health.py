"""Liveness, readiness and metrics: no token needed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from serenity.models import Organization

logger = logging.getLogger("serenity.health")


def read_only(view: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """GET and HEAD only; any other method is 405 `methodNotAllowed` in the JSON envelope
    (SPEC §4), as on the DRF routes. CSRF-exempt like them (no cookie authenticates here), so
    that a refused method is this 405 rather than Django's CSRF page."""

    @wraps(view)
    def only_get(request: HttpRequest) -> HttpResponse:
        if request.method not in {"GET", "HEAD"}:
            refused = JsonResponse(
                {"error": "methodNotAllowed", "message": "Method not allowed."}, status=405
            )
            refused["Allow"] = "GET, HEAD"
            return refused
        return view(request)

    return csrf_exempt(only_get)


@read_only
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@read_only
def readyz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    try:
        # A round trip through the ORM: the database answers and our tables are there.
        Organization.objects.exists()
        checks["database"] = "ok"
    except Exception:
        logger.warning("readiness: database unreachable", exc_info=True)
        checks["database"] = "unreachable"
    from jobs.publishing import broker_reachable

    checks["broker"] = "ok" if broker_reachable() else "unreachable"
    ready = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503
    )


@read_only
def metrics(request: HttpRequest) -> HttpResponse:
    from kernel.metrics import render_metrics
    from serenity.metrics import DatabaseCollector

    body, content_type = render_metrics(collectors=[DatabaseCollector()])
    return HttpResponse(body, content_type=content_type)
