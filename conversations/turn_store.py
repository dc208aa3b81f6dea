"""A turn's database edges: where the routing graph (:mod:`conversations.graph`) reads and writes.

A ticket that orders the conversation's turns (:func:`turn_start`, :mod:`conversations.ordering`), one read of the
conversation's state (:func:`conversation_load`), and one transaction that persists the whole turn
(:func:`turn_persist`): its messages, decision, tool calls, moves and escalation, as :func:`turn_record` describes
them. No transaction or lock is held while a model is called.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, transaction

from agents.public import other_models
from common.infra import fastjson, metrics
from common.sizes import json_bounded, json_size, limit_hit
from conversations import ordering
from conversations.delivery import DESK_EVENT, desk_group, push_now
from conversations.desk.escalations import (
    escalation_opened,
    message_public,
    queue_position,
)
from conversations.history import conversation_history, history_parse, history_read
from conversations.memory.facts import facts_parse, facts_read
from conversations.memory.part import memory_read, memory_reads_left
from conversations.memory.summary import summary_left_read
from conversations.models import (
    ESCALATION_OPEN,
    OPEN,
    Conversation,
    Escalation,
    IdempotentRequest,
    Outcome,
)
from conversations.records import CountedAs, LiveState, PartRecord, TurnRecord, conversation_turn_record
from conversations.signals import escalation_changed
from conversations.turn import (
    LIMIT_RESPONSE,
    ClaimTakenOver,
    Turn,
    TurnInput,
)
from handoffs.models import PERSON, Handoff, HandoffKind, HandoffStatus
from routing.public import (
    COHORT_MULTI_AGENT,
    COHORT_SINGLE_AGENT,
    MULTI_AGENT_FLAG,
    REASON_BUCKET,
    REASON_CONVERSATION,
    delegation_active,
    frames_read,
    snapshot_current,
)

RESPONSE_RESERVE_BYTES = 1024  # of RESPONSE_MAX_BYTES, kept for the envelope's keys and the response's own hit


def conversation_defaults(data: TurnInput) -> dict[str, Any]:
    """The columns a conversation is created with on its first message."""
    return {
        "tenant_id": data.tenant_pk,
        "profile_id": data.profile.pk,
        "session_id": data.session_id,
        "user_id": stored_user_id(data),
        "channel": data.channel,
    }


def stored_user_id(data: TurnInput) -> str:
    """The user id the store keeps (:attr:`conversations.turn.TurnInput.stored_user_id`, made once per input)."""
    return data.stored_user_id


def turn_start(turn: Turn) -> bool:
    """Take the message's ticket; when no earlier message is being answered, read the conversation at once
    (one trip to the database thread, one connection). ``False`` when the turn must wait for its ticket. A ticket
    taken for a conversation that could not be read is handed on before the error goes up."""
    data = turn.input
    try:
        turn.store.conversation_pk, turn.store.ticket, state = ordering.ticket_take(
            conversation_key=data.conversation_key,
            defaults=conversation_defaults(data),
            new=data.session_new,
            and_read=conversation_read(data),
        )
        if state is not None:
            try:
                conversation_load(turn, state)
            except BaseException:
                ordering.ticket_release(conversation_pk=turn.store.conversation_pk, ticket=turn.store.ticket)
                raise
        turn.store.ready = state is not None
        return turn.store.ready
    finally:
        if not connection.in_atomic_block:
            connection.close()


def conversation_read(data: TurnInput) -> tuple[str, list[Any]] | None:
    """``(sql, params)`` of what the ticket's statement brings along when the turn may run at once (PostgreSQL): the
    conversation's recent history, the customer's facts and, where the profile summarises its conversations or reads
    the customer's facts from them (:func:`conversations.memory.part.memory_reads_left`) and the summary is due, the
    messages that left the window — one JSON array of the three; ``None`` where the database has no JSON aggregate
    of the kind (then :func:`conversation_load` reads them on their own, in the same crossing)."""
    window = settings.CONVERSATION_HISTORY_LIMIT
    history = history_read(conversation=ordering.conversation_table(), limit=window)
    if history is None:
        return None
    user_id = stored_user_id(data)
    facts = facts_read(tenant_id=data.tenant_pk, user_id=user_id) or ("NULL", [])
    left: tuple[str, list[Any]] = ("NULL", [])
    if memory_reads_left(data.profile, user_id):
        left = summary_left_read(conversation=ordering.conversation_table(), window=window) or left
    return f"json_build_array({history[0]}, {facts[0]}, {left[0]})::text", [*history[1], *facts[1], *left[1]]


def conversation_load(turn: Turn, state: dict[str, Any] | None) -> None:
    """Read the conversation's state (unless the ticket brought it), recent history and memory (the customer's facts,
    and the messages that left the window when the summary is due: :mod:`conversations.memory`); give the connection
    back.

    The model call that follows takes seconds; a connection held across it (this
    request thread's, opened by authentication) would make every chat in flight
    hold one, and 200 of them exceed PostgreSQL's connections. Closed, it goes
    back to the pool (``DATABASE_POOL``) and ``turn_persist`` takes one again. Inside
    an atomic block (a test's transaction) the connection is left alone.
    """
    try:
        if state is None:
            state = Conversation.objects.filter(pk=turn.store.conversation_pk).values(*ordering.STATE_COLUMNS).first()
            if state is None:
                return
        turn.route.state = state["state"]
        turn.route.active_agent = state["active_specialist"]
        turn.route.active_intent = state["active_intent"]
        turn.backend.task = state["backend_task"]
        turn.stack.sub_conversation = state["sub_conversation"]
        turn.stack.pending_result = state["pending_result"]
        turn.stack.pending_permission = state["pending_permission"]
        turn.stack.granted = list(state["granted_permissions"] or [])
        turn.stack.goal_state = state["goal_state"]
        turn.stack.frames = frames_read(state["stack"])
        turn.stack.found_waiting = tuple((frame.kind, frame.name) for frame in turn.stack.waiting_frames())
        turn.store.cohort = state["cohort"]
        turn.store.handoff_kinds = state["handoff_kinds"]
        turn.store.conversation_created_at = state["created_at"]
        turn.store.message_count = state["message_count"]
        turn.store.fallbacks_in_row = turn.store.fallbacks_before = state["fallbacks_in_row"]
        turn.store.outcome_was = state["outcome"]
        turn.language.kept = turn.language.found = state["language"]
        if state["escalation_id"] is not None:  # a person holds the conversation (one read, only then)
            held_load(turn, state["escalation_id"])
        rollout_serve(turn)
        facts, left = None, None
        if ordering.READ in state:  # the ticket's statement brought them (conversation_read)
            history, facts_found, left = orjson.loads(state[ordering.READ])
            turn.history = history_parse(history)
            facts = facts_parse(facts_found)
        else:
            turn.history = conversation_history(
                turn.store.conversation_pk, ended_at=state["ended_at"], limit=settings.CONVERSATION_HISTORY_LIMIT
            )
        turn.memory = memory_read(
            tenant_id=turn.input.tenant_pk,
            user_id=stored_user_id(turn.input),
            state=state,
            conversation_pk=turn.store.conversation_pk,
            history=turn.history,
            profile=turn.input.profile,  # the profile served (a rollout's candidate)
            facts=facts,
            left=left,
        )
    finally:
        if not connection.in_atomic_block:
            connection.close()


def held_load(turn: Turn, escalation_id: Any) -> None:
    """The escalation a person holds the conversation under, and its place in line while it waits."""
    held = Escalation.objects.filter(pk=escalation_id, status__in=ESCALATION_OPEN).first()
    if held is not None:
        turn.escalation.held = held
        turn.escalation.position = queue_position(held)


def cohort_keep(turn: Turn) -> None:
    """The multi_agent flag's cohort is the conversation's for its lifetime: when a later percentage (a rollout
    plan's next stage, an edit) would bucket this message into the other cohort, the conversation keeps the one
    it started in. Overrides and the kill switch still decide at once: they are a person's or a rollback's."""
    data = turn.input
    flag = data.flags.get(MULTI_AGENT_FLAG) or {}
    kept = turn.store.cohort
    if (
        flag.get("reason") != REASON_BUCKET
        or kept not in (COHORT_MULTI_AGENT, COHORT_SINGLE_AGENT)
        or kept == data.cohort
    ):
        return
    single = kept == COHORT_SINGLE_AGENT
    flags = {**data.flags, MULTI_AGENT_FLAG: {**flag, "enabled": not single, "reason": REASON_CONVERSATION}}
    turn.input = replace(data, single_agent=single, cohort=kept, flags=flags)
    turn.mode = "single_agent" if single else data.profile.effective_mode


def rollout_serve(turn: Turn) -> None:
    """While a rollout plan of the profile's version runs, the candidate version serves the conversations its
    bucket and start put in the candidate cohort (routing.rollout_plans); the rest keep the live version. Only
    customers' turns on the live version: an editor trying the draft keeps the draft."""
    cohort_keep(turn)
    data = turn.input
    current = data.snapshot or snapshot_current()
    rollout = current.rollouts.get(data.profile.agent_id)
    live = current.released.get(data.profile.agent_id)
    if rollout is None or live is None or data.profile.version != live:
        return
    candidate = rollout.serves_candidate(data.conversation_key, turn.store.conversation_created_at)
    turn.store.rollout = {"plan": rollout.plan_id, "cohort": "candidate" if candidate else "control"}
    if candidate:
        turn.input = replace(data, profile=rollout.candidate)
        if not data.single_agent:
            turn.mode = rollout.candidate.effective_mode


def recent_paths(conversation_pk: int, window: int) -> list[tuple[str, str]]:
    """The conversation's last ``window`` agent and backend handoffs (from, to), oldest first; read only when a move
    is checked."""
    try:
        paths = (
            Handoff.objects.filter(
                conversation_id=conversation_pk,
                kind__in=(HandoffKind.HANDOFF, HandoffKind.BACKEND),
                status=HandoffStatus.COMPLETED,
            )
            .order_by("-created_at", "-id")
            .values_list("from_agent", "to_agent")[:window]
        )
        return list(reversed(list(paths)))
    finally:
        if not connection.in_atomic_block:
            connection.close()


def active_specialist(turn: Turn) -> str:
    if turn.agent == PERSON:  # handed to a person: the assistant that answered before stays the active one
        return turn.escalation.opened.from_agent if turn.escalation.opened is not None else turn.route.active_agent
    profile = turn.input.profile
    if delegation_active(profile) and not turn.input.single_agent:
        return (turn.stack.sub_conversation or {}).get("specialist") or profile.coordinator
    decision = turn.decision
    if decision is not None and decision.is_plan:
        return decision.agents[0]
    return turn.agent


def response_bounded(turn: Turn, metadata: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    """``metadata`` cut so that the answer with it — the response every face returns, and the stored message —
    takes at most ``RESPONSE_MAX_BYTES`` of JSON: its longest strings (and lists) are cut with a marker
    (:func:`common.sizes.json_bounded`), and the cut is recorded in it. With it, its JSON when it fitted as it was
    (what its ``jsonb`` column stores: encoded once); ``None`` when it was cut or holds what JSON has no type for."""
    envelope = {"answer": turn.answer, "agent": turn.agent, "conversation_key": turn.input.conversation_key}
    limit = settings.RESPONSE_MAX_BYTES
    budget = max(limit - json_size(envelope) - RESPONSE_RESERVE_BYTES, RESPONSE_RESERVE_BYTES)
    encoded = fastjson.dumps_plain(metadata)  # json_size's bytes, for a value that needs no default
    if encoded is not None and len(encoded) <= budget:
        return metadata, encoded
    bounded, asked = json_bounded(metadata, budget)
    if not asked:
        return metadata, None
    if not isinstance(bounded, dict):  # not even its shape fits: what says what happened
        bounded = {key: metadata.get(key) for key in ("mode", "version", "route", "intent", "turn", "usage")}
        bounded["limits"] = list(metadata.get("limits") or [])
    hit = limit_hit(LIMIT_RESPONSE, "RESPONSE_MAX_BYTES", limit, asked + json_size(envelope), 0)
    bounded["limits"] = [*(bounded.get("limits") or []), hit]
    if isinstance(bounded.get("goal"), dict):
        bounded["goal"]["limits"] = bounded["limits"]
    hit["ran"] = json_size(bounded) + json_size(envelope)
    return bounded, None


def turn_record(turn: Turn) -> TurnRecord:
    """What the turn stores, as :mod:`conversations.records` defines it: personal data masked, results redacted,
    the answer with its metadata within ``RESPONSE_MAX_BYTES``."""
    data, vault = turn.input, turn.guardrails.vault
    metadata = turn.metadata()
    usage = metadata["usage"]
    tool_calls = metadata["mcp_results"]  # redacted once: the rows store what the answer shows, before its bound
    metadata, metadata_json = response_bounded(turn, metadata)
    return TurnRecord(
        conversation_id=turn.store.conversation_pk,
        tenant_id=data.tenant_pk,
        profile_id=data.profile.pk,
        text=turn.guardrails.text_to_store,
        answer=turn.answer,
        agent=turn.agent,
        mode=turn.mode,
        metadata=metadata,
        metadata_json=metadata_json,
        prompt_tokens=usage["prompt_tokens"],
        completion_tokens=usage["completion_tokens"],
        llm_model=usage["model"],
        other_models=other_models(usage),
        cohort=data.cohort,
        routing_version=data.profile.version,
        language=turn.language.kept,  # the conversation's after the turn (LiveState's)
        channel=data.channel,
        user_id=stored_user_id(data),
        client_metadata={key: vault.redact(value) for key, value in data.client_metadata.items()},
        latency_ms=round(sum(node["ms"] for node in turn.trace), 3),
        judge_score=(turn.supervisor.judges.get("rule_based") or {}).get("score"),
        decision=turn.decision,
        notes=[(agent, vault.redact(note)) for agent, note in turn.chain.stored_notes],
        parts=[
            PartRecord(
                agent=partial.agent,
                intent=partial.intent,
                status=partial.status,
                answer=vault.redact(partial.answer),
                error=partial.error,
                round=partial.round,
            )
            for partial in turn.supervisor.parts()
        ],
        tool_calls=tool_calls,
        moves=turn.all_moves(),
        backend_calls=(turn.backend.reply,) if turn.backend.reply else (),
        answered=turn.escalation.answered,
        escalation=turn.escalation.opened,
        goal=goal_served(turn),
    )


def goal_served(turn: Turn) -> str:
    """Goal mode: the goal the turn served (``domain.goal``), or the last one the conversation served."""
    if turn.goal is not None and turn.decision is not None and turn.decision.method == "goal":
        return turn.decision.intent
    last = (turn.stack.goal_state or {}).get("last") if isinstance(turn.stack.goal_state, dict) else None
    if isinstance(last, dict) and last.get("goal"):
        return f"{last.get('domain', '')}.{last['goal']}".strip(".")
    return ""


def turn_persist(turn: Turn, *, stored: Callable[[Turn], None] | None = None) -> int:
    decision = turn.decision
    backends = turn.input.profile.backends
    backend = turn.agent if turn.agent in backends else ""
    was = turn.route.active_agent if turn.route.active_agent in backends else ""
    written = turn.memory.written
    live = LiveState(
        active_backend=backend if decision is not None and backend != was else None,
        # A backend's task waits for the next message only while that backend answers.
        backend_task=None if decision is None else turn.backend.task if backend else "",
        sub_conversation=turn.stack.sub_conversation,
        pending_result=turn.stack.pending_result,
        pending_permission=turn.stack.pending_permission,
        granted_permissions=turn.stack.granted,
        goal_state=turn.stack.goal_state,
        stack=[frame.as_dict() for frame in turn.stack.frames],
        # Small talk that moved nothing leaves the state, the active specialist and its intent as they were.
        routed=None
        if decision is None or (decision.keeps_conversation and not turn.chain.moves)
        else (
            turn.route.next_state,
            active_specialist(turn),
            decision.plan[0].intent if decision.plan else turn.route.final_intent,
        ),
        escalation_id=turn.escalation.opened.pk if turn.escalation.opened is not None else None,
        fallbacks_in_row=turn.store.fallbacks_in_row
        if turn.store.fallbacks_in_row != turn.store.fallbacks_before
        else None,
        outcome=outcome_now(turn),
        language=turn.language.kept,
        memory_summary=(written.text, written.through, written.at_count) if written is not None else None,
    )
    counted = CountedAs(
        cohort=turn.store.cohort,
        handoff_kinds=turn.store.handoff_kinds,
        created_at=turn.store.conversation_created_at,
        language=turn.language.found,
        first=turn.store.message_count == 0,
    )
    record = turn_record(turn)
    claim = turn.input.idempotency_claim
    with transaction.atomic() if claim is not None else contextlib.nullcontext():
        if claim is not None and not IdempotentRequest.objects.select_for_update().filter(pk=claim).exists():
            raise ClaimTakenOver(claim)
        rows = conversation_turn_record(record=record, live=live, counted=counted, ticket=turn.store.ticket)
        turn.store.metadata = record.metadata
        turn.store.state = live.routed[0] if live.routed is not None else turn.route.state
        turn.store.answer_message_id = rows.answer.pk if rows.answer is not None else None
        turn.store.user_message_id = rows.user_message.pk
        if claim is not None:  # a request that dies before it stores its answer leaves this for its retry
            IdempotentRequest.objects.filter(pk=claim).update(turn=turn.result().recorded())
    if stored is not None:  # the features' own writes once the rows are (conversations.stages)
        stored(turn)
    desks_told(turn, rows.user_message)
    return turn.store.conversation_pk


def outcome_now(turn: Turn) -> str | None:
    """The conversation's outcome column after the turn, ``None`` when it stays: ``escalated`` when the turn handed
    it to a person; open again (``""``) when the customer wrote to a conversation that had been closed as resolved or
    abandoned (or before outcomes were recorded). Escalated is final."""
    if turn.escalation.opened is not None:
        return Outcome.ESCALATED
    if turn.store.outcome_was not in (OPEN, Outcome.ESCALATED):
        return OPEN
    return None


def desks_told(turn: Turn, customer_message: Any) -> None:
    """The tenant's desks hear of the stored turn: a conversation that joined a queue, or the customer's message
    to a conversation a person holds (pushed now: this is the database thread, after the write)."""
    if turn.escalation.opened is not None:
        escalation_opened(
            turn.escalation.opened, conversation_key=turn.input.conversation_key, position=turn.escalation.position
        )
    elif turn.escalation.held is not None:
        public = message_public(customer_message)
        push_now(
            desk_group(turn.escalation.held.tenant_id),
            DESK_EVENT,
            {"kind": "message", "escalation": str(turn.escalation.held.pk), "message": public},
        )
        escalation_changed.send(
            sender=Escalation, escalation=turn.escalation.held, kind="customer_message", message=public
        )


def turn_observe_metrics(turn: Turn) -> None:
    """The stored turn's figures (common/infra/metrics.py): profile, mode, routing method, latency and handoffs."""
    method = turn.decision.method if turn.decision is not None else ("blocked" if turn.guardrails.blocked else "none")
    seconds = sum(node["ms"] for node in turn.trace) / 1000
    moves = ((move.kind, move.status) for move in turn.all_moves())
    metrics.turn_observe(turn.input.profile.agent_id, turn.mode, method, seconds, moves)


def ticket_abandon_taken(start: asyncio.Future[bool], turn: Turn) -> None:
    """Give up the ticket a cancelled request took (if taking it succeeded)."""
    if not start.cancelled() and start.exception() is None:
        ordering.ticket_abandon(conversation_pk=turn.store.conversation_pk, ticket=turn.store.ticket)
