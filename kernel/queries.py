"""Query helpers for the hot paths."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, connections, models, router, transaction
from django.db.models import F, Value
from django.db.models.expressions import Col, CombinedExpression

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
    `name__lt`, `__lte`, `__gt`, `__gte`, and two of its own: `name__ne` (`<>`, on a non-null
    column: what `.exclude(name=value)` means there) and `name__null_or` (`name IS NULL OR
    name = value`: a pointer that is empty or already this value). A value may be
    `F("name") + n`. Anything else (a `Q`, a join, another expression) raises `ValueError`: use
    the ORM there.
    """
    using = router.db_for_write(model)
    connection = connections[using]
    meta = model._meta
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
    if not set_shape:
        raise ValueError("update_where: nothing to set")
    where_shape, where_params = _where(model, where, connection)
    if where_shape is None:
        return 0  # as the ORM: nothing can match an empty IN
    params.extend(where_params)
    sql = _update_sql(using, cast(str, meta.db_table), tuple(set_shape), where_shape)
    with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


_OPERATORS = {
    "exact": "=",
    "ne": "<>",
    "null_or": "=",  # (column IS NULL OR column = value)
    "lt": "<",
    "lte": "<=",
    "gt": ">",
    "gte": ">=",
}

WhereShape = tuple[tuple[str, str, int], ...]


def _where(
    model: type[models.Model], where: Mapping[str, Any], connection: Any
) -> tuple[WhereShape | None, list[Any]]:
    """The shape of `where` (column, lookup, arity) and its prepared parameters; no shape when
    nothing can match (an empty IN)."""
    shape: list[tuple[str, str, int]] = []
    params: list[Any] = []
    for key, value in where.items():
        name, _, lookup = key.partition("__")
        field = model._meta.pk if name == "pk" else _concrete_field(model, name)
        assert field is not None
        lookup = lookup or "exact"
        if lookup == "exact" and value is None:
            lookup, value = "isnull", True
        if lookup == "isnull":
            shape.append((cast(str, field.column), "isnull" if value else "notnull", 0))
        elif lookup == "in":
            items = [_prep_lookup(field, item, connection) for item in value]
            if not items:
                return None, []
            shape.append((cast(str, field.column), "in", len(items)))
            params.extend(items)
        elif lookup in _OPERATORS:
            if lookup == "ne" and field.null:
                raise ValueError(f"{key!r}: `ne` is for a non-null column (use the ORM's exclude)")
            shape.append((cast(str, field.column), lookup, 1))
            params.append(_prep_lookup(field, value, connection))
        else:
            raise ValueError(f"unsupported lookup {key!r}")
    return tuple(shape), params


def _conditions(quote: Callable[[str], str], shape: WhereShape, alias: str = "") -> list[str]:
    conditions = []
    for column, lookup, count in shape:
        name = f"{alias}{quote(column)}"
        if lookup == "isnull":
            conditions.append(f"{name} IS NULL")
        elif lookup == "notnull":
            conditions.append(f"{name} IS NOT NULL")
        elif lookup == "in":
            conditions.append(f"{name} IN ({', '.join(['%s'] * count)})")
        elif lookup == "null_or":
            conditions.append(f"({name} IS NULL OR {name} = %s)")
        else:
            conditions.append(f"{name} {_OPERATORS[lookup]} %s")
    return conditions


def _concrete_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = _fields_by_name(model).get(name)
    if field is None:
        raise ValueError(f"{model.__name__} has no column field {name!r}")
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


def db_value(model: type[models.Model], name: str, value: Any, connection: Any) -> Any:
    """`value` as a parameter compared with `model`'s column `name` (a foreign key's by its
    target's field): what the ORM sends for `filter(name=value)`."""
    field = model._meta.pk if name == "pk" else _concrete_field(model, name)
    assert field is not None
    return _prep_lookup(field, value, connection)


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
    where_shape: WhereShape,
) -> str:
    quote = connections[using].ops.quote_name
    sets = [
        f"{quote(column)} = {quote(source)} + %s" if source else f"{quote(column)} = %s"
        for column, source in set_shape
    ]
    conditions = _conditions(quote, where_shape)
    # Identifiers from the models' meta, quoted; every value is a parameter.
    sql = f"UPDATE {quote(table)} SET {', '.join(sets)}"  # noqa: S608
    return f"{sql} WHERE {' AND '.join(conditions)}" if conditions else sql


def fetch_one(
    model: type[M], where: Mapping[str, Any], /, *, related: tuple[str, ...] = ()
) -> M | None:
    """The row of `model.objects.select_related(*related).filter(**where)` that matches at most
    one (a primary or unique key), or None, from SQL built once per shape.

    The steps' reads of their attempt (with its brand and org) and their market are ~2 000
    Python calls each through the ORM, most of them building the same `SELECT` of some sixty
    columns anew. `related` follows non-null foreign keys (`"brand"`, `"brand__organization"`:
    inner joins; each related row is cached on its instance as `select_related` does). `where`
    takes what `update_where` takes, on the model's own columns, and at least one condition."""
    if not where:
        raise ValueError("fetch_one: no condition (it reads one row by a unique key)")
    using = router.db_for_read(model)
    connection = connections[using]
    where_shape, params = _where(model, where, connection)
    if where_shape is None:
        return None
    sql, layout = _select_sql(using, model, related, where_shape)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    instances = []
    for target, start, stop in layout:
        instances.append(instance_from_row(target, row[start:stop], using=using))
    for (field, owner_index), instance in zip(_joins(model, related), instances[1:], strict=True):
        field.set_cached_value(instances[owner_index], instance)
    return cast(M, instances[0])


def instance_from_row(model: type[M], values: Sequence[Any], *, using: str) -> M:
    """The instance of a row of `model`'s concrete columns (in their order), with the converters
    Django's compiler applies to them (JSON; UUIDs and datetimes on SQLite)."""
    connection = connections[using]
    values = list(values)
    for index, functions, column in _converters(connection, model):
        for convert in functions:
            values[index] = convert(values[index], column, connection)
    return model.from_db(using, _attnames(model), values)


@functools.cache
def _attnames(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(f.attname for f in model._meta.concrete_fields)


# Per connection (one per thread): backend converters are methods of the connection's ops.
_row_converters: weakref.WeakKeyDictionary[Any, dict[type[models.Model], list[Any]]] = (
    weakref.WeakKeyDictionary()
)


def _converters(connection: Any, model: type[models.Model]) -> list[tuple[int, list[Any], Col]]:
    by_model = _row_converters.get(connection)
    if by_model is None:
        by_model = _row_converters[connection] = {}
    found = by_model.get(model)
    if found is None:
        found = by_model[model] = []
        for index, field in enumerate(model._meta.concrete_fields):
            column = field.get_col(model._meta.db_table)
            functions = connection.ops.get_db_converters(column) + column.get_db_converters(
                connection
            )
            if functions:
                found.append((index, functions, column))
    return found


def quoted_column(model: type[models.Model], name: str, using: str = DEFAULT_DB_ALIAS) -> str:
    """The quoted column of `model`'s field `name`, for a statement written from the meta."""
    field = model._meta.get_field(name)
    return connections[using].ops.quote_name(cast(str, getattr(field, "column", None)))


def quoted_table(model: type[models.Model], using: str = DEFAULT_DB_ALIAS) -> str:
    return connections[using].ops.quote_name(model._meta.db_table)


@functools.cache
def columns_sql(using: str, model: type[models.Model], alias: str) -> str:
    """`alias."col", ...` of the model's concrete columns, in the order `instance_from_row`
    takes them."""
    quote = connections[using].ops.quote_name
    return ", ".join(f"{alias}.{quote(cast(str, f.column))}" for f in model._meta.concrete_fields)


@functools.cache
def _joins(
    model: type[models.Model], related: tuple[str, ...]
) -> tuple[tuple[models.ForeignKey[Any, Any], int], ...]:
    """For each path of `related`, in order: its last foreign key and the index (0 = `model`,
    then the paths') of the instance that holds it."""
    found: list[tuple[models.ForeignKey[Any, Any], int]] = []
    paths: list[str] = []
    for path in related:
        owner_path, _, name = path.rpartition("__")
        owner_model = model
        if owner_path:
            if owner_path not in paths:
                raise ValueError(f"fetch_one: {path!r} needs {owner_path!r} before it")
            owner_model = found[paths.index(owner_path)][0].related_model
        field = owner_model._meta.get_field(name)
        if not isinstance(field, models.ForeignKey) or field.null:
            raise ValueError(f"fetch_one: {path!r} is not a non-null foreign key")
        found.append((field, paths.index(owner_path) + 1 if owner_path else 0))
        paths.append(path)
    return tuple(found)


@functools.cache
def _select_sql(
    using: str,
    model: type[models.Model],
    related: tuple[str, ...],
    where_shape: WhereShape,
) -> tuple[str, tuple[tuple[type[models.Model], int, int], ...]]:
    """The `SELECT … FROM … JOIN … WHERE … LIMIT 1` and where each model's columns sit."""
    quote = connections[using].ops.quote_name
    tables = [model]
    joins = []
    for index, (field, owner_index) in enumerate(_joins(model, related), start=1):
        target = cast(type[models.Model], field.related_model)
        tables.append(target)
        joins.append(
            f" INNER JOIN {quote(target._meta.db_table)} T{index}"
            f" ON T{owner_index}.{quote(cast(str, field.column))}"
            f" = T{index}.{quote(cast(str, field.target_field.column))}"
        )
    columns: list[str] = []
    layout = []
    start = 0
    for index, table in enumerate(tables):
        columns.append(columns_sql(using, table, f"T{index}"))
        stop = start + len(table._meta.concrete_fields)
        layout.append((table, start, stop))
        start = stop
    conditions = _conditions(quote, where_shape, alias="T0.")
    sql = (
        f"SELECT {', '.join(columns)} FROM {quote(model._meta.db_table)} T0{''.join(joins)}"  # noqa: S608
        f" WHERE {' AND '.join(conditions)} LIMIT 1"
    )
    return sql, tuple(layout)


def insert_rows(*instances: M) -> None:
    """Insert new rows of one model: `bulk_create(instances)`, or `save()` of each, for the hot
    paths (an accept inserts a brand, its attempt, its market and its chain's jobs), from one
    `INSERT … VALUES` built once per model and row count.

    The ORM's insert compiles the statement anew (~500 Python calls a row), and its
    `bulk_create` sends each column as an array for `UNNEST` on PostgreSQL, which psycopg dumps
    element by element. As `save()`: every field's `pre_save` runs (`auto_now`,
    `auto_now_add`), values are prepared by their fields, the instances end as saved rows of
    the database; no signals (the models have none). Every instance carries its primary key
    (a UUID default)."""
    model = type(instances[0])
    using = router.db_for_write(model)
    connection = connections[using]
    fields = model._meta.concrete_fields
    params: list[Any] = []
    for instance in instances:
        if type(instance) is not model or instance.pk is None:
            raise ValueError("insert_rows: rows of one model, each with its primary key")
        params.extend(
            field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields
        )
    sql = _insert_sql(using, model, len(instances))
    with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
        cursor.execute(sql, params)
    for instance in instances:
        instance._state.adding = False
        instance._state.db = using


def insert_row(model: type[M], **values: Any) -> M:
    """`model.objects.create(**values)` through `insert_rows`."""
    instance = model(**values)
    insert_rows(instance)
    return instance


@functools.cache
def _insert_sql(using: str, model: type[models.Model], rows: int) -> str:
    quote = connections[using].ops.quote_name
    fields = model._meta.concrete_fields
    columns = ", ".join(quote(cast(str, field.column)) for field in fields)
    row = f"({', '.join(['%s'] * len(fields))})"
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES {', '.join([row] * rows)}"  # noqa: S608
