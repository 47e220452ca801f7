"""Query helpers for the hot paths."""

from __future__ import annotations

from typing import TypeVar

from django.db import models

M = TypeVar("M", bound=models.Model)


def unique_or_none(queryset: models.QuerySet[M]) -> M | None:
    """The row of a lookup that matches at most one (a primary or unique key), or None.

    `.first()` orders by the model's ordering or the primary key (and so would a slice of a
    model with a default ordering). That changes nothing when one row at most can match, but
    compiling the ORDER BY costs ~370 Python calls of the ~1 500 a query costs, on lookups that
    every request and step makes (token, organization, brand, attempt, job)."""
    rows = list(queryset.order_by()[:1])
    return rows[0] if rows else None
