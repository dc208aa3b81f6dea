"""One turn at a time per conversation, in arrival order, without holding a lock across a model call.

A message takes a ticket with one ``UPDATE … RETURNING`` that locks the
conversation row for that statement only (the conversation is created on its
first message) and returns its state; the turn runs when the
conversation's ``turn_tickets_done`` reaches its ticket, and the transaction
that persists the turn moves ``turn_tickets_done`` on. Waiting is polling
with a short back-off, each poll a single indexed read on a pooled
connection given straight back, so a waiting request holds neither a lock nor
a connection.

A holder that vanished (its process was killed) cannot block a conversation
for ever: after ``CONVERSATION_TURN_LEASE_SECONDS`` without progress the next
waiter skips its ticket. A skipped turn that comes back late still stores its
messages (nothing is lost), after the ones that overtook it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.db.models import Case, F, JSONField, Value, When
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from conversations.models import Conversation

POLL_FIRST_SECONDS = 0.005
POLL_MAX_SECONDS = 0.2


def _give_back_connection() -> None:
    if not connection.in_atomic_block:
        connection.close()


# State the turn needs, returned by the statement that takes the ticket (one round trip when nobody waits).
STATE_COLUMNS = (
    "state",
    "active_specialist",
    "active_intent",
    "sub_conversation",
    "pending_result",
    "pending_permission",
    "granted_permissions",
    "cohort",
    "handoff_kinds",
    "created_at",
)
JSON_COLUMNS = frozenset({"sub_conversation", "pending_result", "pending_permission", "granted_permissions"})


def _take_sql() -> str:
    """The ticket statement; the table and column names are the model's own constants, values are parameters."""
    table = connection.ops.quote_name(Conversation._meta.db_table)
    return (
        f"UPDATE {table} SET turn_tickets_issued = turn_tickets_issued + 1, "  # noqa: S608
        "turn_started_at = CASE WHEN turn_tickets_done = turn_tickets_issued THEN %s ELSE turn_started_at END "
        "WHERE conversation_key = %s "
        f"RETURNING id, turn_tickets_issued, turn_tickets_done, {', '.join(STATE_COLUMNS)}"
    )


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


def _take(conversation_key: str) -> tuple[int, int, bool, dict[str, Any]] | None:
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        # One statement: the row is locked only while it runs. SET reads the old values on both backends.
        cursor.execute(_take_sql(), [now, conversation_key])
        row = cursor.fetchone()
    if row is None:
        return None
    pk, issued, done, *values = row
    state = {
        column: _json_value(column, value) if column in JSON_COLUMNS else value
        for column, value in zip(STATE_COLUMNS, values, strict=True)
    }
    state["created_at"] = _aware(state["created_at"])
    ticket = issued - 1
    return pk, ticket, done == ticket, state


def ticket_take(*, conversation_key: str, defaults: dict) -> tuple[int, int, dict[str, Any] | None]:
    """``(conversation pk, ticket, state)``; ``state`` is the conversation's when the turn may run at once,
    ``None`` when earlier messages are still being answered (wait with :func:`ticket_wait`, then read it).

    The conversation is created on its first message. The connection stays open so the caller can read
    on with it (the graph reads the history in the same trip to the database thread); the caller gives it back.
    """
    taken = _take(conversation_key)
    if taken is None:
        Conversation.objects.get_or_create(conversation_key=conversation_key, defaults=defaults)
        taken = _take(conversation_key)
        assert taken is not None  # the row exists now
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
    while not await sync_to_async(ticket_ready)(conversation_pk=conversation_pk, ticket=ticket):
        await asyncio.sleep(pause)
        pause = min(pause * 2, POLL_MAX_SECONDS)
    return loop.time() - started


def ticket_pass_updates(ticket: int) -> dict[str, Any]:
    """Fields for the persisting transaction's conversation update that hand the turn to the next ticket.

    Conditional, so a ticket that was skipped (its lease ran out) moves nothing back.
    """
    done = Conversation._meta.get_field("turn_tickets_done")
    started = Conversation._meta.get_field("turn_started_at")
    return {
        "turn_tickets_done": Case(
            When(turn_tickets_done=ticket, then=Value(ticket + 1, done)),
            default=F("turn_tickets_done"),
            output_field=done,
        ),
        "turn_started_at": Case(
            When(turn_tickets_done=ticket, then=Value(timezone.now(), started)),
            default=F("turn_started_at"),
            output_field=started,
        ),
    }


def ticket_release(*, conversation_pk: int, ticket: int) -> None:
    """Hand the turn on when the turn ended without persisting (an unexpected error)."""
    try:
        Conversation.objects.filter(pk=conversation_pk).update(**ticket_pass_updates(ticket))
    finally:
        _give_back_connection()
