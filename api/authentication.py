"""Bearer API-token authentication (tokens are stored as SHA-256 digests).

Failed authentications are counted per client address; past SERENITY_THROTTLE_AUTH_FAILURES
the address' failed authentications are answered 429 instead of 401 (SPEC §10.5). The limit
refuses failures only: a request with a valid token is never refused by it, whatever its
address did before, so that one bad script behind a NAT does not lock out every client behind
it (SPEC §11.4).
"""

from __future__ import annotations

from typing import Any, NoReturn

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from api.throttling import AuthFailureThrottle
from kernel import context
from serenity.models import ApiToken
from serenity.tokens import token_digest


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        raw = raw.strip()
        if scheme.lower() != "bearer" or not raw or " " in raw:
            self._fail("Invalid authorization header.", request)
        # `get()` on the unique digest: no ORDER BY, unlike `first()` (SQL built per request).
        try:
            token = ApiToken.objects.select_related("user").get(
                token_hash=token_digest(raw), revoked_at=None
            )
        except ApiToken.DoesNotExist:
            token = None
        if token is None or not token.user.is_active:
            self._fail("Invalid token.", request)
        # At most one write a minute per token: last_used_at is for operators, not a hot path.
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        context.bind(actor=f"{token.user.get_username()} (token {token.name or token.prefix})")
        return token.user, token

    @staticmethod
    def _fail(message: str, request: Request) -> NoReturn:
        """A failed authentication: 429 once the address is over its failure limit, else
        counted and 401."""
        failures = AuthFailureThrottle()
        wait = failures.refusal_wait(request)
        if wait is not None:
            raise exceptions.Throttled(wait=wait)
        failures.record_failure()
        raise exceptions.AuthenticationFailed(message)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
