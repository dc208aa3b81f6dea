"""The turn's write: the rows one message leaves behind, defined once.

A turn ends with one atomic write (:func:`conversation_turn_record`; on PostgreSQL usually a single statement):
the user's message, the system notes the specialists got, a supervisor plan's parts, the answer, the route
decision, the tool calls, the conversation's new live state, the moves between agents and the gateway's hops to
remote backends. :func:`turn_rows` is the one definition of those rows, built from a :class:`TurnRecord` — plain
data that the graph fills from its turn and the analytics benchmark's generator (``bench/benchdata.py``) from its
simulation — so the benchmark's data cannot drift from what the graph writes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import connection, transaction
from django.db.models import Field, Model
from django.utils import timezone

from common.infra.fastjson import Encoded
from common.infra.statements import SqlValue, insert_statement, inserted, statement_cursor
from conversations import ordering
from conversations.desk.escalations import outcome_escalated
from conversations.gateway import BackendReply
from conversations.goals.records import goal_rows_create
from conversations.models import (
    OPEN,
    BackendCall,
    Conversation,
    ConversationOutcome,
    Escalation,
    Message,
    MessageRole,
    RouteDecisionRecord,
    ToolCall,
)
from conversations.ratings import outcomes_changing
from conversations.signals import conversation_recounted
from conversations.supervisor import gap_text
from handoffs.models import Handoff
from handoffs.public import Move, handoff_rows, moves_kinds
from routing.public import RouteDecision

RESULT_NOTE_KIND = "sub_conversation_result"
RowModel = TypeVar("RowModel", bound=Model)


@dataclass(frozen=True)
class PartRecord:
    """One specialist's part of a supervisor turn, as stored (role ``agent``, step = round + 1)."""

    agent: str
    intent: str
    status: str
    answer: str  # masked; "" when the part gave none
    error: str = ""
    round: int = 0


@dataclass(frozen=True)
class TurnRecord:
    """Everything one turn stores, as plain data: personal data already masked, tool results redacted."""

    conversation_id: int
    tenant_id: int
    profile_id: int
    text: str  # the user's message as stored
    answer: str
    agent: str  # who answered
    mode: str  # the graph's mode for this turn (router, supervisor, hybrid, single_agent)
    metadata: dict[str, Any]  # the answer's metadata (what the API answered)
    metadata_json: bytes | None = None  # its JSON as its bound encoded it (common.infra.fastjson); None: not yet
    prompt_tokens: int = 0  # the turn's model calls added up (metadata["usage"] splits them)
    completion_tokens: int = 0
    llm_model: str = ""  # the model that wrote the answer ("" when none did)
    other_models: bool = False  # some calls of the turn went to another model (agents.usage.other_models)
    cohort: str = ""
    routing_version: int | None = None  # the published version that served the turn (None: a draft)
    language: str = ""  # the conversation's language after the turn, as LiveState's ("": none told yet)
    channel: str = "api"
    user_id: str = ""
    client_metadata: Mapping[str, str] = field(default_factory=dict)  # kept with the customer's message
    latency_ms: float | None = None
    judge_score: float | None = None
    decision: RouteDecision | None = None
    notes: Sequence[tuple[str, str]] = ()  # (agent, note): system notes the specialists got
    parts: Sequence[PartRecord] = ()
    tool_calls: Sequence[dict[str, Any]] = ()  # ToolResult.as_dict(), redacted
    moves: Sequence[Move] = ()
    backend_calls: Sequence[BackendReply] = ()  # the gateway's hops to remote backends (made or skipped)
    answered: bool = True  # False: no answer is stored (a person holds the conversation and answers on the desk)
    escalation: Escalation | None = None  # the escalation the turn opened (unsaved), stored with it
    goal: str = ""  # goal mode: the goal served (what the conversation's outcome is counted under)


@dataclass
class TurnRows:
    """A turn's rows, unsaved: ``messages`` in reading order (the user's first, the answer last); the decision
    points at the user's message, the tool calls at the answer, once the messages have ids (:meth:`link`);
    ``escalation`` is the one the turn opened (a person now holds the conversation), its ``human`` move among
    ``handoffs``."""

    messages: list[Message]
    decision: RouteDecisionRecord | None
    tool_calls: list[ToolCall]
    handoffs: list[Handoff] = field(default_factory=list)
    backend_calls: list[BackendCall] = field(default_factory=list)
    answered: bool = True
    escalation: Escalation | None = None  # the escalation the turn opened: stored first (the conversation names it)

    @property
    def user_message(self) -> Message:
        return self.messages[0]

    @property
    def answer(self) -> Message | None:
        """The answer's row (the last message), ``None`` when the turn stored none."""
        return self.messages[-1] if self.answered else None

    def link(self) -> None:
        """Copy the messages' ids, once they have them, into the rows that point at them."""
        if self.decision is not None:
            self.decision.message_id = self.user_message.pk
        answer_pk = self.messages[-1].pk
        for call in self.tool_calls:
            call.message_id = answer_pk
        for hop in self.backend_calls:
            hop.message_id = answer_pk


@dataclass(frozen=True)
class _Places:
    """Where each of a model's columns goes among its constructor's arguments, and the defaults Django gives the
    columns a row leaves out: the constant ones made once, those made anew for each row (a dict, a list) named."""

    index: dict[str, int]
    defaults: tuple[Any, ...]
    made: tuple[tuple[int, str, Field[Any, Any]], ...]


@functools.cache
def _places(model: type[Model]) -> _Places:
    fields = model._meta.concrete_fields
    anew = [each.has_default() and callable(each.default) for each in fields]
    return _Places(
        index={str(each.attname): place for place, each in enumerate(fields)},
        defaults=tuple(None if made else each.get_default() for each, made in zip(fields, anew, strict=True)),
        made=tuple((place, str(each.attname), each) for place, each in enumerate(fields) if anew[place]),
    )


def row_new(model: type[RowModel], **values: Any) -> RowModel:
    """A new row of ``model`` with ``values`` (by ``attname``: ``conversation_id``, not ``conversation``) and every
    other column at its default — what ``model(**values)`` makes, built by position, as Django's ``Model.from_db``
    builds the rows it reads (``cls(*values)`` in ``concrete_fields`` order): the keyword constructor looks each field
    up among the keywords and makes each default again, for every row of every message."""
    places = _places(model)
    args = list(places.defaults)
    index = places.index
    for name, value in values.items():
        args[index[name]] = value
    for place, name, each in places.made:
        if name not in values:
            args[place] = each.get_default()
    return model(*args)


def turn_rows(record: TurnRecord) -> TurnRows:
    """The rows ``record`` stores; nothing is saved."""
    messages = _message_rows(record)
    return TurnRows(
        messages=messages,
        decision=_decision_row(record),
        tool_calls=[
            row_new(
                ToolCall,
                conversation_id=record.conversation_id,
                agent=record.agent,
                tool=call["tool"],
                server=call["server"],
                arguments=call["arguments"],
                status=call["status"],
                latency_ms=call["latency_ms"],
                result=call["result"],
                error=call["error"] or "",
                profile_id=record.profile_id,
                tenant_id=record.tenant_id,
                cohort=record.cohort,
                routing_version=record.routing_version,
            )
            for call in record.tool_calls
        ],
        handoffs=handoff_rows(
            conversation_id=record.conversation_id,
            tenant_id=record.tenant_id,
            profile_id=record.profile_id,
            cohort=record.cohort,
            routing_version=record.routing_version,
            moves=record.moves,
        ),
        backend_calls=[
            reply.row(conversation_id=record.conversation_id, tenant_id=record.tenant_id, profile_id=record.profile_id)
            for reply in record.backend_calls
        ],
        answered=record.answered,
        escalation=record.escalation,
    )


def _message_rows(record: TurnRecord) -> list[Message]:
    """In reading order: the user's message, the system notes the specialists got (a finished sub-conversation's
    result), each specialist's part of a supervisor turn (role ``agent``, step = round + 1), the answer (unless the
    turn gives none: a person holds the conversation)."""
    conversation, cohort, version = record.conversation_id, record.cohort, record.routing_version
    # The turn's columns every message of it repeats (the analytics read them without the conversation).
    turn = {"profile_id": record.profile_id, "tenant_id": record.tenant_id, "language": record.language}
    user = row_new(
        Message,
        conversation_id=conversation,
        role=MessageRole.USER,
        cohort=cohort,
        routing_version=version,
        **turn,
        content=record.text,
        metadata={
            "channel": record.channel,
            "user_id": record.user_id,
            **({"client_metadata": dict(record.client_metadata)} if record.client_metadata else {}),
        },
    )
    notes = [
        row_new(
            Message,
            conversation_id=conversation,
            role=MessageRole.SYSTEM,
            cohort=cohort,
            routing_version=version,
            **turn,
            agent=agent,
            content=note,
            metadata={"kind": RESULT_NOTE_KIND},
        )
        for agent, note in record.notes
    ]
    parts = [
        row_new(
            Message,
            conversation_id=conversation,
            role=MessageRole.AGENT,
            cohort=cohort,
            routing_version=version,
            **turn,
            agent=part.agent,
            content=part.answer or gap_text(part.status),
            step=part.round + 1,
            metadata={"intent": part.intent, "status": part.status, "error": part.error},
        )
        for part in record.parts
    ]
    answer = row_new(
        Message,
        conversation_id=conversation,
        role=MessageRole.ASSISTANT,
        cohort=cohort,
        routing_version=version,
        **turn,
        latency_ms=record.latency_ms,
        judge_score=record.judge_score,
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        llm_model=record.llm_model,
        other_models=record.other_models,
        agent=record.agent,
        content=record.answer,
        # Encoded once, for the response's bound, and stored as it was encoded (common.infra.fastjson.Encoded).
        metadata=record.metadata if record.metadata_json is None else Encoded(record.metadata, record.metadata_json),
    )
    return [user, *notes, *parts, answer] if record.answered else [user, *notes, *parts]


def _decision_row(record: TurnRecord) -> RouteDecisionRecord | None:
    decision = record.decision
    if decision is None:
        return None
    return row_new(
        RouteDecisionRecord,
        conversation_id=record.conversation_id,
        mode=record.mode,
        route=decision.route,
        agent=decision.agent,
        intent=decision.intent,
        confidence=decision.confidence,
        reason=decision.reason,
        method=decision.method,
        next_state=decision.next_state or "",
        handoff=decision.handoff,
        domain=decision.domain or "",
        mcp_tools=decision.mcp_tools,
        metadata=decision.metadata,
        profile_id=record.profile_id,
        tenant_id=record.tenant_id,
        language=record.language,
        cohort=record.cohort,
        routing_version=record.routing_version,
    )


@dataclass(frozen=True)
class LiveState:
    """What the conversation carries into its next message, as the turn left it.

    ``routed`` is ``(state, active_specialist, active_intent)`` when the turn was routed, ``None`` when it never
    got that far (a blocked message), which leaves them as they were. ``active_backend``: the remote backend now
    answering the conversation ("": a local specialist again), ``None`` when that did not change (the local path
    writes no more columns than before). ``escalation_id``: the escalation the turn opened (a person holds the
    conversation from now on); ``fallbacks_in_row`` and ``outcome`` their new values, ``None`` when unchanged
    (``outcome`` ``""`` opens a closed conversation again).
    """

    sub_conversation: dict[str, Any] | None = None
    pending_result: dict[str, Any] | None = None
    pending_permission: dict[str, Any] | None = None
    granted_permissions: Sequence[str] = ()
    routed: tuple[str, str, str] | None = None
    goal_state: dict[str, Any] | None = None
    stack: Sequence[dict[str, Any]] = ()  # the stored frames (routing.stack.STORED_KINDS), bottom first
    active_backend: str | None = None
    backend_task: str | None = None  # the backend's task waiting for the next message; None: unchanged
    escalation_id: uuid.UUID | None = None
    fallbacks_in_row: int | None = None
    outcome: str | None = None
    language: str = ""  # the conversation's language after the turn ("": none told yet)
    # The summary the turn rewrote (conversations.memory.summary): (text, last message covered, message count).
    memory_summary: tuple[str, int, int] | None = None


@dataclass(frozen=True)
class CountedAs:
    """What the analytics' daily totals know of the conversation: its cohort, the kinds of move it has had
    (``handoff_kinds``), the day it was created and its language, as the turn read them; ``first``: the turn is the
    conversation's first (it had no message), whose routing version the conversation is counted under."""

    cohort: str = ""
    handoff_kinds: int = 0
    created_at: dt.datetime | None = None
    language: str = ""
    first: bool = False

    def relanguaged(self, live: LiveState) -> bool:
        """The turn changes the language of a conversation created on an earlier UTC day than today's (a
        conversation of today is counted from the rows themselves until the day closes)."""
        if not live.language or live.language == self.language:
            return False
        return self._before_today()

    def versioned_late(self) -> bool:
        """The turn is the first of a conversation created on an earlier UTC day (its day may have been summed
        before the conversation had a version)."""
        return self.first and self._before_today()

    def _before_today(self) -> bool:
        if self.created_at is None:
            return False
        return self.created_at.astimezone(dt.UTC).date() < timezone.now().astimezone(dt.UTC).date()


def conversation_updates(record: TurnRecord, live: LiveState, counted: CountedAs) -> dict[str, Any]:
    """The conversation's columns the turn changes (the ticket's hand-over aside)."""
    updates: dict[str, Any] = {
        "sub_conversation": live.sub_conversation,
        "pending_result": live.pending_result,
        "pending_permission": live.pending_permission,
        "granted_permissions": list(live.granted_permissions),
        "goal_state": live.goal_state,
        "stack": list(live.stack),
    }
    if live.language:
        updates["language"] = live.language
    if record.cohort:
        updates["cohort"] = record.cohort
    if counted.first:  # the version the conversation started on; later turns' versions are on their own rows
        updates["routing_version"] = record.routing_version
    if live.routed is not None:
        updates["state"], updates["active_specialist"], updates["active_intent"] = live.routed
    if live.active_backend is not None:
        updates["active_backend"] = live.active_backend
    if live.backend_task is not None:
        updates["backend_task"] = live.backend_task
    if live.escalation_id is not None:
        updates["escalation"] = live.escalation_id
    if live.fallbacks_in_row is not None:
        updates["fallbacks_in_row"] = live.fallbacks_in_row
    if live.outcome is not None:
        updates["outcome"] = live.outcome
    if live.memory_summary is not None:
        summary = live.memory_summary
        updates["memory_summary"], updates["memory_summary_through"], updates["memory_summary_at_count"] = summary
    kinds = counted.handoff_kinds | moves_kinds(record.moves)
    if kinds != counted.handoff_kinds:
        updates["handoff_kinds"] = kinds
    return updates


def conversation_turn_record(*, record: TurnRecord, live: LiveState, counted: CountedAs, ticket: int) -> TurnRows:
    """Write the whole turn at once and hand the conversation to its next message.

    On PostgreSQL the messages, the route decision and the conversation's row (the ticket's hand-over with it)
    are one statement (:func:`_turn_statement`): one round trip, atomic by itself, where three statements in a
    transaction took five; the turn's tool calls and moves between agents are parts of it too (their rows get no
    ids back: nothing reads them). A goal run, a backend's calls, an escalation and a recount join it in a
    transaction; SQLite (the quick start) writes the same rows through the ORM.

    No row lock is taken or expected: the caller holds the conversation's ticket ``ticket``
    (:mod:`conversations.ordering`), so no other turn of the conversation writes meanwhile. A conversation that
    changes what the daily totals count it under (a first cohort, a new kind of move) sends
    :data:`~conversations.signals.conversation_recounted`. The connection goes back to the pool as soon as the
    write ends, not when the response has been sent. Returns the saved rows.
    """
    rows = turn_rows(record)
    updates = conversation_updates(record, live, counted)
    late = counted.relanguaged(live) or counted.versioned_late()  # a closed day's conversation counted anew
    recounted = late or "handoff_kinds" in updates or bool(record.cohort and record.cohort != counted.cohort)
    goal = record.metadata.get("goal")
    opened, reopened = rows.escalation, live.outcome == OPEN
    joined = connection.vendor == "postgresql"  # data-modifying WITH parts: PostgreSQL's
    alone = joined and not (rows.backend_calls or goal or recounted or opened or reopened)
    try:
        # Inside a transaction already (a conversation test's, an idempotency claim's), the write joins it: a failed
        # write ends that transaction too (the test fails, the claim's block raises), so a savepoint of its own
        # would cost two round trips and protect nothing.
        with contextlib.nullcontext() if alone else transaction.atomic(savepoint=False):
            if opened is not None:  # first: the conversation's update names it
                opened.save(force_insert=True)
                outcome_escalated(
                    escalation=opened,
                    cohort=record.cohort or counted.cohort,
                    routing_version=record.routing_version,
                    started_at=counted.created_at,
                    goal=record.goal,
                )
            elif reopened:  # the customer wrote to a closed conversation: it is open again, its outcome undecided
                outcomes_changing([record.conversation_id])  # the day it was decided on is counted again
                ConversationOutcome.objects.filter(conversation_id=record.conversation_id).delete()
            if joined:
                _turn_statement_send(rows, conversation_pk=record.conversation_id, ticket=ticket, updates=updates)
            else:
                # One insert for the messages, in reading order; SQLite returns their ids in order.
                Message.objects.bulk_create(rows.messages)
                rows.link()
                if rows.decision is not None:
                    RouteDecisionRecord.objects.bulk_create([rows.decision])  # nothing listens to its save()
                ordering.ticket_pass(record.conversation_id, ticket, values=updates, messages=len(rows.messages))
                if rows.tool_calls:
                    ToolCall.objects.bulk_create(rows.tool_calls)
                if rows.handoffs:
                    Handoff.objects.bulk_create(rows.handoffs)
            if goal and rows.answer is not None:  # goal mode: the run and its steps, for the goal analytics
                goal_rows_create(
                    message=rows.answer, goal=goal, tenant_id=record.tenant_id, profile_id=record.profile_id
                )
            if rows.backend_calls:
                BackendCall.objects.bulk_create(rows.backend_calls)
            if recounted:
                # The conversation is counted on the day it was created, under its cohort, kinds of move and language
                # (its messages and route decisions keep the language their turn was read in: no other day changes).
                conversation_recounted.send(sender=Conversation, created_at=counted.created_at)
        return rows
    finally:
        if not connection.in_atomic_block:
            connection.close()


def _turn_statement(
    rows: TurnRows, *, conversation_pk: int, ticket: int, updates: dict[str, Any]
) -> tuple[str, list[Any]]:
    """The turn's messages, route decision and conversation update as one PostgreSQL statement.

    ``WITH m AS (INSERT messages … RETURNING id), d AS (INSERT the decision, its message the least id of m),
    t AS (INSERT the tool calls, their message the greatest id of m), h AS (INSERT the moves), u AS (UPDATE the
    conversation)``, selecting the messages' ids in order with the decision's. Every part runs
    exactly once and sees the others' effects only through ``RETURNING`` (PostgreSQL, "Data-Modifying
    Statements in WITH"); the statement is atomic as any single statement is. The inserts are Django's own
    (:func:`common.infra.statements.insert_statement`), the ``UPDATE`` the ticket's hand-over
    (:func:`conversations.ordering.ticket_pass_statement`).
    """
    names = _statement_names(connection.vendor)
    sql, params = insert_statement(rows.messages)
    parts, values = [("m", sql)], list(params)
    if rows.decision is not None:
        # The user's message is the first row of m, so the least id: a sequence numbers rows as they are inserted.
        rows.decision.message_id = names.least  # type: ignore[assignment]  # written in the statement
        sql, params = insert_statement([rows.decision])
        parts.append(("d", sql))
        values += params
    if rows.tool_calls:
        # The calls point at the last message (rows.link): the greatest id of m.
        for call in rows.tool_calls:
            call.message_id = names.last  # type: ignore[assignment]  # written in the statement
        sql, params = insert_statement(rows.tool_calls)
        parts.append(("t", sql))
        values += params
    if rows.handoffs:
        sql, params = insert_statement(rows.handoffs)
        parts.append(("h", sql))
        values += params
    update, update_params = ordering.ticket_pass_statement(
        conversation_pk, ticket, values=updates, messages=len(rows.messages)
    )
    parts.append(("u", update))
    values += update_params
    return _joined(tuple(parts), rows.decision is not None, connection.vendor), values


@dataclass(frozen=True)
class _Names:
    """The SQL of :func:`_turn_statement` that names the model's columns, for one database."""

    message_pk: str
    least: SqlValue  # the first message's id, the decision's message
    last: SqlValue  # the last message's id, the tool calls' message
    decision_pk: str


@functools.cache
def _statement_names(vendor: str) -> _Names:
    quote = connection.ops.quote_name
    message_pk = quote(str(Message._meta.pk.column))
    return _Names(
        message_pk=message_pk,
        least=SqlValue(f"(SELECT min({message_pk}) FROM m)"),  # noqa: S608  # the model's names
        last=SqlValue(f"(SELECT max({message_pk}) FROM m)"),  # noqa: S608
        decision_pk=f"(SELECT {quote(str(RouteDecisionRecord._meta.pk.column))} FROM d)",  # noqa: S608
    )


@functools.lru_cache(maxsize=256)
def _joined(parts: tuple[tuple[str, str], ...], decided: bool, vendor: str) -> str:
    """The ``WITH`` statement of ``parts`` (name, statement), selecting the messages' ids in order and the
    decision's (``decided``). Kept: a conversation's turns have a few shapes, and the same text is then the same
    object downstream (psycopg reads its hash for its prepared statements without reading the text again)."""
    names = _statement_names(vendor)
    message_pk = names.message_pk
    decision_pk = names.decision_pk if decided else "NULL"
    joined = ", ".join(f"{name} AS ({sql})" for name, sql in parts)
    return f"WITH {joined} SELECT m.{message_pk}, {decision_pk} FROM m ORDER BY m.{message_pk}"  # noqa: S608  # the model's names; values are parameters


def _turn_statement_send(rows: TurnRows, *, conversation_pk: int, ticket: int, updates: dict[str, Any]) -> None:
    """Send :func:`_turn_statement` and give the rows the ids it returned."""
    with statement_cursor() as cursor:
        cursor.execute(*_turn_statement(rows, conversation_pk=conversation_pk, ticket=ticket, updates=updates))
        returned = cursor.fetchall()
    inserted(rows.messages, [(message_pk,) for message_pk, _ in returned])
    if rows.decision is not None:
        inserted([rows.decision], [(returned[0][1],)])
    rows.link()
