"""Per-request / per-task log context (request, org, brand, attempt and job ids)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

LOG_FIELDS = ("request_id", "org_id", "brand_id", "attempt_id", "job_id")

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
