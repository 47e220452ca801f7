"""Idempotency keys (SPEC §10.3): the storage behind the `Idempotency-Key` header.

A keyed POST or PATCH first *claims* its key by inserting a row; the unique constraint on
(user, org, method, path, key) lets exactly one of several concurrent requests through, with no
read-then-write race. The winner runs, then records its answer on the row (or, for a 5xx,
deletes the row so that the key can be used again). Everyone else finds the row:

- a different body (compared as the SHA-256 of canonical JSON) → 422 `idempotencyKeyReused`;
- the same body while the first is still running → 409 `idempotencyKeyInUse` (the client retries
  later and then gets the replay; we never make a request wait on another one);
- the same body after the answer was recorded → that answer, replayed.

Rows live `IDEMPOTENCY_TTL_SECONDS` after the answer; beat deletes expired ones. A claim that
was never answered (its process died) is taken over after `IDEMPOTENCY_IN_FLIGHT_SECONDS`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from kernel.errors import InvalidRequestError
from serenity.exceptions import IdempotencyKeyInUseError, IdempotencyKeyReusedError
from serenity.models import IdempotencyKey, Organization

MAX_KEY_LENGTH = 255
REPLAYED_HEADERS = ("Location", "Retry-After")
# A claim is retried a few times only when rows vanish under it (released or purged meanwhile).
CLAIM_ATTEMPTS = 3


@dataclass(frozen=True)
class StoredAnswer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


def idempotency_key_parse(value: str) -> str:
    """1 to 255 printable ASCII characters (space to tilde); else 400 `invalidRequest`."""
    if not 1 <= len(value) <= MAX_KEY_LENGTH or any(not " " <= ch <= "~" for ch in value):
        raise InvalidRequestError(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters.",
            details={"field": "Idempotency-Key"},
        )
    return value


def request_digest(data: Any) -> str:
    """SHA-256 of the body as canonical JSON: key order and whitespace do not matter."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotency_key_claim(
    *,
    user_id: int,
    organization: Organization,
    method: str,
    path: str,
    key: str,
    digest: str,
) -> IdempotencyKey | StoredAnswer:
    """Claim the key for this request (returns the new row: run the work, then call
    `idempotency_key_record` or `idempotency_key_release`), or return the stored answer to
    replay. Raises `IdempotencyKeyReusedError` (another body) or `IdempotencyKeyInUseError`
    (the first request is still running)."""
    scope = {
        "user_id": user_id,
        "organization": organization,
        "method": method,
        "path": path,
        "key": key,
    }
    for _ in range(CLAIM_ATTEMPTS):
        now = timezone.now()
        try:
            # Its own (sub)transaction: a lost race must not break an enclosing one.
            with transaction.atomic():
                return IdempotencyKey.objects.create(
                    **scope,
                    request_digest=digest,
                    expires_at=now + timedelta(seconds=settings.IDEMPOTENCY_TTL_SECONDS),
                )
        except IntegrityError:
            pass
        existing = IdempotencyKey.objects.filter(**scope).first()
        if existing is None:
            continue  # released (a 5xx) or purged since our INSERT failed: claim again
        if _stale(existing, now):
            # By primary key: a newer claim of the same key is another row and stays.
            IdempotencyKey.objects.filter(pk=existing.pk).delete()
            continue
        if existing.request_digest != digest:
            raise IdempotencyKeyReusedError()
        if existing.is_in_flight:
            raise IdempotencyKeyInUseError()
        assert existing.response_status is not None
        return StoredAnswer(
            status=existing.response_status,
            body=existing.response_body,
            headers=dict(existing.response_headers),
        )
    raise IdempotencyKeyInUseError()


def _stale(row: IdempotencyKey, now: datetime) -> bool:
    """Expired, or a claim never answered within `IDEMPOTENCY_IN_FLIGHT_SECONDS` (its process
    died): the key is free to claim again."""
    abandoned_at = now - timedelta(seconds=settings.IDEMPOTENCY_IN_FLIGHT_SECONDS)
    return row.expires_at <= now or (row.is_in_flight and row.created_at <= abandoned_at)


def idempotency_key_record(
    *, claim: IdempotencyKey, status: int, body: Any, headers: dict[str, str]
) -> None:
    """Store the answer of a claimed key (never a 5xx: release those)."""
    kept = {name: headers[name] for name in REPLAYED_HEADERS if name in headers}
    IdempotencyKey.objects.filter(pk=claim.pk, response_status__isnull=True).update(
        response_status=status,
        response_body=body,
        response_headers=kept,
        expires_at=timezone.now() + timedelta(seconds=settings.IDEMPOTENCY_TTL_SECONDS),
    )


def idempotency_key_release(*, claim: IdempotencyKey) -> None:
    """Forget a claim whose request failed with a 5xx: the same key may be used again."""
    IdempotencyKey.objects.filter(pk=claim.pk).delete()


def idempotency_keys_purge() -> int:
    """Delete expired keys (beat). Returns how many rows went."""
    deleted, _ = IdempotencyKey.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted
