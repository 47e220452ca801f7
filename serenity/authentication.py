"""Bearer API-token authentication (tokens are stored as SHA-256 digests).

Failed authentications are counted per client address; an address over
SERENITY_THROTTLE_AUTH_FAILURES is answered 429 before its token is looked at (SPEC §10.5).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from kernel import context
from serenity.models import ApiToken
from serenity.throttling import AuthFailureThrottle
from serenity.tokens import token_digest


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        failures = AuthFailureThrottle()
        wait = failures.refusal_wait(request)
        if wait is not None:
            raise exceptions.Throttled(wait=wait)
        scheme, _, raw = header.partition(" ")
        raw = raw.strip()
        if scheme.lower() != "bearer" or not raw or " " in raw:
            failures.record_failure()
            raise exceptions.AuthenticationFailed("Invalid authorization header.")
        # `get()` on the unique digest: no ORDER BY, unlike `first()` (SQL built per request).
        try:
            token = ApiToken.objects.select_related("user").get(
                token_hash=token_digest(raw), revoked_at=None
            )
        except ApiToken.DoesNotExist:
            token = None
        if token is None or not token.user.is_active:
            failures.record_failure()
            raise exceptions.AuthenticationFailed("Invalid token.")
        # At most one write a minute per token: last_used_at is for operators, not a hot path.
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        context.bind(actor=f"{token.user.get_username()} (token {token.name or token.prefix})")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
