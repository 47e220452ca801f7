"""Keyset ("cursor") pagination for the API's lists (SPEC §10.3).

A page is read in the list's stable order, starting strictly after the last row of the previous
page; `limit + 1` rows are read to know whether another page follows. The cursor carries that
last row's sort key, signed (Django's `signing`) with the list's name: clients cannot forge or
mix cursors, and anything that does not verify is a 400 `invalidRequest`. Rows inserted or
deleted between two pages never make a page repeat or skip a row that stayed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.core import signing
from django.db.models import Model, Q, QuerySet

from kernel.errors import InvalidRequestError

T = TypeVar("T", bound=Model)
SALT = "serenity.pagination.cursor"
# Every cursor `cursor_encode` makes (Django's `signing`: URL-safe base64, `:` and a leading `.`
# when compressed) matches this; the OpenAPI document states it for `?cursor=`.
CURSOR_PATTERN = "^[A-Za-z0-9_.:-]+$"
_CURSOR = re.compile(CURSOR_PATTERN)


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


def cursor_decode(cursor: str, *, kind: str, width: int) -> list[Any]:
    try:
        payload = signing.loads(cursor, salt=SALT) if _CURSOR.fullmatch(cursor) else None
    except signing.BadSignature:
        payload = None
    if (
        not isinstance(payload, dict)
        or payload.get("k") != kind
        or not isinstance(payload.get("v"), list)
        or len(payload["v"]) != width
    ):
        raise InvalidRequestError("cursor: not a cursor of this list.", details={"field": "cursor"})
    return list(payload["v"])


def cursor_encode(values: Sequence[Any], *, kind: str) -> str:
    return signing.dumps({"k": kind, "v": list(values)}, salt=SALT, compress=True)


def after(ordering: Sequence[str], values: Sequence[Any]) -> Q:
    """Rows strictly after `values` in `ordering` ("field" ascending, "-field" descending)."""
    condition = Q(pk__in=[])
    equal = Q()
    for name, value in zip(ordering, values, strict=True):
        field = name.lstrip("-")
        lookup = "lt" if name.startswith("-") else "gt"
        condition |= equal & Q(**{f"{field}__{lookup}": value})
        equal &= Q(**{field: value})
    return condition


def keyset_page(
    queryset: QuerySet[T],
    *,
    kind: str,
    ordering: Sequence[str],
    sort_key: Callable[[T], Sequence[Any]],
    cursor: str | None,
    limit: int,
) -> Page[T]:
    """One page of `queryset` in `ordering` (which must be a total order: end on a unique
    field). `sort_key` gives a row's values for `ordering`, as JSON values."""
    if cursor:
        queryset = queryset.filter(
            after(ordering, cursor_decode(cursor, kind=kind, width=len(ordering)))
        )
    rows = list(queryset.order_by(*ordering)[: limit + 1])
    if len(rows) <= limit:
        return Page(items=rows, next_cursor=None)
    items = rows[:limit]
    return Page(items=items, next_cursor=cursor_encode(sort_key(items[-1]), kind=kind))
