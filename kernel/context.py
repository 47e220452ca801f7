"""Per-request / per-task log context (request, org, brand, attempt and job ids)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

LOG_FIELDS = (
    "request_id",
    "actor",
    "org_id",
    "brand_id",
    "attempt_id",
    "job_id",
    "step_job_id",
)

_context: ContextVar[dict[str, Any] | None] = ContextVar("serenity_log_context", default=None)


def current() -> dict[str, Any]:
    return dict(_context.get() or {})


def bind(**fields: Any) -> None:
    """Add fields to the current context (None values are dropped)."""
    merged = current()
    merged.update({k: str(v) for k, v in fields.items() if v is not None})
    _context.set(merged)


@contextlib.contextmanager
def scope(**fields: Any) -> Iterator[None]:
    token = _context.set({**current(), **{k: str(v) for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def clear() -> None:
    _context.set(None)


def admin_actor(username: str) -> str:
    """How an operator acting through the admin is named in `actor` (and in the records that
    say who did something)."""
    return f"admin: {username}"


def actor_fields(prefix: str) -> dict[str, str | None]:
    """`{prefix}_by_actor` and `{prefix}_request_id` for a record of who did something: the actor
    bound by the API's authentication or an admin action, and the request that did it."""
    bound = current()
    actor = bound.get("actor")
    return {
        f"{prefix}_by_actor": actor[:200] if actor else None,
        f"{prefix}_request_id": bound.get("request_id"),
    }
