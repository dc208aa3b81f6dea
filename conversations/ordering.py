"""One turn at a time per conversation, in arrival order, without holding a lock across a model call.

A message takes a ticket with one ``UPDATE … RETURNING`` that locks the
conversation row for that statement only (the conversation is created on its
first message) and returns its state; the turn runs when the
conversation's ``turn_tickets_done`` reaches its ticket, and the transaction
that persists the turn moves ``turn_tickets_done`` on. Waiting is polling
with a short back-off, each poll a single indexed read on a pooled
connection given straight back, so a waiting request holds neither a lock nor
a connection.

Every ticket is handed on exactly once, and only when its turn has come: every
hand-over is the conditional ``turn_tickets_done = ticket → ticket + 1``
(:func:`ticket_pass`), so it can never move the conversation back, skip
an earlier ticket or count twice. Who hands it on:

* the turn's own persisting transaction, when the turn is answered;
* :func:`ticket_release`, when the turn failed before persisting. A turn that
  failed while it waited (its poll met a database outage) releases a ticket whose
  turn has not come: the release is queued to this process's *hand-on* thread,
  which passes it when its turn comes. If the release's write fails too (the
  database is gone: the error that failed the turn), the hand-on thread retries
  it with back-off until the database answers, and logs that it did;
* :func:`ticket_abandon`, when the request was cancelled (the client went away
  and the ASGI handler cancelled the view) while it waited or ran: a cancelled
  task cannot be trusted to await anything more, so the hand-on thread waits for
  the ticket's turn and passes it at once. The abandoned message stores nothing;
* the lease, when the holder's process died: after
  ``CONVERSATION_TURN_LEASE_SECONDS`` without progress the next waiter skips the
  stalled ticket. A skipped turn that comes back late still stores its messages
  (nothing is lost), after the ones that overtook it, and moves nothing.

A turn cancelled while its persisting transaction is already on its way may
race its own hand-on: whichever updates the row first moves the counter, the
other finds it moved (PostgreSQL re-reads a row it waited for) and moves
nothing; the turn's messages are stored either way.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, InterfaceError, OperationalError, connection, connections
from django.db.models import F, Field, JSONField
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from common.infra.crossing import on_the_request_thread
from common.infra.metrics import ticket_wait_observe
from common.infra.statements import db_value, insert_statement, statement_cursor
from conversations.models import Conversation

logger = logging.getLogger(__name__)

POLL_FIRST_SECONDS = 0.005
POLL_MAX_SECONDS = 0.2
# The hand-on thread's pause after a failed write: doubling from the first to the last. The last is what a held
# conversation may wait, after the database's return, for each ticket that could not be handed on during it.
RETRY_FIRST_SECONDS = 0.25
RETRY_MAX_SECONDS = 1.0
# Errors of a database that cannot be reached (psycopg's pool timeout arrives as OperationalError).
UNREACHABLE = (OperationalError, InterfaceError)


def _give_back_connection() -> None:
    if not connection.in_atomic_block:
        connection.close()


# State the turn needs, returned by the statement that takes the ticket (one round trip when nobody waits).
STATE_COLUMNS = (
    "state",
    "active_specialist",
    "active_intent",
    "backend_task",
    "sub_conversation",
    "pending_result",
    "pending_permission",
    "granted_permissions",
    "goal_state",
    "stack",
    "cohort",
    "handoff_kinds",
    "created_at",
    "ended_at",
    "escalation_id",
    "fallbacks_in_row",
    "outcome",
    "language",
    "message_count",
    "memory_summary",
    "memory_summary_through",
    "memory_summary_at_count",
)
JSON_COLUMNS = frozenset(
    {"sub_conversation", "pending_result", "pending_permission", "granted_permissions", "goal_state", "stack"}
)


def conversation_table() -> str:
    """The conversation's table, quoted: what a caller's extra read (:func:`ticket_take`'s ``and_read``) names."""
    return connection.ops.quote_name(Conversation._meta.db_table)


@functools.lru_cache(maxsize=64)
def _take_sql(and_read: str = "") -> str:
    """The ticket statement; the table and column names are the model's own constants, values are parameters.
    ``and_read``: an expression returned too when the ticket's turn has come (``NULL`` otherwise). Kept for the few
    expressions a profile's turns bring along: the same text is then the same object, its hash kept downstream
    (the bound cursor's cache of converted statements, psycopg's of prepared ones)."""
    return (
        f"UPDATE {conversation_table()} SET turn_tickets_issued = turn_tickets_issued + 1, "  # noqa: S608
        "turn_started_at = CASE WHEN turn_tickets_done = turn_tickets_issued THEN %s ELSE turn_started_at END "
        f"WHERE conversation_key = %s RETURNING {_taken_columns(and_read)}"
    )


def _taken_columns(and_read: str) -> str:
    """What a ticket's statement returns of the conversation's row (:func:`_taken` reads it)."""
    ready = f", CASE WHEN turn_tickets_done = turn_tickets_issued - 1 THEN {and_read} END" if and_read else ""
    return f"id, turn_tickets_issued, turn_tickets_done, {', '.join(STATE_COLUMNS)}{ready}"


def _aware(value: Any) -> datetime:
    """A datetime column read by a raw cursor: SQLite may give text or a naive UTC datetime."""
    if isinstance(value, str):
        value = parse_datetime(value)
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


def _json_value(column: str, value: Any) -> Any:
    """A JSON column read by a raw cursor, decoded as the model field decodes it."""
    field = cast(JSONField, Conversation._meta.get_field(column))  # one of JSON_COLUMNS
    # No expression: a raw cursor has none, and Django's JSONField reads it only to spot a key transform.
    return field.from_db_value(value, None, connection)  # type: ignore[arg-type]  # no expression to pass


def _take(
    conversation_key: str, and_read: tuple[str, list[Any]] | None = None
) -> tuple[int, int, bool, dict[str, Any]] | None:
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    read_sql, read_params = and_read or ("", [])
    with statement_cursor() as cursor:
        # One statement: the row is locked only while it runs. SET reads the old values on both backends.
        cursor.execute(_take_sql(read_sql), [now, conversation_key, *read_params])
        row = cursor.fetchone()
    return _taken(row, and_read) if row is not None else None


def _create_taking(
    conversation_key: str, defaults: dict, and_read: tuple[str, list[Any]] | None
) -> tuple[int, int, bool, dict[str, Any]] | None:
    """The conversation created with its first ticket taken, in one statement (``INSERT … RETURNING`` what the take
    returns); ``None`` when another message created it meanwhile (its key is taken: nothing is written)."""
    read_sql, read_params = and_read or ("", [])
    created = Conversation(
        conversation_key=conversation_key, turn_tickets_issued=1, turn_started_at=timezone.now(), **defaults
    )
    sql, params = insert_statement([created], conflicts_ignored=True, returning=_taken_columns(read_sql))
    with statement_cursor() as cursor:
        cursor.execute(sql, [*params, *read_params])
        row = cursor.fetchone()
    return _taken(row, and_read) if row is not None else None


def _taken(row: Sequence[Any], and_read: tuple[str, list[Any]] | None) -> tuple[int, int, bool, dict[str, Any]]:
    pk, issued, done, *values = row
    read = values.pop() if and_read else None
    state = {
        column: _json_value(column, value) if column in JSON_COLUMNS else value
        for column, value in zip(STATE_COLUMNS, values, strict=True)
    }
    state["created_at"] = _aware(state["created_at"])
    if state["ended_at"] is not None:
        state["ended_at"] = _aware(state["ended_at"])
    if and_read:
        state[READ] = read
    ticket = issued - 1
    return pk, ticket, done == ticket, state


# The key of ``state`` that holds what the caller's ``and_read`` returned.
READ = "read"


def ticket_take(
    *, conversation_key: str, defaults: dict, and_read: tuple[str, list[Any]] | None = None, new: bool = False
) -> tuple[int, int, dict[str, Any] | None]:
    """``(conversation pk, ticket, state)``; ``state`` is the conversation's when the turn may run at once,
    ``None`` when earlier messages are still being answered (wait with :func:`ticket_wait`, then read it).

    ``and_read``: ``(sql, params)`` of an expression over the conversation's row (:func:`conversation_table`)
    evaluated in the same statement when the turn may run at once, its value in ``state[READ]`` (the graph reads
    the conversation's history so: one round trip). The conversation is created on its first message. The
    connection stays open so the caller can read on with it; the caller gives it back. ``new``: the conversation is
    expected not to exist (its session id was just made), so the statement that creates it is sent first.
    """
    # A conversation's first message: the take finds no row, and one statement creates it with the ticket taken
    # (get_or_create's read, savepoint, insert and release, then the take again, were five round trips); when
    # another message created it meanwhile (nothing written), the take again. A new session's begins with that one.
    if new:
        taken = _create_taking(conversation_key, defaults, and_read) or _take(conversation_key, and_read)
    else:
        taken = _take(conversation_key, and_read) or _create_taking(conversation_key, defaults, and_read)
        taken = taken or _take(conversation_key, and_read)
    if taken is None:  # deleted again at once (retention), or refused by another unique column
        raise IntegrityError(f"The conversation {conversation_key!r} could not be created.")
    pk, ticket, ready, state = taken
    return pk, ticket, state if ready else None


def ticket_ready(*, conversation_pk: int, ticket: int) -> bool:
    """Whether ``ticket`` may run now; skips a stalled holder's ticket once its lease has run out."""
    try:
        row = Conversation.objects.filter(pk=conversation_pk).values("turn_tickets_done", "turn_started_at").first()
        if row is None or row["turn_tickets_done"] >= ticket:
            return True
        lease = timedelta(seconds=settings.CONVERSATION_TURN_LEASE_SECONDS)
        started = row["turn_started_at"]
        if started is not None and timezone.now() - started > lease:
            # Move past the stalled ticket only if nobody else did in the meantime.
            Conversation.objects.filter(
                pk=conversation_pk, turn_tickets_done=row["turn_tickets_done"], turn_started_at=started
            ).update(turn_tickets_done=F("turn_tickets_done") + 1, turn_started_at=timezone.now())
        return False
    finally:
        _give_back_connection()


async def ticket_wait(*, conversation_pk: int, ticket: int) -> float:
    """Wait until ``ticket``'s turn; returns the seconds waited."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    pause = POLL_FIRST_SECONDS
    while not await on_the_request_thread(ticket_ready)(conversation_pk=conversation_pk, ticket=ticket):
        await asyncio.sleep(pause)
        pause = min(pause * 2, POLL_MAX_SECONDS)
    waited = loop.time() - started
    ticket_wait_observe(waited)
    return waited


def ticket_pass_statement(
    conversation_pk: int, ticket: int, *, values: dict[str, Any] | None = None, messages: int = 0
) -> tuple[str, list[Any]]:
    """``(sql, params)`` of the ``UPDATE`` that hands the conversation on from ``ticket`` to the next, also writing
    the turn's ``values`` (field name → value, stored as the model field stores it) and counting its ``messages``.

    The hand-over is conditional, so a ticket that was skipped (its lease ran out) moves nothing back; the other
    columns are written whatever the ticket. Written as SQL, as the ticket's take is: the statement runs on
    every message, and Django's query compiler cost more CPU than the rest of the transaction (docs/benchmarks.md).
    Both backends evaluate every ``SET`` expression against the row as it was. A turn sends it as
    part of the statement that stores the turn (:mod:`conversations.records`); :func:`ticket_pass` sends it alone.
    """
    values = values or {}
    database = connections[DEFAULT_DB_ALIAS]
    statement, fields = _pass_shape(tuple(values), bool(messages), database.vendor)
    params = [db_value(field, value, database) for field, value in zip(fields, values.values(), strict=True)]
    if messages:
        params.append(messages)
    params += [ticket, ticket + 1, ticket, database.ops.adapt_datetimefield_value(timezone.now()), conversation_pk]
    return statement, params


@functools.lru_cache(maxsize=256)
def _pass_shape(names: tuple[str, ...], counted: bool, vendor: str) -> tuple[str, tuple[Field, ...]]:
    """The hand-over's ``UPDATE`` for the columns ``names`` (and the message count when ``counted``), and their
    fields: the same few sets of columns come back message after message, and the text is then the same object, whose
    hash psycopg's caches of prepared statements read without reading the text again. ``vendor``: the database's."""
    quote = connection.ops.quote_name
    fields = tuple(cast(Field, Conversation._meta.get_field(name)) for name in names)  # the conversation's columns
    sets = [f"{quote(str(field.column))} = %s" for field in fields]
    if counted:
        sets.append("message_count = message_count + %s")
    sets.append("turn_tickets_done = CASE WHEN turn_tickets_done = %s THEN %s ELSE turn_tickets_done END")
    sets.append("turn_started_at = CASE WHEN turn_tickets_done = %s THEN %s ELSE turn_started_at END")
    table = quote(Conversation._meta.db_table)
    return f"UPDATE {table} SET {', '.join(sets)} WHERE id = %s", fields  # noqa: S608  # the model's names; values are parameters


def ticket_pass(conversation_pk: int, ticket: int, *, values: dict[str, Any] | None = None, messages: int = 0) -> bool:
    """Hand the conversation on from ``ticket`` to the next (:func:`ticket_pass_statement`, sent alone). Whether the
    conversation is past ``ticket`` now: ``False`` when an earlier ticket still holds it (nothing moved)."""
    statement, params = ticket_pass_statement(conversation_pk, ticket, values=values, messages=messages)
    if not connection.features.can_return_columns_from_insert:  # SQLite before 3.35: no UPDATE … RETURNING
        with statement_cursor() as cursor:
            cursor.execute(statement, params)
        return not Conversation.objects.filter(pk=conversation_pk, turn_tickets_done__lte=ticket).exists()
    with statement_cursor() as cursor:
        cursor.execute(f"{statement} RETURNING turn_tickets_done", params)
        row = cursor.fetchone()
    return row is None or row[0] > ticket  # no row: the conversation was deleted, nothing waits on it


def _pass(conversation_pk: int, ticket: int) -> bool:
    try:
        return ticket_pass(conversation_pk, ticket)
    finally:
        _give_back_connection()


def ticket_release(*, conversation_pk: int, ticket: int) -> None:
    """Hand the turn on when the turn ended without persisting (an unexpected error, a database outage): at once
    when its turn has come, else from the background as soon as it comes (the turn failed while it waited: an
    earlier turn still holds the conversation, and the ticket must not be forgotten behind it). Never raises for
    a database that cannot be reached: the release is then retried in the background until it can."""
    try:
        passed = _pass(conversation_pk, ticket)
    except UNREACHABLE as exc:
        logger.warning(
            "Could not hand on ticket %s of conversation %s (%s); retrying in the background",
            ticket,
            conversation_pk,
            type(exc).__name__,
        )
        hand_on.add(conversation_pk, ticket, failed=True)
        return
    if not passed:
        hand_on.add(conversation_pk, ticket)


def ticket_abandon(*, conversation_pk: int, ticket: int) -> None:
    """Hand ``ticket`` on as soon as its turn comes, from the background, without blocking (a cancelled turn)."""
    hand_on.add(conversation_pk, ticket)


@dataclass
class _Pending:
    due: float
    pause: float = POLL_FIRST_SECONDS
    failures: int = 0


class HandOn:
    """The thread that hands on tickets of turns that ended without doing it themselves.

    One daemon thread per process, started on first use (and again after a fork). Each pending ticket is
    tried when due: handed on if its turn has come (the lease applies as to any waiter), polled again with
    back-off while earlier turns run, retried with back-off while the database cannot be reached. A process
    that dies with tickets pending leaves them to the lease.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: dict[tuple[int, int], _Pending] = {}
        self._pid = 0

    def add(self, conversation_pk: int, ticket: int, *, failed: bool = False) -> None:
        with self._cond:
            if self._pid != os.getpid():
                self._pending = {}
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="ticket-hand-on", daemon=True).start()
            pending = _Pending(due=time.monotonic())
            if failed:
                pending.failures, pending.due, pending.pause = 1, time.monotonic() + RETRY_FIRST_SECONDS, 0
            self._pending[(conversation_pk, ticket)] = pending
            self._cond.notify()

    def pending(self) -> int:
        """How many tickets wait to be handed on (tests, health)."""
        with self._cond:
            return len(self._pending)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [(key, item) for key, item in self._pending.items() if item.due <= now]
                if not due:
                    soonest = min((item.due for item in self._pending.values()), default=now + 60)
                    self._cond.wait(timeout=max(soonest - now, 0.001))
                    continue
            for (conversation_pk, ticket), item in due:
                done = self._try(conversation_pk, ticket, item)
                with self._cond:
                    if done and self._pending.get((conversation_pk, ticket)) is item:
                        del self._pending[(conversation_pk, ticket)]

    @staticmethod
    def _try(conversation_pk: int, ticket: int, item: _Pending) -> bool:
        try:
            if ticket_ready(conversation_pk=conversation_pk, ticket=ticket):
                _pass(conversation_pk, ticket)
                if item.failures:
                    logger.warning(
                        "Handed on ticket %s of conversation %s after %d failed attempts",
                        ticket,
                        conversation_pk,
                        item.failures,
                    )
                return True
            item.pause = min(max(item.pause * 2, POLL_FIRST_SECONDS), POLL_MAX_SECONDS)
        except UNREACHABLE:
            item.failures += 1
            item.pause = min(max(item.pause * 2, RETRY_FIRST_SECONDS), RETRY_MAX_SECONDS)
        except Exception:  # a bug must not kill the thread: keep trying, slowly, and say so
            logger.exception("Handing on ticket %s of conversation %s failed", ticket, conversation_pk)
            item.failures += 1
            item.pause = RETRY_MAX_SECONDS
        item.due = time.monotonic() + item.pause
        return False


hand_on = HandOn()
