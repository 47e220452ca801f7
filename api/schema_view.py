"""`/api/schema/`: drf-spectacular's view, whose refusals are JSON error envelopes (SPEC §13.6).

An unknown `?format=` (`xml`) made DRF refuse the request and then render that refusal with the
document's own renderer (YAML), which cannot: a 500 with a traceback, to anyone. Here an unknown
`format` is 400 `invalidRequest` naming it, and every refusal (an `Accept` it cannot satisfy:
406) is rendered as JSON."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.views import SpectacularAPIView
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from kernel.errors import InvalidRequestError


class SchemaView(SpectacularAPIView):
    def handle_exception(self, exc: Exception) -> Response:
        wanted = self.request.query_params.get("format")
        if isinstance(exc, exceptions.NotFound | Http404) and wanted is not None:
            known = ", ".join(sorted({r.format for r in self.get_renderers()}))
            exc = InvalidRequestError(
                f"format: {wanted[:40]!r} is not one of {known}.", details={"field": "format"}
            )
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = "application/json"
        return response
