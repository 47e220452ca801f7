"""One declaration per route (SPEC §12.3): the `Route` a handler carries names its body and query
serializers (which the view parses with: `OrgScopedView.body`, `OrgScopedView.query_parse`),
its answers and the domain errors it raises beyond the checks every route runs. The OpenAPI
document is read from the same declaration (api.schemas.RouteSchema), so what is documented is
what is parsed, rendered and raised."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from drf_spectacular.utils import OpenApiCallback, OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from kernel.errors import ConfigurationError, DomainError
from provisioning.exceptions import (
    CredentialRefusedError,
    SubworkspaceCreationFailedError,
    SubworkspaceCreationTimeoutError,
    UpstreamBusyError,
    UpstreamError,
    UpstreamForbiddenError,
    UpstreamUnauthorizedError,
)

Handler = TypeVar("Handler", bound=Callable[..., Any])

# What any call to Semrush can end in, and what waiting for a new workspace can.
UPSTREAM: tuple[type[DomainError], ...] = (
    UpstreamUnauthorizedError,
    UpstreamForbiddenError,
    UpstreamError,
    ConfigurationError,
    UpstreamBusyError,
    CredentialRefusedError,
)
SETTLE = (SubworkspaceCreationFailedError, SubworkspaceCreationTimeoutError)


@dataclass(frozen=True)
class Route:
    operation_id: str
    tag: str
    summary: str
    # By status; `(status, media type)` for a route that answers more than one media type.
    answers: Mapping[int | tuple[int, str], OpenApiResponse]
    description: str = ""
    body: type[serializers.Serializer] | None = None
    # Bodies of other media types than JSON the route takes (media type → schema).
    other_bodies: Mapping[str, Any] = field(default_factory=dict)
    query: type[serializers.Serializer] | None = None
    # The route's own refusals; the checks of every route (tenancy, brand, Serenity being
    # active, a write's body and Idempotency-Key) are derived from the view and the method.
    raises: Sequence[type[DomainError]] = ()
    examples: Mapping[str, Any] = field(default_factory=dict)  # request bodies, by name
    headers: Sequence[OpenApiParameter] = ()
    callbacks: Sequence[OpenApiCallback] = ()

    @property
    def request_schema(self) -> Any:
        """The body's serializer; by media type when the route takes others than JSON."""
        if not self.other_bodies:
            return self.body
        return {"application/json": self.body, **self.other_bodies}

    def errors_keyed(self, errors: Mapping[int, OpenApiResponse]) -> dict[Any, OpenApiResponse]:
        """The error answers keyed as the route's answers are: a route that answers several
        media types (`(status, media type)` keys) answers its errors as JSON only."""
        if not any(isinstance(status, tuple) for status in self.answers):
            return dict(errors)
        return {(status, "application/json"): error for status, error in errors.items()}


def example_media_type(value: Any) -> str | None:
    """A request example's media type: a string is a CSV body (the onboarding create's), any
    other value JSON (None: drf-spectacular's default)."""
    return "text/csv" if isinstance(value, str) else None


def route(**declaration: Any) -> Callable[[Handler], Handler]:
    """`@route(...)` on a view's handler: its `Route`."""

    def attach(handler: Handler) -> Handler:
        handler.route = Route(**declaration)  # type: ignore[attr-defined]
        return handler

    return attach


def answer(
    serializer: type[serializers.Serializer] | None,
    description: str,
    examples: Mapping[str, Any] | None = None,
) -> OpenApiResponse:
    """A success answer: the serializer that renders it, and its examples by name."""
    return OpenApiResponse(
        serializer,
        description=description,
        examples=[OpenApiExample(name, value=value) for name, value in (examples or {}).items()],
    )


def accepted(serializer: type[serializers.Serializer], value: Mapping[str, Any]) -> OpenApiResponse:
    """The 202 of an async request."""
    return answer(
        serializer, "`async: true`: the job was started; poll `Location`.", {"Accepted": value}
    )
