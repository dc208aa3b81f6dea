"""Django's own statements, built but not sent: for a caller that joins several writes into one statement.

A chat turn writes its messages, its route decision and its conversation's row on every message. As three
statements in a transaction that is five round trips to PostgreSQL (``BEGIN`` and ``COMMIT`` included), and on
this platform each round trip costs both sides more CPU than building the statement; joined as data-modifying
``WITH`` parts it is one (:func:`conversations.records.conversation_turn_record`).

The ``INSERT`` here is the one ``bulk_create`` sends — the same columns, ``pre_save`` (``auto_now_add``), database
values and ``RETURNING`` columns, tested to be equal — without running Django's query compiler for every
statement: what a model's insert needs (its table, fields, columns, returned columns) is worked out once per model
and database, and a row's values are each field's own ``pre_save`` and ``get_db_prep_save``, as the compiler calls
them. That compiler cost a turn more CPU than sending the statement (docs/benchmarks.md).

A value that Django's stock fields would hand on as it is, or through one backend method, is prepared so directly
(:func:`db_value`): a text in a ``CharField``, an integer in an ``IntegerField`` or a key, an aware datetime. Each
``get_db_prep_save`` goes through three to five of the field's methods, and a turn's statement holds about sixty
values; every other value, and every field of another class, takes ``get_db_prep_save`` itself.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import (
    AutoField,
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    DateTimeField,
    Field,
    FloatField,
    ForeignKey,
    IntegerField,
    Model,
    PositiveBigIntegerField,
    PositiveIntegerField,
    PositiveSmallIntegerField,
    SmallAutoField,
    SmallIntegerField,
    TextField,
    sql,
)
from django.db.models.constants import OnConflict
from django.db.models.expressions import RawSQL

from common.infra import stock_paths


def statement_cursor(*, using: str = DEFAULT_DB_ALIAS) -> CursorWrapper:
    """A cursor for a statement the message path sends on every message: on PostgreSQL one that binds its values
    on the server, so the statement is prepared once per connection (``common.infra.postgresql``); elsewhere
    Django's."""
    connection = connections[using]
    bound = getattr(connection, "bound_cursor", None)
    return bound() if bound is not None else connection.cursor()


@dataclass(frozen=True)
class SqlValue:
    """A column's value written as SQL in the ``INSERT`` (with its own parameters): how a row points at a row that
    an earlier part of the same statement inserts. Cheaper than an expression (``RawSQL`` builds a model field
    and takes the query compiler), for a statement built on every message."""

    sql: str
    params: tuple[Any, ...] = ()


# What Django's stock fields do with a value of each exact type (read from their get_prep_value and
# get_db_prep_value; common/tests/test_statements.py holds every pair against get_db_prep_save): nothing (None), or
# one method of the backend's operations, called as ``prepare(connection.ops, value)``. ``None`` stays ``None``.
Prepare = Callable[[Any, Any], Any]
_SLOW = object()  # get_db_prep_save itself
_NAIVE = object()  # a naive datetime: Django warns and makes it aware, so get_db_prep_save prepares it
_TEXTS = (CharField, TextField)
_INTEGERS = (
    IntegerField,
    SmallIntegerField,
    BigIntegerField,
    PositiveIntegerField,
    PositiveSmallIntegerField,
    PositiveBigIntegerField,
)
_KEYS = (AutoField, BigAutoField, SmallAutoField)


class _Preparing(dict[type, Any]):
    """A field's preparation by the value's exact type: ``None`` (kept), a :data:`Prepare`, or :data:`_SLOW`. A
    text field keeps any ``str`` (a ``TextChoices`` member too: its ``to_python`` hands a ``str`` back as it is)."""

    def __init__(self, direct: dict[type, Prepare | None], *, texts: bool = False) -> None:
        super().__init__(direct)
        self.texts = texts

    def __missing__(self, kind: type) -> Any:
        self[kind] = prepare = None if self.texts and issubclass(kind, str) else _SLOW
        return prepare


def _key(ops: Any, value: int) -> Any:
    return ops.validate_autopk_value(value)  # after int(value), which keeps an int


def _integer(internal: str) -> Prepare:
    def prepare(ops: Any, value: int) -> Any:
        return ops.adapt_integerfield_value(value, internal)  # after int(value)

    return prepare


def _aware(ops: Any, value: dt.datetime) -> Any:
    return ops.adapt_datetimefield_value(value) if value.utcoffset() is not None else _NAIVE


@functools.cache
def _preparing(field: Field) -> _Preparing:
    """How ``field`` prepares a value of each type (above): what a stock class does directly, the rest
    :data:`_SLOW`. The same on every backend: what differs is the backend's method, given at the call."""
    kind, none = type(field), type(None)
    if kind is ForeignKey and type(field.target_field) in _KEYS:  # type: ignore[attr-defined]  # a ForeignKey's
        return _Preparing({int: _key, none: None})
    if kind in _TEXTS:
        return _Preparing({str: None, none: None}, texts=True)  # to_python keeps a str
    if kind in _INTEGERS:
        return _Preparing({int: _integer(field.get_internal_type()), none: None})
    if kind is FloatField:
        return _Preparing({float: None, none: None})  # float() keeps a float
    if kind is BooleanField:
        return _Preparing({bool: None, none: None})  # to_python keeps a bool
    if kind is DateTimeField:
        return _Preparing({dt.datetime: _aware, none: None})
    return _Preparing({})


def db_value(field: Field, value: Any, connection: BaseDatabaseWrapper) -> Any:
    """``field.get_db_prep_save(value, connection)``; for the values of :func:`_preparing`, without the field's chain
    of methods."""
    prepare = _preparing(field)[type(value)]
    if prepare is None:
        return value
    if prepare is not _SLOW and (prepared := prepare(connection.ops, value)) is not _NAIVE:
        return prepared
    return field.get_db_prep_save(value, connection=connection)


@dataclass(frozen=True)
class _InsertShape:
    """What every ``INSERT`` of one model's new rows shares."""

    head: str  # INSERT INTO "table" ("column", …) VALUES
    head_ignoring: str  # the same, new rows only: rows whose unique columns are taken are left out
    ignoring: str  # what follows the values then (PostgreSQL: ON CONFLICT DO NOTHING; SQLite: INSERT OR IGNORE before)
    fields: tuple[Field, ...]
    # Each field's: its attribute, whether its own pre_save runs (auto_now_add) and how its values are prepared.
    columns: tuple[tuple[Field, str, bool, _Preparing], ...]
    returning: str  # RETURNING "table"."id", … ("" where the database returns nothing)
    returned: tuple[Field, ...]


_shapes: dict[tuple[type[Model], str], _InsertShape] = {}


def _shape(model: type[Model], using: str) -> _InsertShape:
    shape = _shapes.get((model, using))
    if shape is None:
        connection = connections[using]
        quote = connection.ops.quote_name
        opts = model._meta
        fields = tuple(
            field for field in opts.concrete_fields if not field.generated and not isinstance(field, AutoField)
        )
        returned = tuple(opts.db_returning_fields) if connection.features.can_return_rows_from_bulk_insert else ()
        returning = ""
        if returned:
            # Django's (PostgreSQL's: RETURNING "table"."column"), not in django-stubs.
            sql_text, _ = connection.ops.return_insert_columns(returned) or ("", ())  # type: ignore[attr-defined]
            returning = f" {sql_text}" if sql_text else ""
        target = f"{quote(str(opts.db_table))} ({', '.join(quote(str(field.column)) for field in fields)}) VALUES "
        ignoring = connection.ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None)
        shape = _shapes[(model, using)] = _InsertShape(
            head=f"{connection.ops.insert_statement(on_conflict=None)} {target}",
            head_ignoring=f"{connection.ops.insert_statement(on_conflict=OnConflict.IGNORE)} {target}",
            ignoring=f" {ignoring}" if ignoring else "",
            fields=fields,
            columns=tuple(
                (
                    field,
                    str(field.attname),
                    type(field).pre_save is not Field.pre_save,
                    _preparing(field),
                )
                for field in fields
            ),
            returning=returning,
            returned=returned,
        )
    return shape


def insert_statement(
    objs: Sequence[Model], *, using: str = DEFAULT_DB_ALIAS, conflicts_ignored: bool = False, returning: str = ""
) -> tuple[str, list[Any]]:
    """``(sql, params)`` of the ``INSERT … RETURNING`` that ``bulk_create(objs)`` sends for new rows of one model.

    Nothing is sent. A field may hold a :class:`SqlValue`, written in place, or an expression (``RawSQL``),
    compiled in place as ``save()`` would. Related objects are not read: set the ``…_id`` attributes. Hand what the
    statement returns to :func:`inserted`.

    ``conflicts_ignored``: the statement of ``bulk_create(objs, ignore_conflicts=True)``, which writes only the rows
    whose unique columns are free and returns nothing. ``returning``: the caller's own ``RETURNING`` list (SQL over
    the inserted row, no parameters of its own), in place of the model's returned columns: one row for each row
    written.
    """
    sql_text, params = (
        _compiled_insert(objs, using, conflicts_ignored) if stock_paths() else _insert(objs, using, conflicts_ignored)
    )
    return (f"{sql_text} RETURNING {returning}" if returning else sql_text), params


def _insert(objs: Sequence[Model], using: str, conflicts_ignored: bool) -> tuple[str, list[Any]]:
    model = type(objs[0])
    shape = _shape(model, using)
    connection = connections[using]
    ops = connection.ops
    compiler: Any = None
    written: list[tuple[int, str]] = []  # (the value's place, its SQL) where a value is not a plain parameter
    params: list[Any] = []
    place = 0
    for obj in objs:
        for field, attname, saving, preparing in shape.columns:
            value = field.pre_save(obj, add=True) if saving else getattr(obj, attname)
            prepare = preparing[type(value)]
            if prepare is None:  # what get_db_prep_save gives back unchanged (see _preparing)
                params.append(value)
            elif prepare is not _SLOW and (prepared := prepare(ops, value)) is not _NAIVE:
                params.append(prepared)
            elif isinstance(value, SqlValue):
                written.append((place, value.sql))
                params.extend(value.params)
            elif hasattr(value, "resolve_expression"):
                if compiler is None:
                    compiler = sql.InsertQuery(model).get_compiler(using=using)
                placeholder, values = compiler.compile(compiler.prepare_value(field, value))
                written.append((place, placeholder))
                params.extend(values)
            else:
                params.append(field.get_db_prep_save(value, connection=connection))
            place += 1
    return _insert_text(model, using, len(objs), tuple(written), conflicts_ignored), params


@functools.lru_cache(maxsize=256)
def _insert_text(
    model: type[Model], using: str, count: int, written: tuple[tuple[int, str], ...], ignoring: bool
) -> str:
    """The ``INSERT`` of ``count`` rows of ``model``, ``%s`` for each value but those ``written`` (place, SQL). Kept:
    a turn's statements have a few shapes, sent again and again, and the same text is then the same object, whose
    hash the caches of prepared statements downstream (``common.infra.postgresql``, psycopg's) read at once."""
    shape = _shape(model, using)
    width = len(shape.columns)
    placeholders = ["%s"] * (count * width)
    for place, text in written:
        placeholders[place] = text
    rows = ", ".join(
        f"({', '.join(placeholders[start : start + width])})" for start in range(0, len(placeholders), width)
    )
    if ignoring:
        return f"{shape.head_ignoring}{rows}{shape.ignoring}"
    return f"{shape.head}{rows}{shape.returning}"


def _compiled_insert(objs: Sequence[Model], using: str, conflicts_ignored: bool = False) -> tuple[str, list[Any]]:
    """The stock path (``STOCK_PATHS``): the statement as Django's insert compiler builds it for ``bulk_create``, a
    :class:`SqlValue` handed to it as the ``RawSQL`` expression it stands for."""
    model = type(objs[0])
    opts = model._meta
    connection = connections[using]
    fields = [field for field in opts.concrete_fields if not field.generated and not isinstance(field, AutoField)]
    written: list[tuple[Model, str, SqlValue]] = []
    for obj in objs:
        for field in fields:
            value = getattr(obj, field.attname)
            if isinstance(value, SqlValue):
                written.append((obj, field.attname, value))
                # The SQL is the caller's own code, its values bound as parameters, as on the fast path.
                setattr(obj, field.attname, RawSQL(value.sql, value.params, output_field=field))  # noqa: S611
    try:
        query = sql.InsertQuery(model, on_conflict=OnConflict.IGNORE if conflicts_ignored else None)
        query.insert_values(fields, list(objs))
        compiler: Any = query.get_compiler(using=using)
        if connection.features.can_return_rows_from_bulk_insert and not conflicts_ignored:
            compiler.returning_fields = opts.db_returning_fields
        [(text, params)] = compiler.as_sql()
    finally:
        for obj, attname, value in written:
            setattr(obj, attname, value)
    return text, list(params)


def inserted(objs: Sequence[Model], rows: Sequence[Sequence[Any]], *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Give ``objs`` the columns their ``INSERT`` returned (in the objects' order) and mark them saved, as
    ``bulk_create`` does."""
    for obj, row in zip(objs, rows, strict=True):
        for value, field in zip(row, obj._meta.db_returning_fields, strict=True):
            setattr(obj, field.attname, value)
        obj._state.adding = False
        obj._state.db = using
