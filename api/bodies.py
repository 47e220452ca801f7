"""Typos are refused, not ignored (SPEC §13.6, replacing §7's "unknown fields are ignored"): the
one check of every body and query string against what its route declares, so a route (or a
nested body) added later gets it by declaring its serializer, nothing more.

- A member of a body (or of a nested object, or of an object in a list) that its serializer
  does not declare → 400 `invalidRequest` naming its path in `details.field` (`brands[3].evnts`).
  Deprecated members (`api.fields.DeprecatedBooleanField`) are declared, so they pass.
- A route that takes no body takes `{}` only: any member is unknown.
- A single-valued query parameter (every one but a list field's) given twice → 400 naming it.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from kernel.errors import InvalidRequestError


def unknown_member_refuse(serializer: serializers.Serializer | None, data: Any) -> None:
    """400 naming the first member of `data` that `serializer` (None: a route without a body)
    does not declare, at any depth."""
    path = _unknown(serializer, data, "")
    if path is not None:
        raise InvalidRequestError(f"{path}: not a member of this body.", details={"field": path})


def _unknown(serializer: serializers.Serializer | None, data: Any, path: str) -> str | None:
    if not isinstance(data, dict):
        return None  # not an object: the field's own validation refuses it
    fields = serializer.fields if serializer is not None else {}
    for name, value in data.items():
        where = f"{path}.{name}" if path else str(name)
        field = fields.get(name)
        if field is None or field.read_only:
            return where
        found = _unknown_in_field(field, value, where)
        if found is not None:
            return found
    return None


def _unknown_in_field(field: serializers.Field, value: Any, where: str) -> str | None:
    if isinstance(field, serializers.Serializer):
        return _unknown(field, value, where)
    child = getattr(field, "child", None)
    if not isinstance(child, serializers.Serializer) or not isinstance(value, list):
        return None
    limit = getattr(field, "max_length", None)
    if limit is not None and len(value) > limit:
        return None  # refused by its length first (api.fields.BoundedListField), at once
    for index, item in enumerate(value):
        found = _unknown(child, item, f"{where}[{index}]")
        if found is not None:
            return found
    return None


def query_refuse(request_query: Any, serializer_class: type[serializers.Serializer] | None) -> None:
    """A query parameter the route does not take, or a single-valued one given twice → 400
    `invalidRequest` naming it (SPEC §12.2, §13.6)."""
    fields = serializer_class().fields if serializer_class is not None else {}
    for name in request_query:
        field = fields.get(name)
        if field is None:
            raise InvalidRequestError(
                f"{name}: not a query parameter of this route.", details={"field": name}
            )
        many = isinstance(field, serializers.ListField | serializers.MultipleChoiceField)
        if not many and len(request_query.getlist(name)) > 1:
            raise InvalidRequestError(
                f"{name}: given more than once; it takes one value.", details={"field": name}
            )
