"""Liveness and readiness (no token needed), and metrics (SERENITY_METRICS_TOKEN, or loopback
clients only when it is not set: SPEC §11.4).

The probes and /metrics answer whatever the `Host` (a load balancer or an operator probes by IP,
a Prometheus scrapes by IP: SPEC §12.4, §13.6):
`ProbeMiddleware` serves them before anything validates the host or redirects to HTTPS, and
refuses every other request for a host ALLOWED_HOSTS does not list with the JSON envelope (400
`invalidRequest`) and one WARNING line (Django's `Bad Request` line of every 4xx; the refused host
is on an INFO line beside it), where Django would answer an HTML page and log an ERROR with a
traceback."""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from api.database_unavailable import (
    is_database_unavailable,
    log_unavailable,
    unavailable_response,
)
from api.throttling import client_address
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


def _metrics_refusal(request: HttpRequest) -> JsonResponse | None:
    """401 without the right `Authorization: Bearer <SERENITY_METRICS_TOKEN>`; with no token
    configured, 403 for any client but a loopback one. The client is the address the throttles
    see (behind the proxy, the one it appended to X-Forwarded-For), so a request relayed by a
    proxy on this machine is not taken for a local scraper."""
    expected = settings.SERENITY_METRICS_TOKEN
    if expected:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), expected.encode()
        ):
            return None
        refused = JsonResponse(
            {
                "error": "authenticationRequired",
                "message": "Authentication credentials were not provided or are invalid.",
            },
            status=401,
        )
        refused["WWW-Authenticate"] = "Bearer"
        return refused
    try:
        loopback = ipaddress.ip_address(client_address(request)).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return None
    return JsonResponse(
        {"error": "forbidden", "message": "You are not allowed to do this."}, status=403
    )


@read_only
def metrics(request: HttpRequest) -> HttpResponse:
    refusal = _metrics_refusal(request)
    if refusal is not None:
        return refusal
    from api.metrics import CredentialRateCollector, DatabaseCollector
    from kernel.metrics import render_metrics

    body, content_type = render_metrics(collectors=[DatabaseCollector(), CredentialRateCollector()])
    return HttpResponse(body, content_type=content_type)


# Served whatever the Host: a scraper, like a probe, asks by IP (SPEC §13.6); /metrics still
# wants its token (or a loopback client).
_PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": healthz,
    "/readyz": readyz,
    "/metrics": metrics,
}
# The refused host, as logged: enough to recognise it, never a whole attacker-sized header.
_LOGGED_HOST_CHARACTERS = 200


class ProbeMiddleware:
    """Answers `/healthz`, `/readyz` and `/metrics` whatever the `Host`; answers a request for
    any other path with a host not allowed 400 `invalidRequest`. In MIDDLEWARE before
    SecurityMiddleware (its HTTPS redirect reads the host, and a probe speaks plain HTTP to the
    loopback) and before everything else that reads the host."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = _PROBES.get(request.path_info)
        if probe is not None:
            try:
                return probe(request)
            except (OperationalError, InterfaceError) as exc:
                # /metrics reads the database (readyz says so itself): 503, no traceback.
                if not is_database_unavailable(exc):
                    raise
                log_unavailable(request, exc)
                return unavailable_response()
        try:
            request.get_host()
        except DisallowedHost:
            host = request.META.get("HTTP_HOST", "")[:_LOGGED_HOST_CHARACTERS]
            logger.info("request refused: host not allowed", extra={"host": host})
            return JsonResponse(
                {"error": "invalidRequest", "message": "This host is not served here."},
                status=400,
            )
        return self.get_response(request)
