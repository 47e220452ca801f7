"""The schema class of every `/v2` view: each operation is read from its handler's `Route`
(api.routes), and what every route shares is derived, not repeated: the checks it runs (SPEC
§4's order: tenancy, the brand, Serenity being active, a write's body and `Idempotency-Key`),
their error envelopes (one response per status, from the domain error classes' `http_status`,
`code` and `default_message`) and the headers that go with them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse

from api.errors import (
    AuthenticationRequiredError,
    NotAcceptableError,
    RateLimitedError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
)
from api.fields import DEPRECATION, DeprecatedBooleanField
from api.responses import ErrorEnvelopeSerializer
from api.routes import Route, example_media_type
from api.schemas.examples import JOB_ID
from kernel.errors import DomainError, ForbiddenError, InvalidRequestError
from serenity.exceptions import (
    BrandNotFoundError,
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    OrganizationNotFoundError,
    SerenityNotActiveError,
)

# Every `/v2/orgs/{orgId}/…` route: 406 for an `Accept` JSON does not satisfy, 413 for a body
# over SERENITY_MAX_BODY_BYTES (kernel.request_limits), 429 for an address over its
# failed-authentication limit or a token over its write rate (api.throttling).
ORG_CHECKS: tuple[type[DomainError], ...] = (
    InvalidRequestError,
    AuthenticationRequiredError,
    ForbiddenError,
    OrganizationNotFoundError,
    NotAcceptableError,
    RequestTooLargeError,
    RateLimitedError,
    DomainError,
)
# Every POST and PATCH: a JSON body (SPEC §10.2) and its `Idempotency-Key` (SPEC §10.3).
WRITE_METHODS = frozenset({"POST", "PATCH"})
WRITE_CHECKS = (IdempotencyKeyInUseError, UnsupportedMediaTypeError, IdempotencyKeyReusedError)
# The example bodies that say more than the class's default message.
EXAMPLE_BODIES: dict[str, dict[str, Any]] = {
    "invalidRequest": {"message": "market: must be two letters.", "details": {"field": "market"}},
    # The job already running for this brand: poll it instead of retrying.
    "semrush_provisioning_in_progress": {"details": {"jobId": JOB_ID}},
}

WWW_AUTHENTICATE = OpenApiParameter(
    "WWW-Authenticate",
    str,
    OpenApiParameter.HEADER,
    response=[401],
    description="`Bearer` on `authenticationRequired`.",
)
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7E]+$"},
    OpenApiParameter.HEADER,
    description="Optional; 1 to 255 printable ASCII characters, scoped to (caller, org, method, "
    "path). The first answer is stored for a day: a repeat with the same body replays it "
    "(`Idempotent-Replayed: true`; an async create replays the same `jobId`), another body → "
    "422 `idempotencyKeyReused`, a repeat while the first is running → 409 "
    "`idempotencyKeyInUse` (retry later). A 5xx is not stored.",
)
IDEMPOTENT_REPLAYED = OpenApiParameter(
    "Idempotent-Replayed",
    {"type": "string", "enum": ["true"]},
    OpenApiParameter.HEADER,
    response=True,
    description="`true` when this answer is the stored answer to an earlier request with the "
    "same `Idempotency-Key`.",
)


def accepted_headers(*, location: str, retry_after: str) -> list[OpenApiParameter]:
    """The headers of a 202: where to poll, and when."""
    return [
        OpenApiParameter(
            name, kind, OpenApiParameter.HEADER, response=[202], required=True, description=text
        )
        for name, kind, text in (("Location", str, location), ("Retry-After", int, retry_after))
    ]


def polling_header(description: str) -> OpenApiParameter:
    """`Retry-After` on a 200 of something still in progress."""
    return OpenApiParameter(
        "Retry-After", int, OpenApiParameter.HEADER, response=[200], description=description
    )


# A body with an `async` member may answer 202 with a job to poll.
JOB_ACCEPTED_HEADERS = accepted_headers(
    location="The path of `B/serenity/jobs/{jobId}` to poll.",
    retry_after="Whole seconds (1 to 60) until the chain's next scheduled step.",
)


def error_example(status: int, error: type[DomainError]) -> OpenApiExample:
    value = {"error": error.code, "message": error.default_message}
    value.update(EXAMPLE_BODIES.get(error.code, {}))
    return OpenApiExample(f"{status} {error.code}", value=value, response_only=True)


def error_responses(
    raised: list[type[DomainError]], answers: dict[int, OpenApiResponse]
) -> dict[int, OpenApiResponse]:
    """One error-envelope response per status, listing the codes it can carry; a status the
    route also declares an answer for keeps that answer's body and description, with every
    code's example."""
    by_status: dict[int, dict[str, type[DomainError]]] = {}
    for error in raised:
        by_status.setdefault(error.http_status, {}).setdefault(error.code, error)
    responses = {}
    for status, errors in sorted(by_status.items()):
        examples = {f"{status} {code}": error_example(status, e) for code, e in errors.items()}
        declared = answers.get(status)
        if declared is not None:
            examples.update({example.name: example for example in declared.examples})
            responses[status] = OpenApiResponse(
                declared.response, declared.description, examples=list(examples.values())
            )
            continue
        codes = ", ".join(f"`{code}`" for code in errors)
        responses[status] = OpenApiResponse(
            ErrorEnvelopeSerializer,
            description=f"Error envelope; `error` is one of {codes}.",
            examples=list(examples.values()),
        )
    return responses


class RouteSchema(AutoSchema):
    """drf-spectacular's `AutoSchema`, reading the handler's `Route`."""

    @property
    def route(self) -> Route:
        route: Route = getattr(self.view, self.method.lower()).route
        return route

    def get_operation_id(self) -> str:
        return self.route.operation_id

    def get_tags(self) -> list[str]:
        return [self.route.tag]

    def get_summary(self) -> str:
        return self.route.summary

    def get_description(self) -> str:  # type: ignore[override]  # as AutoSchema's own
        return self.route.description

    def get_request_serializer(self) -> Any:
        return self.route.request_schema

    def get_examples(self) -> list[OpenApiExample]:
        return [
            OpenApiExample(name, value=v, request_only=True, media_type=example_media_type(v))
            for name, v in self.route.examples.items()
        ]

    def get_callbacks(self) -> list[Any]:
        return list(self.route.callbacks)

    def get_override_parameters(self) -> list[Any]:
        parameters: list[Any] = [*self.route.headers, WWW_AUTHENTICATE]
        if self.method in WRITE_METHODS:
            parameters += [IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED]
        fields = self.route.body().fields if self.route.body is not None else {}
        if "async" in fields and not isinstance(fields["async"], DeprecatedBooleanField):
            parameters += JOB_ACCEPTED_HEADERS
        if any(isinstance(field, DeprecatedBooleanField) for field in fields.values()):
            parameters.append(DEPRECATION)
        if self.route.query is not None:
            parameters.append(self.route.query)
        return parameters

    def _get_request_for_media_type(self, serializer: Any, direction: str = "request") -> Any:
        schema, required = super()._get_request_for_media_type(serializer, direction)
        # A route's other media type (a CSV onboarding's text) is a body the route cannot do
        # without (SPEC §13.2: no header row → 400); drf-spectacular counts a plain string
        # optional, which would make the whole request body optional.
        if any(serializer is other for other in self.route.other_bodies.values()):
            required = True
        return schema, required

    def _get_format_parameters(self) -> list[Any]:
        # A route with two renderers (an onboarding's items: JSON or CSV) is negotiated by its
        # `Accept` (SPEC §13.2); its query string takes its route's parameters only (api.bodies
        # refuses any other), so drf-spectacular's `?format=` is not one.
        return []

    def get_response_serializers(self) -> Any:
        route = self.route
        raised: list[type[DomainError]] = [*ORG_CHECKS]
        if "{brand_id}" in self.path:
            raised.append(BrandNotFoundError)
        if getattr(self.view, "require_serenity_active", False):
            raised.append(SerenityNotActiveError)
        raised += route.raises
        if self.method in WRITE_METHODS:
            raised += WRITE_CHECKS
        answers = dict(route.answers)
        return {**answers, **route.errors_keyed(error_responses(raised, answers))}  # type: ignore[arg-type]
