"""Liveness, readiness and metrics: no token needed."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, JsonResponse

from serenity.models import Organization

logger = logging.getLogger("serenity.health")


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


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


def metrics(request: HttpRequest) -> HttpResponse:
    from kernel.metrics import render_metrics
    from serenity.metrics import DatabaseCollector

    body, content_type = render_metrics(collectors=[DatabaseCollector()])
    return HttpResponse(body, content_type=content_type)
