"""Django's own statements, built but not sent: for a caller that joins several writes into one statement.

A chat turn writes its messages, its route decision and its conversation's row on every message. As three
statements in a transaction that is five round trips to PostgreSQL (``BEGIN`` and ``COMMIT`` included), and on
this platform each round trip costs both sides more CPU than building the statement; joined as data-modifying
``WITH`` parts it is one (:func:`conversations.records.conversation_turn_record`). The ``INSERT`` here is the one
``bulk_create`` sends, from Django's compiler: the same fields, ``pre_save`` (``auto_now_add``), database values
and ``RETURNING`` columns, so the joined statement cannot drift from the ORM's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import AutoField, Model, sql


def insert_statement(objs: Sequence[Model], *, using: str = DEFAULT_DB_ALIAS) -> tuple[str, tuple[Any, ...]]:
    """``(sql, params)`` of the ``INSERT … RETURNING`` that ``bulk_create(objs)`` sends for new rows of one model.

    Nothing is sent. A field may hold an expression (``RawSQL``), compiled in place as ``save()`` would: how a
    row points at a row inserted by an earlier part of the same statement. Related objects are not read: set
    the ``…_id`` attributes. Hand what the statement returns to :func:`inserted`.
    """
    model = type(objs[0])
    opts = model._meta
    fields = [field for field in opts.concrete_fields if not field.generated and not isinstance(field, AutoField)]
    query = sql.InsertQuery(model)
    query.insert_values(fields, objs, raw=False)
    compiler = query.get_compiler(using=using)
    compiler.returning_fields = opts.db_returning_fields  # type: ignore[attr-defined]  # set by execute_sql in Django
    [(statement, params)] = compiler.as_sql()
    return statement, tuple(params)


def inserted(objs: Sequence[Model], rows: Sequence[Sequence[Any]], *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Give ``objs`` the columns their ``INSERT`` returned (in the objects' order) and mark them saved, as
    ``bulk_create`` does."""
    for obj, row in zip(objs, rows, strict=True):
        for value, field in zip(row, obj._meta.db_returning_fields, strict=True):
            setattr(obj, field.attname, value)
        obj._state.adding = False
        obj._state.db = using
