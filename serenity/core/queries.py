"""Query helpers for the hot paths."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from django.db import connections, models, router, transaction
from django.db.models import F, Value
from django.db.models.expressions import CombinedExpression

M = TypeVar("M", bound=models.Model)


def unique_or_none(queryset: models.QuerySet[M]) -> M | None:
    """The row of a lookup that matches at most one (a primary or unique key), or None.

    `.first()` orders by the model's ordering or the primary key (and so would a slice of a
    model with a default ordering). That changes nothing when one row at most can match, but
    compiling the ORDER BY costs ~370 Python calls of the ~1 500 a query costs, on lookups that
    every request and step makes (token, organization, brand, attempt, job)."""
    rows = list(queryset.order_by()[:1])
    return rows[0] if rows else None


def update_where(model: type[models.Model], where: Mapping[str, Any], /, **values: Any) -> int:
    """`model.objects.filter(**where).update(**values)` for the hot paths' conditional updates,
    from SQL built once per shape (which conditions, which columns) instead of compiled anew.

    A step makes a dozen such writes (finish a job, link its successor, record a candidate,
    mark a market); the ORM builds each from a fresh `Query` (~600-1 500 Python calls), where
    the statement only ever differs in its parameters. Same semantics as the ORM's update: the
    conditions are AND-ed, values are prepared by their fields (`get_db_prep_save`, model
    instances by their key), no signals, no `auto_now`; returns the number of rows changed.

    `where` takes `name` (`pk` too; `None` means IS NULL) and `name__in`, `name__isnull`,
    `name__lt`, `__lte`, `__gt`, `__gte`; a value may be `F("name") + n`. Anything else (a `Q`,
    a join, another expression) raises `ValueError`: use the ORM there.
    """
    using = router.db_for_write(model)
    connection = connections[using]
    meta = model._meta
    where_shape: list[tuple[str, str, int]] = []
    params: list[Any] = []
    set_shape: list[tuple[str, str | None]] = []
    for name, value in values.items():
        field = _concrete_field(model, name)
        if isinstance(value, CombinedExpression):
            source, step = _increment(model, value)
            set_shape.append((cast(str, field.column), source))
            params.append(step)
            continue
        if hasattr(value, "resolve_expression"):
            raise ValueError(f"update_where: {name}={value!r} is not a plain value")
        if isinstance(value, models.Model):
            value = value.prepare_database_save(field)
        set_shape.append((cast(str, field.column), None))
        params.append(field.get_db_prep_save(value, connection))
    for key, value in where.items():
        name, _, lookup = key.partition("__")
        field = meta.pk if name == "pk" else _concrete_field(model, name)
        assert field is not None
        lookup = lookup or "exact"
        if lookup == "exact" and value is None:
            lookup, value = "isnull", True
        if lookup == "isnull":
            where_shape.append((cast(str, field.column), "isnull" if value else "notnull", 0))
        elif lookup == "in":
            items = [_prep_lookup(field, item, connection) for item in value]
            if not items:
                return 0  # as the ORM: nothing can match an empty IN
            where_shape.append((cast(str, field.column), "in", len(items)))
            params.extend(items)
        elif lookup in _OPERATORS:
            where_shape.append((cast(str, field.column), lookup, 1))
            params.append(_prep_lookup(field, value, connection))
        else:
            raise ValueError(f"update_where: unsupported lookup {key!r}")
    if not set_shape:
        raise ValueError("update_where: nothing to set")
    sql = _update_sql(using, cast(str, meta.db_table), tuple(set_shape), tuple(where_shape))
    with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


_OPERATORS = {"exact": "=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}


def _concrete_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = _fields_by_name(model).get(name)
    if field is None:
        raise ValueError(f"update_where: {model.__name__} has no column field {name!r}")
    return field


@functools.cache
def _fields_by_name(model: type[models.Model]) -> dict[str, models.Field[Any, Any]]:
    """Local concrete fields by name and by attname (`brand` and `brand_id`)."""
    fields: dict[str, models.Field[Any, Any]] = {}
    for field in model._meta.concrete_fields:
        fields[field.name] = field
        fields[field.attname] = field
    return fields


def _increment(model: type[models.Model], value: CombinedExpression) -> tuple[str, int]:
    """The column and the step of `F("name") + n` (the only expression taken)."""
    lhs, rhs = value.lhs, value.rhs
    if not (
        value.connector == "+"
        and isinstance(lhs, F)
        and isinstance(rhs, Value)
        and isinstance(rhs.value, int)
    ):
        raise ValueError(f"update_where: {value!r} is not F(name) + n")
    return cast(str, _concrete_field(model, lhs.name).column), rhs.value  # type: ignore[attr-defined]


def _prep_lookup(field: models.Field[Any, Any], value: Any, connection: Any) -> Any:
    if isinstance(value, models.Model):
        value = value.pk
    if field.remote_field is not None:  # a foreign key compares its target's values
        field = field.target_field  # type: ignore[attr-defined]
    return field.get_db_prep_value(value, connection, prepared=False)


@functools.cache
def _update_sql(
    using: str,
    table: str,
    set_shape: tuple[tuple[str, str | None], ...],
    where_shape: tuple[tuple[str, str, int], ...],
) -> str:
    quote = connections[using].ops.quote_name
    sets = [
        f"{quote(column)} = {quote(source)} + %s" if source else f"{quote(column)} = %s"
        for column, source in set_shape
    ]
    conditions = []
    for column, lookup, count in where_shape:
        if lookup == "isnull":
            conditions.append(f"{quote(column)} IS NULL")
        elif lookup == "notnull":
            conditions.append(f"{quote(column)} IS NOT NULL")
        elif lookup == "in":
            conditions.append(f"{quote(column)} IN ({', '.join(['%s'] * count)})")
        else:
            conditions.append(f"{quote(column)} {_OPERATORS[lookup]} %s")
    # Identifiers from the models' meta, quoted; every value is a parameter.
    sql = f"UPDATE {quote(table)} SET {', '.join(sets)}"  # noqa: S608
    return f"{sql} WHERE {' AND '.join(conditions)}" if conditions else sql
