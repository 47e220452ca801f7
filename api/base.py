"""The base view of every `/v2/orgs/{orgId}/…` route: authentication, then tenancy (SPEC §4)."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework.request import Request
from rest_framework.response import Response

from api.bodies import query_refuse, unknown_member_refuse
from api.fields import DEPRECATED_SINCE, DeprecatedBooleanField
from api.idempotency import IdempotencyMixin
from api.pagination import query_parse
from api.parsers import CsvTable
from api.routes import Route
from api.schemas.routes import RouteSchema
from kernel import context
from kernel.errors import InvalidRequestError
from serenity.selectors import CallerScope, caller_scope_resolve

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Path ids checked as UUIDs with the others (400 before any lookup), by their public names.
EXTRA_PATH_IDS = {
    "job_id": "jobId",
    "webhook_id": "webhookId",
    "delivery_id": "deliveryId",
    "onboarding_id": "onboardingId",
    "reconciliation_id": "reconciliationId",
}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class OrgScopedView(IdempotencyMixin):
    """Runs SPEC §4's checks in their order before the handler.

    DRF authenticates first (401 with `WWW-Authenticate: Bearer`); then path ids are validated
    (400), then org (404), membership and role (403), brand (404) and, on `B/serenity/*`
    routes that need it, Serenity being on for the brand (404 serenityNotActive); then the body
    of a POST/PUT/PATCH must be a JSON object; then a POST or PATCH with an `Idempotency-Key`
    claims it or replays the stored answer (SPEC §10.3).
    """

    serenity_route: ClassVar[bool] = False
    require_serenity_active: ClassVar[bool] = False
    schema = RouteSchema()
    scope: CallerScope
    deprecated_members_used = False

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        extra = {name: kwargs[kwarg] for kwarg, name in EXTRA_PATH_IDS.items() if kwarg in kwargs}
        self.scope = caller_scope_resolve(
            user=request.user,
            org_id=kwargs["org_id"],
            brand_id=kwargs.get("brand_id"),
            extra_uuids=extra or None,
            geo_target_id=kwargs.get("geo_target_id"),
            write=request.method in MUTATING_METHODS,
            serenity_route=self.serenity_route,
            require_serenity_active=self.require_serenity_active,
        )
        context.bind(org_id=self.scope.organization.id, brand_id=kwargs.get("brand_id"))
        # A query parameter the handler's route does not take, or one given twice, and a body
        # member it does not declare are refused (SPEC §12.2, §13.6: api.bodies).
        route = self._route(request)
        query_refuse(request.query_params, getattr(route, "query", None))
        if request.method in BODY_METHODS:
            require_json_object(request)
            # A CSV body's columns are named and checked by its own reader (api.onboarding_csv).
            if route is not None and not isinstance(request.data, CsvTable):  # else 405
                body = route.body() if route.body else None
                unknown_member_refuse(body, request.data)
                # A deprecated member is ignored; the answer (a replay's too) says so.
                self.deprecated_members_used = body is not None and any(
                    isinstance(field, DeprecatedBooleanField) and name in request.data
                    for name, field in body.fields.items()
                )
        self.idempotency_key_begin(request, self.scope.organization)

    def _route(self, request: Request) -> Route | None:
        handler = getattr(self, (request.method or "").lower(), None)
        return getattr(handler, "route", None)

    def query_parse(self, request: Request) -> dict[str, Any]:
        """The validated query string, by the handler's route's `query` serializer."""
        route = self._route(request)
        assert route is not None and route.query is not None
        return query_parse(route.query, request)

    def body(self, request: Request) -> dict[str, Any]:
        """The validated body, by the handler's route's `body` serializer (400 otherwise),
        without the deprecated members it holds: those are ignored, and the answer says so
        with a `Deprecation` header (SPEC §13.6)."""
        route = self._route(request)
        assert route is not None and route.body is not None
        body = route.body(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        for field in body.fields.values():
            if isinstance(field, DeprecatedBooleanField):
                data.pop(field.source, None)
        return data

    def finalize_response(
        self, request: Request, response: Any, *args: Any, **kwargs: Any
    ) -> Response:
        if self.deprecated_members_used:
            response["Deprecation"] = DEPRECATED_SINCE
        return super().finalize_response(request, response, *args, **kwargs)


def require_json_object(request: Request) -> None:
    """Every body is read and checked, also on routes that take no fields (deactivate, cancel):
    not JSON → 415 `unsupportedMediaType`, a JSON value that is not an object → 400
    `invalidRequest`, before the route does anything (SPEC §10.2). An empty body is `{}`."""
    if not isinstance(request.data, dict):
        raise InvalidRequestError("The body must be a JSON object.")


class SerenityView(OrgScopedView):
    serenity_route = True
    require_serenity_active = True
