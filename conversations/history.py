"""The conversation's recent history, as the models read it: one definition, read two ways.

A turn reads the conversation's last ``CONVERSATION_HISTORY_LIMIT`` messages before any node runs: on PostgreSQL
inside the statement that takes the turn's ticket (:func:`history_read`, :func:`history_parse`;
:func:`conversations.ordering.ticket_take`), elsewhere on its own (:func:`conversation_history`). The specialists,
the supervisor's review, the gateway's handoff summary and the person an escalation goes to read it as
:class:`HistoryEntry` values, oldest first.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any, NamedTuple

from django.db import connection

from common.infra.statements import statement_cursor
from conversations.models import Message, MessageRole

# What a model's history holds: the customer's messages, the answers, and what people wrote to the customer (a model
# reads those as answers).
HISTORY_ROLES = (MessageRole.USER.value, MessageRole.ASSISTANT.value, MessageRole.HUMAN.value)


class HistoryEntry(NamedTuple):
    """A stored message as the model's history holds it."""

    role: str  # "user" or "assistant"
    content: str
    message_id: int | None = None  # the stored message's id (None: not one of this database's rows)


def conversation_history(
    conversation_pk: int, *, ended_at: dt.datetime | None, limit: int, between: tuple[int, int] | None = None
) -> tuple[HistoryEntry, ...]:
    """The conversation's last ``limit`` user and assistant messages (and people's replies: the desk's), oldest first,
    as :class:`HistoryEntry`; with ``between``, of those whose ids lie strictly between its two (what left the
    window since the summary was written, :mod:`conversations.memory.summary`).

    A session ended through the API (``ended_at``) starts afresh: earlier messages stay stored but out of the
    model's view. Written as SQL, as the ticket's take is: it runs on every message (docs/benchmarks.md).
    """
    table = connection.ops.quote_name(Message._meta.db_table)
    params: list[Any] = [conversation_pk, *HISTORY_ROLES]
    since = ""
    if ended_at is not None:
        since = " AND created_at > %s"
        params.append(connection.ops.adapt_datetimefield_value(ended_at))
    if between is not None:
        since += " AND id > %s AND id < %s"
        params += between
    statement = (
        f"SELECT role, content, id FROM {table} WHERE conversation_id = %s AND role IN (%s, %s, %s){since}"  # noqa: S608  # the model's table; values are parameters
        " ORDER BY created_at DESC, id DESC LIMIT %s"
    )
    with statement_cursor() as cursor:
        cursor.execute(statement, [*params, limit])
        recent = cursor.fetchall()
    return tuple(HistoryEntry(role, content, pk) for role, content, pk in reversed(recent))


def history_rows(conversation: str) -> str:
    """``FROM … WHERE …`` of the conversation's history messages since the session's last end, for a statement over
    the conversation's row (``conversation``: its table, quoted): what :func:`history_read` and the summary's read of
    what left the window (:func:`conversations.memory.summary.summary_left_read`) select from. The roles are the
    module's own constants, written into the statement."""
    return _history_rows(conversation, connection.vendor)


@functools.lru_cache(maxsize=16)
def _history_rows(conversation: str, vendor: str) -> str:
    """:func:`history_rows` for one database (``vendor``), made once: the ticket's statement reads it on every
    message."""
    table = connection.ops.quote_name(Message._meta.db_table)
    roles = ", ".join(f"'{role}'" for role in HISTORY_ROLES)
    return (  # the model's names and the module's constants
        f"FROM {table} WHERE conversation_id = {conversation}.id AND role IN ({roles})"
        f" AND ({conversation}.ended_at IS NULL OR created_at > {conversation}.ended_at)"
    )


def history_read(*, conversation: str, limit: int) -> tuple[str, list[Any]] | None:
    """``(sql, params)`` of the conversation's history (as :func:`conversation_history` reads it) as one JSON array, for
    a statement over the conversation's row (``conversation``: its table, quoted): how the ticket's statement brings
    the history along (:func:`conversations.ordering.ticket_take`). ``None`` where the database has no JSON
    aggregate of the kind (SQLite, the quick start: the history is then read on its own)."""
    if connection.vendor != "postgresql":
        return None
    return _history_read(conversation), [limit]


@functools.lru_cache(maxsize=16)
def _history_read(conversation: str) -> str:
    """:func:`history_read`'s SQL (PostgreSQL's), made once: the ticket's statement brings it on every message."""
    return (
        "(SELECT json_agg(json_build_array(h.role, h.content, h.id) ORDER BY h.created_at, h.id) FROM "  # noqa: S608  # history_rows' names and constants; the limit a parameter
        f"(SELECT role, content, id, created_at {history_rows(conversation)} ORDER BY created_at DESC, id DESC"
        " LIMIT %s) h)"
    )


def history_parse(read: list[Any] | None) -> tuple[HistoryEntry, ...]:
    """The history :func:`history_read` brought (decoded), oldest first."""
    return tuple(HistoryEntry(role, content, pk) for role, content, pk in read or ())
