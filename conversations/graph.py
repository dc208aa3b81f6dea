"""The routing graph: one pass per user message.

``input_guardrails → routing_decision → <specialist> → output_guardrails → judge
→ supervisor_review → escalation → persist``

Each node is an async function over :class:`Turn` and is timed into
``turn.trace``. The graph reads configuration only from the compiled snapshot
and touches the database at the edges: a ticket that orders the
conversation's turns (:mod:`conversations.ordering`), one read of the
conversation's state, and one transaction that persists the whole turn. No
transaction or lock is held while a model is called.

The ``specialist`` node runs a chain: the chosen specialist may hand the turn
to another (``request_handoff``), a coordinator may delegate it
(``request_specialist_sub_conversation``), a delegated specialist may give it
back (``end_specialist_sub_conversation``) — each move checked by loop safety
(:mod:`handoffs.safety`) and recorded in ``agent_handoffs``.

People in the loop (docs/desk.md): the routing (the customer asks for a person, an intent people answer), a
specialist (``request_human``) or the profile's rules read by the ``escalation`` node hand the conversation to a
person: the turn stores the escalation with its answer — the customer's place in line — and a ``human`` handoff.
While a person holds the conversation its messages take a shorter path, ``input_guardrails → person → persist``:
stored and passed to the desk, no assistant answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from agents.generation import (
    FINISH_LENGTH,
    answer_formatted,
    json_answer,
    json_text,
    strings_mapped,
    strings_of,
    text_within,
)
from agents.llm import ERROR_ANSWER, judge_asker, llm_configured, result_summary
from agents.usage import other_models, text_tokens, usage_counting
from common.events import Emit, emit_safely
from common.infra import metrics, tracing
from common.infra.bus import publish_event
from common.language import detect_language
from common.sizes import json_bounded, json_size, limit_hit, text_cut
from conversations import ordering
from conversations.delivery import DESK_EVENT, desk_group, push_now
from conversations.desk import (
    escalation_new,
    escalation_opened,
    escalation_public,
    message_public,
    person_move,
    queue_ahead,
    queue_position,
)
from conversations.escalation import (
    escalation_after,
    escalation_asked,
    language_of,
    notice,
    specialist_asked,
    summary_for_person,
)
from conversations.fanout import executor_for
from conversations.gateway import GatewayMessage, backend_call, gateway_note, handoff_summary
from conversations.goal_turn import GENERAL, goal_answer, goal_routing
from conversations.guardrails import (
    StreamMasker,
    identifier_pseudonym,
    run_input_guardrails,
    run_output_guardrails,
)
from conversations.history import conversation_history, history_parse, history_read
from conversations.judges import NOTE, REPLACE, REVIEW_FALLBACK_ANSWER, judge_answer, review_decision, review_note
from conversations.models import (
    ESCALATION_OPEN,
    OPEN,
    Conversation,
    Escalation,
    EscalationReason,
    EscalationStatus,
    Outcome,
)
from conversations.permissions import (
    GRANTED,
    permission_context,
    permission_note,
    permission_reply,
)
from conversations.records import CountedAs, LiveState, PartRecord, TurnRecord, conversation_turn_record
from conversations.runtime import (
    STATUS_PERMISSION_REQUIRED,
    SpecialistOutcome,
    SpecialistRequest,
    specialist_run,
    tools_for_turn,
)
from conversations.signals import escalation_changed
from conversations.supervisor import (
    MAX_REVIEW_ROUNDS,
    STATUS_OK,
    CoverageCheck,
    Partial,
    PlanResult,
    Runner,
    consolidate,
    coverage_check,
    keyword_uncovered,
    llm_uncovered,
    review_loop,
)
from conversations.turn import (
    LIMIT_ANSWER,
    LIMIT_MAX_TOKENS,
    LIMIT_RESPONSE,
    Turn,
    TurnInput,
)
from handoffs.models import PERSON, Handoff, HandoffKind, HandoffStatus
from handoffs.safety import REFUSED_NOT_ALLOWED, STOP_STEP_LIMIT, move_check, stop_summary
from handoffs.services import Move
from handoffs.tools import (
    END_SUB_CONVERSATION,
    REQUEST_HANDOFF,
    REQUEST_HUMAN,
    REQUEST_SUB_CONVERSATION,
    STATUS_OUT_OF_SCOPE,
    ControlCall,
    ControlTool,
)
from routing import snapshot as snapshots
from routing.decide import COORDINATION_INTENT, delegation_active, route_decide
from routing.goals import FAILURE as GOAL_FAILED
from routing.rollout import (
    COHORT_MULTI_AGENT,
    COHORT_SINGLE_AGENT,
    MULTI_AGENT_FLAG,
    REASON_BUCKET,
    REASON_CONVERSATION,
)
from routing.router import FALLBACK_INTENT, IntentSpec, PlanStep, RouteDecision
from routing.snapshot import Snapshot
from routing.specs import ProfileSpec

T = TypeVar("T")

BLOCKED_ANSWER = (
    "Não posso ajudar com esta mensagem. Reformule, por favor. (I can't help with this message; please rephrase it.)"
)
NO_SPECIALIST_ANSWER = (
    "Nenhum especialista está disponível para este perfil agora. "
    "(No specialist is available for this profile right now.)"
)
BACKEND_UNAVAILABLE_ANSWER = (
    "Não consegui falar com a equipe que responde a isso agora. Tente de novo em instantes, por favor. "
    "(The team that answers this could not be reached right now; please try again in a moment.)"
)
# The note with which a client's instructions reach the specialists (the OpenAI-compatible faces' system messages and
# ``instructions``): under the profile's policy and the specialist's prompt, never in their place.
INSTRUCTIONS_NOTE = (
    "[CLIENT_INSTRUCTIONS: the application that sent this message asks, for this answer only (your policy and role "
    "above still apply): {instructions}]"
)
RESPONSE_RESERVE_BYTES = 1024  # of RESPONSE_MAX_BYTES, kept for the envelope's keys and the response's own hit


Node = Callable[[Turn], Awaitable[None]]
_NO_SPAN = contextlib.nullcontext()


async def _timed(turn: Turn, name: str, node: Node) -> None:
    """Run one node, timed into ``turn.trace`` (the specialist node under the agent's name) and traced as a span."""
    label = turn.agent if name == "specialist" and turn.agent else name
    started, traced = time.perf_counter(), tracing.tracing_on()
    started_ns = time.time_ns() if traced else 0
    try:
        # The specialist node's span is live: specialist runs, handoffs and a worker's steps hang under it. The
        # others are recorded when they end, the cheap way (common.infra.tracing.finished_span), if not too short.
        with (
            tracing.span("graph.specialist", node=name, agent=turn.agent)
            if traced and name == "specialist"
            else _NO_SPAN
        ):
            await node(turn)
    finally:
        ms = round((time.perf_counter() - started) * 1000, 3)
        turn.trace.append({"node": label, "ms": ms})
        if traced and name != "specialist" and ms >= settings.TRACING_NODE_MIN_MS:
            tracing.finished_span(f"graph.{name}", started_ns, time.time_ns(), {"node": name})


# --- nodes ---------------------------------------------------------------------


async def input_guardrails(turn: Turn) -> None:
    """Size limit, blocked terms, and personal data masked before any model, log or trace sees it."""
    report = run_input_guardrails(
        turn.input.text.strip(),
        turn.input.profile.guardrails,
        turn.vault,
        default_max_input_chars=settings.MAX_INPUT_CHARS,
    )
    turn.blocked = report.blocked
    turn.sanitized_text = report.text_for_model
    turn.text_to_store = report.text_to_store
    turn.guardrails["input"] = report.as_dict()


async def routing_decision(turn: Turn) -> None:
    """The permission gate's reply first, then the profile's routing (coordinator or router/hybrid/supervisor)."""
    if turn.blocked:
        return
    profile = turn.input.profile
    turn.decision = _permission_decision(turn)
    if turn.decision is None and turn.mode == "goal":
        turn.decision = await goal_routing(turn)
    if turn.decision is None:
        sub = turn.sub_conversation or {}
        turn.decision = await route_decide(
            profile=profile,
            text=turn.sanitized_text,
            state=turn.state or None,
            active_agent=turn.active_agent,
            active_intent=turn.active_intent,
            delegated_to=sub.get("specialist", ""),
            delegated_intent=sub.get("intent", ""),
            single_agent=turn.input.single_agent,
        )
        if turn.decision.method in ("coordinator", "sub_conversation"):
            turn.decision.handoff = False  # moves under a coordinator are delegations and returns
    if turn.reply is None and turn.decision.method == "state" and "reply" in turn.decision.metadata:
        turn.reply = profile.reply_words.read(turn.sanitized_text)  # what the router recorded, with what follows it
    turn.agent = turn.decision.agent
    turn.final_intent = turn.decision.intent
    # Small talk keeps the conversation's state (a flow waiting for its reply still waits); anything else sets it.
    turn.next_state = turn.state if turn.decision.keeps_conversation else (turn.decision.next_state or "")
    decision = turn.decision
    turn.escalate = escalation_asked(profile.escalation, decision, escalate_to=escalation_team(profile, decision))
    if turn.escalate is not None:
        # A person answers: the assistant routed to never takes the conversation, and its state stays as it was.
        decision.handoff, decision.keeps_conversation = False, True
        decision.metadata["escalation"] = turn.escalate.reason
        turn.next_state = turn.state
    if note := gateway_note(turn.input.context):  # another deployment's gateway handed the conversation here
        turn.notes.append(note)
        turn.stored_notes.append((turn.agent, note))
    if (
        decision.handoff
        and turn.escalate is None
        and profile.backends
        and (turn.agent in profile.backends or turn.active_agent in profile.backends)
    ):
        await _backend_move(turn)
    await emit_safely(
        turn.input.emit,
        "route",
        {
            "mode": turn.mode,
            "route": decision.route,
            "agent": decision.agent,
            "agents": decision.agents,
            "intent": decision.intent,
            "method": decision.method,
            "reason": decision.reason,
        },
    )
    if decision.handoff:
        await _moves_out(turn, turn.all_moves()[:1])
    coordinated = turn.decision.method == "coordinator" or (
        turn.decision.method == "small_talk" and turn.agent == profile.coordinator
    )
    if coordinated and turn.pending_result and turn.escalate is None:
        # A delegation's finished sub-conversation: its result reaches the coordinator once, with this message
        # (a greeting too).
        note = result_note(turn.pending_result)
        turn.notes.append(note)
        turn.stored_notes.append((turn.agent, note))
        turn.pending_result = None


def escalation_team(profile: ProfileSpec, decision: RouteDecision) -> str:
    """The team of people the decision's intent (or a plan's first such step) hands its conversations to; ``""``."""
    intents = profile.router.intents_by_name
    for name in (decision.intent, *(step.intent for step in decision.plan)):
        spec = intents.get(name)
        if spec is not None and spec.escalate_to:
            return spec.escalate_to
    return ""


async def _backend_move(turn: Turn) -> None:
    """The answering side changes to, from or between remote backends: a ``backend_handoff`` with the decision's
    reason and a short summary of the conversation, checked by loop safety as agents' handoffs are (the
    conversation's recent backend moves count as its handoff paths); a local specialist taking the conversation
    back gets the summary as a system note (a backend gets it in ``context.gateway``)."""
    decision, limits = turn.decision, turn.input.profile.loop_safety
    assert decision is not None
    source, target = turn.active_agent, decision.agent
    summary = handoff_summary(turn.history)
    if turn.recent_paths is None:
        turn.recent_paths = await sync_to_async(_recent_paths)(turn.conversation_pk, limits.window)
    stop = move_check(
        chain=[source],
        target=target,
        moves_this_turn=0,
        recent_paths=turn.recent_paths,
        steps_left=1,
        max_handoffs=limits.max_handoffs_per_turn,
        block_ping_pong=limits.block_ping_pong,
        window=limits.window,
        max_repeats=limits.max_repeats,
    )
    status = HandoffStatus.STOPPED if stop else HandoffStatus.COMPLETED
    turn.backend_move = Move(source, target, HandoffKind.BACKEND, status, decision.reason, summary, outcome=stop or "")
    if stop is None and target not in turn.input.profile.backends:
        turn.notes.append(
            f"[SYSTEM_NOTE: the backend {source} handed this conversation back to you. Summary: {summary}]"
        )


def _permission_decision(turn: Turn) -> RouteDecision | None:
    """A reply to the permission question goes back to the specialist that asked, granted or denied; it is recorded
    as ``metadata["reply"]`` and its words move nothing (:attr:`Turn.reply`).

    Any other message drops the waiting request and is routed as usual.
    """
    pending, turn.pending_permission = turn.pending_permission, None
    if not pending:
        return None
    reading = turn.input.profile.reply_words.read(turn.sanitized_text)
    reply = permission_reply(reading)
    if reply is None:
        return None
    turn.reply = reading
    tool = pending["tool"]
    if reply == GRANTED and tool not in turn.granted:
        turn.granted.append(tool)
    turn.permission = {"tool": tool, "reply": reply}
    turn.context = {**pending.get("context", {}), **turn.input.context}
    turn.notes.append(permission_note(tool, reply))
    tools = [name for name in pending.get("mcp_tools", []) if reply == GRANTED or name != tool]
    return RouteDecision(
        route=pending["agent"],
        agent=pending["agent"],
        intent=pending.get("intent", ""),
        confidence=1.0,
        reason=f"Reply to the permission question: the user {reply} {tool}.",
        method="permission",
        mcp_tools=tools,
        metadata={"permission": turn.permission, "reply": reading.as_metadata()},
    )


def result_note(result: dict[str, Any]) -> str:
    """The system note that gives a finished sub-conversation's result to the coordinator."""
    return (
        f"[SYSTEM_NOTE: the sub-conversation with {result.get('specialist', '')} ended. "
        f"status: {result.get('status', '')}; "
        f"final_result: {json.dumps(result.get('final_result'), ensure_ascii=False, default=str)}; "
        f"last_user_message: {json.dumps(result.get('last_user_message', ''), ensure_ascii=False)}; "
        f"message_to_coordinator: {json.dumps(result.get('message_to_coordinator', ''), ensure_ascii=False)}]"
    )


def _specialist_request(
    turn: Turn,
    current: Snapshot,
    agent: str,
    intent_name: str,
    intent_tools: Iterable[str],
    *,
    notes: tuple[str, ...] = (),
    control: tuple[ControlTool, ...] = (),
    step_limit: int = 0,
    emit: Emit | None = None,
    reply_rest: str | None = None,
    part: bool = False,
) -> SpecialistRequest | None:
    """``agent``'s request for this turn; a supervisor's ``part`` writes prose (the turn merges the parts, then puts
    the answer in the client's format)."""
    profile = turn.input.profile
    spec = profile.specialists.get(agent)
    if spec is None:
        return None
    intent = profile.router.intents_by_name.get(intent_name)
    tools = tools_for_turn(profile=profile, specialist=spec, intent_tools=list(intent_tools), all_tools=current.tools)
    generation = turn.input.generation
    if generation is not None and part:
        generation = generation.without_format()
    if turn.input.instructions:
        notes = (*notes, INSTRUCTIONS_NOTE.format(instructions=turn.vault.mask(turn.input.instructions)))
    return SpecialistRequest(
        profile=profile,
        specialist=spec,
        text=turn.sanitized_text,
        intent=intent_name,
        intent_description=intent.description if intent else "",
        history=turn.history,
        context=turn.context,
        model_context=turn.vault.mask_value(turn.context),
        tools=tools,
        servers=current.servers,
        unmask=turn.vault.unmask,
        mask=turn.vault.mask_value,
        control=control,
        notes=notes,
        step_limit=step_limit,
        granted=frozenset(turn.granted),
        emit=emit,
        reply_rest=reply_rest,
        generation=generation,
    )


async def specialist(turn: Turn) -> None:
    """The chosen specialist answers (and may hand over); for a supervisor plan, every planned one does."""
    if turn.blocked:
        turn.answer = BLOCKED_ANSWER
        return
    if turn.escalate is not None:  # the routing handed the conversation to a person: the escalation node answers
        turn.agent = PERSON
        return
    decision = turn.decision
    current = turn.input.snapshot or await sync_to_async(snapshots.current)()
    if decision is not None and decision.is_plan:
        await _supervisor_agent(turn, current, decision.plan)
        return
    if turn.goal is not None and turn.goal.decision.status != GENERAL:
        await goal_answer(turn, current)
        return
    if turn.backend_move is not None and turn.backend_move.status == HandoffStatus.STOPPED:
        # Loop safety stopped a move to, from or between backends: the conversation stays where it was.
        turn.agent = turn.active_agent
        turn.answer = stop_summary(reason=turn.backend_move.outcome, answer="", findings=[])
        return
    if turn.agent in turn.input.profile.backends:
        await _remote(turn, current)
        return
    await _chain(turn, current)


async def _remote(turn: Turn, current: Snapshot) -> None:
    """A remote backend answers (conversations/gateway.py): its tokens stream through as a specialist's do. A hop
    that fails gets the profile's fallback specialist (told why), or a graceful sentence when it has none."""
    data, profile = turn.input, turn.input.profile
    backend = profile.backends[turn.agent]
    move = turn.backend_move
    event = {"agent": backend.name, "display_name": backend.display_name, "via": "backend"}
    await emit_safely(data.emit, "agent", event)
    masker = StreamMasker(turn.vault, profile.guardrails)
    message = GatewayMessage(
        text=data.text.strip(),  # the remote deployment applies its own guardrails to what the user wrote
        conversation_key=data.conversation_key,
        from_profile=profile.agent_id,
        user_id=stored_user_id(data),
        context=turn.context,
        handoff_summary=move.context_summary if move is not None else "",
        reason=turn.decision.reason if turn.decision else "",
    )
    reply = await backend_call(
        backend=backend,
        profile=profile.agent_id,
        message=message,
        hops=data.hops,
        emit=_masking_tokens(data.emit, masker),
    )
    if rest := masker.flush():
        await emit_safely(data.emit, "token", {"agent": backend.name, "text": rest})
    turn.backend_reply = reply
    if reply.ok:
        turn.answer = reply.answer
        return
    if move is not None:
        turn.backend_move = replace(move, status=HandoffStatus.STOPPED, outcome=f"backend_{reply.status}"[:32])
    await emit_safely(data.emit, "discard", {"agent": backend.name})
    if profile.fallback_agent not in profile.specialists:
        turn.agent, turn.answer = "", BACKEND_UNAVAILABLE_ANSWER
        return
    turn.agent, turn.final_intent = profile.fallback_agent, FALLBACK_INTENT
    turn.notes.append(f"[SYSTEM_NOTE: {backend.display_name} could not answer ({reply.status}); answer as you can.]")
    await _chain(turn, current)


def _control_tools(turn: Turn, agent: str) -> tuple[ControlTool, ...]:
    """The moves ``agent`` is offered: end its sub-conversation, delegate (coordinator), or hand off; and hand the
    conversation to a person when the profile lets specialists."""
    escalation = turn.input.profile.escalation
    person = (
        (ControlTool(REQUEST_HUMAN, escalation.teams),) if escalation.enabled and escalation.specialist_tool else ()
    )
    return _agent_moves(turn, agent) + person


def _agent_moves(turn: Turn, agent: str) -> tuple[ControlTool, ...]:
    profile = turn.input.profile
    spec = profile.specialists[agent]
    if turn.input.single_agent:
        return ()
    if delegation_active(profile):
        sub = turn.sub_conversation
        if sub and sub.get("specialist") == agent:
            return (ControlTool(END_SUB_CONVERSATION),)
        if agent == profile.coordinator:
            others = spec.handoff_targets or tuple(name for name in sorted(profile.specialists) if name != agent)
            return (ControlTool(REQUEST_SUB_CONVERSATION, others),) if others else ()
        return ()
    if profile.handoffs_enabled and spec.handoff_targets:
        return (ControlTool(REQUEST_HANDOFF, spec.handoff_targets),)
    return ()


def _steps_left(turn: Turn, agent: str, used: dict[str, int]) -> int:
    spec = turn.input.profile.specialists.get(agent)
    if spec is None:
        return 0
    return min(spec.step_limit, turn.input.profile.loop_safety.max_steps_per_agent) - used.get(agent, 0)


def _findings(turn: Turn) -> list[str]:
    return [f"{result.tool}: {result_summary(result.result)}" for result in turn.tool_results() if result.ok]


@dataclass
class _Link:
    """Where the chain of specialists stands: who answers next, on which intent and tools, told what."""

    agent: str
    intent: str
    tools: list[str]
    notes: tuple[str, ...] = ()
    via: str = "route"  # how the agent got the turn: route, handoff, delegation or return
    path: list[str] = field(default_factory=list)  # the agents the turn went through, in order
    used: dict[str, int] = field(default_factory=dict)  # model steps each agent used this turn
    # The message answers this agent's own question: what follows the reply (SpecialistRequest.reply_rest).
    reply_rest: str | None = None

    def move_to(self, agent: str, intent: IntentSpec | None, *, via: str, notes: tuple[str, ...]) -> None:
        self.agent, self.via, self.notes, self.reply_rest = agent, via, notes, None
        self.intent, self.tools = (intent.name, list(intent.mcp_tools)) if intent else ("", [])
        self.path.append(agent)


async def _chain(turn: Turn, current: Snapshot) -> None:
    """Run specialists until one answers: each handoff, delegation and return moves the turn within this request.

    The target of a move gets the user's message plus a system note (the
    handoff's reason and summary, the coordinator's initial context, or the
    finished sub-conversation's result); whatever the mover wrote is not shown,
    so the user never sees a transfer announced. Loop safety checks every
    handoff and delegation; a stop answers with what was found so far. Each
    control tool has its handler in :data:`MOVES`.
    """
    tools = list(turn.decision.mcp_tools) if turn.decision else []
    link = _Link(
        agent=turn.agent,
        intent=turn.final_intent,
        tools=tools,
        notes=tuple(turn.notes),
        path=[turn.agent],
        reply_rest=turn.reply.rest if turn.reply else None,
    )
    while True:
        moves_before = len(turn.moves)
        step = await _step(turn, current, link)
        if step is None:
            turn.answer = NO_SPECIALIST_ANSWER
            return
        request, outcome = step
        if outcome.permission_needed is not None:
            # The specialist called a needs-permission tool without a grant: it asks, and the request waits.
            turn.answer = outcome.answer
            turn.pending_permission = _waiting_request(turn, request, outcome.permission_needed.name)
            answered = True
        elif outcome.control is None:
            turn.answer, answered = outcome.answer, True
        else:
            answered = await MOVES[outcome.control.name](turn, link, outcome, outcome.control)
        await _emit_moves(turn, moves_before)
        if answered:
            return


async def _step(turn: Turn, current: Snapshot, link: _Link) -> tuple[SpecialistRequest, SpecialistOutcome] | None:
    """``link.agent`` answers once (its model steps bounded by what it has left); refusals and a step-limit stop
    become moves. ``None`` when the agent is not one of the profile's specialists."""
    agent, profile = link.agent, turn.input.profile
    masker = StreamMasker(turn.vault, profile.guardrails)
    request = _specialist_request(
        turn,
        current,
        agent,
        link.intent,
        link.tools,
        notes=link.notes,
        control=_control_tools(turn, agent) if agent in profile.specialists else (),
        step_limit=max(_steps_left(turn, agent, link.used), 1),
        emit=_masking_tokens(turn.input.emit, masker),
        reply_rest=link.reply_rest,
    )
    if request is None:
        return None
    turn.agent, turn.final_intent = agent, link.intent
    turn.offered_tools = sorted({*turn.offered_tools, *(tool.name for tool in request.tools)})
    event = {"agent": agent, "display_name": request.specialist.display_name, "via": link.via}
    await emit_safely(turn.input.emit, "agent", event)
    outcome = await specialist_run(request)
    if rest := masker.flush():
        await emit_safely(turn.input.emit, "token", {"agent": agent, "text": rest})
    turn.outcome = outcome
    turn.runs.append((agent, outcome))
    link.used[agent] = link.used.get(agent, 0) + outcome.steps
    for refused in outcome.refused:
        kind = HandoffKind.DELEGATION if refused.name == REQUEST_SUB_CONVERSATION else HandoffKind.HANDOFF
        reason = refused.text("reason") or f"{refused.target or '(none)'} is not a target of {agent}."
        summary = refused.text("context_summary") or refused.text("initial_context")
        turn.moves.append(
            Move(agent, refused.target, kind, HandoffStatus.REFUSED, reason, summary, outcome=REFUSED_NOT_ALLOWED)
        )
    if outcome.stopped == STOP_STEP_LIMIT:
        reason = f"{agent} used its {outcome.steps - 1} steps; it answered with what it had."
        turn.moves.append(Move(agent, "", HandoffKind.HANDOFF, HandoffStatus.STOPPED, reason, outcome=STOP_STEP_LIMIT))
    move = outcome.control
    if move is not None and outcome.permission_needed is None and outcome.answer.strip():
        kept = move.name == END_SUB_CONVERSATION and move.status != STATUS_OUT_OF_SCOPE
        if not kept:  # what the mover wrote is not the answer
            await emit_safely(turn.input.emit, "discard", {"agent": agent})
    return request, outcome


def _masking_tokens(emit: Emit | None, masker: StreamMasker) -> Emit | None:
    """``emit`` with every ``token`` passed through the output guardrails' masking before it leaves: the tokens
    a client joins are the masked answer, never a raw value or a placeholder (:class:`StreamMasker`)."""
    if emit is None:
        return None
    sink = emit

    async def masked(event: str, data: dict[str, Any]) -> None:
        if event == "token":
            text = masker.push(data.get("text") or "")
            if not text:
                return
            data = {**data, "text": text}
        await sink(event, data)

    return masked


async def _sub_conversation_ended(turn: Turn, link: _Link, outcome: SpecialistOutcome, move: ControlCall) -> bool:
    """``end_specialist_sub_conversation``: the result waits for the coordinator, and the specialist's answer is
    the turn's; out of scope (or nothing said to the user), the coordinator takes this very message, with the
    result. Returns whether the turn is answered."""
    coordinator = _end_sub_conversation(turn, link.agent, move)
    if move.status != STATUS_OUT_OF_SCOPE and outcome.answer.strip():
        turn.answer = outcome.answer
        return True
    note = result_note(turn.pending_result or {})
    turn.pending_result = None
    turn.stored_notes.append((coordinator, note))
    intent = turn.input.profile.router.intent_of(coordinator, turn.sanitized_text)
    link.move_to(coordinator, intent, via=HandoffKind.RETURN, notes=(note,))
    if intent is None:
        link.intent = COORDINATION_INTENT
    return False


async def _transferred(turn: Turn, link: _Link, outcome: SpecialistOutcome, move: ControlCall) -> bool:
    """``request_handoff`` and ``request_specialist_sub_conversation``: loop safety checks the move; a stop answers
    with what was found so far, else the target takes the turn with a system note. Returns whether answered."""
    agent, target, limits = link.agent, move.target, turn.input.profile.loop_safety
    kind = HandoffKind.DELEGATION if move.name == REQUEST_SUB_CONVERSATION else HandoffKind.HANDOFF
    summary = move.text("context_summary") or move.text("initial_context")
    reason = move.text("reason") or f"{agent} delegated to {target}."
    if turn.recent_paths is None:
        turn.recent_paths = await sync_to_async(_recent_paths)(turn.conversation_pk, limits.window)
    stop = move_check(
        chain=link.path,
        target=target,
        moves_this_turn=sum(1 for m in turn.moves if _counts_as_move(m)),
        recent_paths=turn.recent_paths + [(m.from_agent, m.to_agent) for m in turn.moves if _counts_as_path(m)],
        steps_left=_steps_left(turn, target, link.used),
        max_handoffs=limits.max_handoffs_per_turn,
        block_ping_pong=limits.block_ping_pong,
        window=limits.window,
        max_repeats=limits.max_repeats,
    )
    if stop:
        turn.moves.append(Move(agent, target, kind, HandoffStatus.STOPPED, reason, summary, outcome=stop))
        turn.answer = stop_summary(reason=stop, answer=outcome.answer, findings=_findings(turn))
        return True
    turn.moves.append(Move(agent, target, kind, HandoffStatus.COMPLETED, reason, summary))
    intent = turn.input.profile.router.intent_of(target, turn.sanitized_text)
    turn.next_state = intent.next_state if intent else ""
    if kind == HandoffKind.DELEGATION:
        turn.sub_conversation = {
            "specialist": target,
            "coordinator": agent,
            "intent": intent.name if intent else "",
            "initial_context": summary,
            "started_at": time.time(),
        }
        notes = (f"[SYSTEM_NOTE: the coordinator {agent} passed you this conversation. Context: {summary}]",)
    else:
        notes = (f"[SYSTEM_NOTE: {agent} handed this conversation to you. Reason: {reason} Summary: {summary}]",)
    link.move_to(target, intent, via=str(kind), notes=notes)
    return False


async def _to_person(turn: Turn, link: _Link, outcome: SpecialistOutcome, move: ControlCall) -> bool:
    """``request_human``: the specialist hands the conversation to a person; the escalation node answers (the
    customer's place in line), whatever the specialist wrote."""
    turn.escalate = specialist_asked(turn.input.profile.escalation, link.agent, move.args)
    turn.answer = ""
    return True


# What each control tool does to the chain (handoffs/tools.py names them).
MoveHandler = Callable[[Turn, _Link, SpecialistOutcome, ControlCall], Awaitable[bool]]
MOVES: dict[str, MoveHandler] = {
    END_SUB_CONVERSATION: _sub_conversation_ended,
    REQUEST_HANDOFF: _transferred,
    REQUEST_SUB_CONVERSATION: _transferred,
    REQUEST_HUMAN: _to_person,
}


async def _emit_moves(turn: Turn, since: int) -> None:
    await _moves_out(turn, turn.moves[since:])


async def _moves_out(turn: Turn, moves: list[Move]) -> None:
    """Moves just made: streamed to the client and traced (a ``handoff`` span each)."""
    for move in moves:
        if tracing.tracing_on():
            tracing.record(
                "handoff",
                **{"handoff.from": move.from_agent, "handoff.to": move.to_agent or None},
                kind=str(move.kind),
                status=str(move.status),
                outcome=move.outcome or None,
            )
        await emit_safely(turn.input.emit, "handoff", move.as_dict())


def _counts_as_move(move: Move) -> bool:
    """Handoffs and delegations made this turn count towards its limit (returns and refusals don't)."""
    return move.status == HandoffStatus.COMPLETED and move.kind in (HandoffKind.HANDOFF, HandoffKind.DELEGATION)


def _counts_as_path(move: Move) -> bool:
    return move.status == HandoffStatus.COMPLETED and move.kind == HandoffKind.HANDOFF


def _end_sub_conversation(turn: Turn, agent: str, move: ControlCall) -> str:
    """Close the sub-conversation, keep its result pending for the coordinator; returns the coordinator."""
    sub = turn.sub_conversation or {}
    coordinator = sub.get("coordinator") or turn.input.profile.coordinator
    result = {
        "specialist": agent,
        "status": move.status,
        "final_result": move.args.get("final_result"),
        "last_user_message": move.text("last_user_message") or turn.sanitized_text,
        "message_to_coordinator": move.text("message_to_coordinator"),
    }
    turn.sub_conversation = None
    turn.pending_result = result
    turn.moves.append(
        Move(
            agent,
            coordinator,
            HandoffKind.RETURN,
            HandoffStatus.COMPLETED,
            reason=result["message_to_coordinator"] or f"{agent} ended its sub-conversation: {move.status}.",
            context_summary=json.dumps(result["final_result"], ensure_ascii=False, default=str)[:2000],
            outcome=move.status[:32],
        )
    )
    return coordinator


def _waiting_request(turn: Turn, request: SpecialistRequest, tool: str) -> dict[str, Any]:
    return {
        "tool": tool,
        "agent": request.specialist.name,
        "intent": request.intent,
        "mcp_tools": [spec.name for spec in request.tools],
        "context": permission_context(request.tools, turn.context),
        "asked_at": time.time(),
    }


def _parts_runner(turn: Turn, current: Snapshot, notes: Callable[[PlanStep], tuple[str, ...]] | None = None) -> Runner:
    """Runs a batch of steps as a supervisor's parts (the executor: in this process or Celery), each told
    ``notes(step)``; streaming clients see each part the moment it finishes."""

    async def run(batch: list[PlanStep], round_number: int) -> PlanResult:
        requests = {
            step.agent: _specialist_request(
                turn, current, step.agent, step.intent, step.mcp_tools, notes=notes(step) if notes else (), part=True
            )
            for step in batch
        }
        offered = {tool.name for request in requests.values() if request for tool in request.tools}
        turn.offered_tools = sorted({*turn.offered_tools, *offered})
        return await executor_for().run(
            batch,
            requests,
            timeout=settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS,
            round_number=round_number,
            vault=turn.vault,
            on_partial=report if turn.input.emit is not None else None,
        )

    async def report(partial: Partial) -> None:
        """A step finished: streaming clients see its part at once, before the others and the consolidation."""
        event = {"agent": partial.agent, "intent": partial.intent, "status": partial.status, "round": partial.round}
        await emit_safely(turn.input.emit, "partial", {**event, "answer": turn.vault.redact(partial.answer)})

    return run


def _open_parts(turn: Turn, *, single_turn: bool = False) -> tuple[str, CoverageCheck]:
    """What the review finds still open in the request, and how it finds it: the model's verdict (the history in
    its prompt) when one is configured; else, for a single-specialist turn, the keyword coverage rule (the
    conversation's active specialist answered the previous message); else (a plan offline) nothing beyond its
    failed parts."""
    profile, question, history = turn.input.profile, turn.sanitized_text, turn.history

    async def by_model(result: PlanResult) -> list[PlanStep]:
        return await llm_uncovered(profile=profile, question=question, result=result, history=history)

    async def by_keywords(result: PlanResult) -> list[PlanStep]:
        return keyword_uncovered(
            profile=profile, question=question, result=result, history=history, also_answered=turn.active_agent
        )

    async def nothing(result: PlanResult) -> list[PlanStep]:
        return []

    if llm_configured(profile):
        return "model", by_model
    return ("keywords", by_keywords) if single_turn else ("failed_parts", nothing)


async def _supervisor_agent(turn: Turn, current: Snapshot, steps: list[PlanStep]) -> None:
    """Run the plan, then the review loop (uncovered parts go on to their specialists), then consolidate."""
    steps = list(steps)
    run = _parts_runner(turn, current)
    for step in steps:
        spec = turn.input.profile.specialists.get(step.agent)
        name = spec.display_name if spec else step.agent
        await emit_safely(turn.input.emit, "agent", {"agent": step.agent, "display_name": name, "via": "supervisor"})
    result = await run(steps, 0)
    uncovered = coverage_check(steps, _open_parts(turn)[1])
    turn.plan_result = await review_loop(result, run=run, uncovered=uncovered, max_rounds=MAX_REVIEW_ROUNDS)
    # A part that stopped at a tool needing permission asked for it in its answer; the reply goes to that
    # specialist, as in router mode.
    for partial in turn.plan_result.partials:
        results = partial.outcome.tool_results if partial.outcome else []
        waiting = next((r.tool for r in results if r.status == STATUS_PERMISSION_REQUIRED), None)
        planned = next((item for item in steps if item.agent == partial.agent), None)
        if waiting and planned is not None and turn.pending_permission is None:
            request = _specialist_request(turn, current, planned.agent, planned.intent, planned.mcp_tools)
            if request is not None:
                turn.pending_permission = _waiting_request(turn, request, waiting)
    turn.answer, turn.consolidation = await consolidate(
        turn.plan_result, profile=turn.input.profile, question=turn.sanitized_text, generation=turn.input.generation
    )


def _tool_results(turn: Turn) -> list[dict[str, Any]]:
    return [result.as_dict() for result in turn.tool_results()]


def _answer_bounded(turn: Turn) -> None:
    """The answer cut to ``ANSWER_MAX_CHARS`` with a marker (stored and returned cut), and the cut recorded."""
    limit = settings.ANSWER_MAX_CHARS
    if len(turn.answer) <= limit:
        return
    asked = len(turn.answer)
    turn.answer = text_cut(turn.answer, limit)
    turn.limits = [hit for hit in turn.limits if hit["limit"] != LIMIT_ANSWER]
    turn.limits.append(limit_hit(LIMIT_ANSWER, "ANSWER_MAX_CHARS", limit, asked, len(turn.answer)))


def _asked_json(turn: Turn) -> tuple[bool, Any]:
    """The answer's JSON when the client asked for JSON and it is (:func:`agents.generation.json_answer`)."""
    asked = turn.input.generation
    return json_answer(turn.answer, asked.response_format if asked is not None else None)


async def output_guardrails(turn: Turn) -> None:
    """No raw tool JSON, stack traces or personal data in the answer, which is cut to ``ANSWER_MAX_CHARS`` first. An
    answer in the JSON the client asked for is JSON by request: its strings are guarded, each as an answer, and its
    shape kept."""
    _answer_bounded(turn)
    results, options = _tool_results(turn), turn.input.profile.guardrails
    is_json, value = _asked_json(turn)
    if not is_json:
        report = run_output_guardrails(turn.answer, turn.vault, results, settings=options)
        turn.answer = report.answer
        turn.guardrails["output"] = report.as_dict()
        return
    reports: list[Any] = []

    def guarded(text: str) -> str:
        reports.append(run_output_guardrails(text, turn.vault, results, settings=options))
        return reports[-1].answer

    changed = strings_mapped(value, guarded)
    if changed != value:
        turn.answer = json_text(changed)
    checks = reports or [run_output_guardrails("", turn.vault, results, settings=options)]
    turn.guardrails["output"] = {
        "passed": all(report.passed for report in checks),
        # Per guardrail, the first string it changed (else the first string's check).
        "checks": [
            next((report.checks[index] for report in checks if not report.checks[index]["passed"]), check)
            for index, check in enumerate(checks[0].checks)
        ],
        "json_strings": len(reports),
    }


async def judge(turn: Turn) -> None:
    """Rule-based judge always; the LLM judge when the profile asks for it and a model is configured. Not on a turn
    handed to a person (its answer is the customer's place in line)."""
    if turn.escalate is not None:
        return
    judges = turn.input.profile.judges
    is_json, value = _asked_json(turn)
    turn.judges = await judge_answer(
        question=turn.sanitized_text,
        answer="\n".join(strings_of(value)) if is_json else turn.answer,  # the words of a JSON answer, not its keys
        tool_results=_tool_results(turn),
        settings=judges,
        boilerplate=(
            ERROR_ANSWER,
            BLOCKED_ANSWER,
            NO_SPECIALIST_ANSWER,
            REVIEW_FALLBACK_ANSWER,
            BACKEND_UNAVAILABLE_ANSWER,
        ),
        ask=judge_asker(turn.input.profile) if judges.get("llm_judge") else None,
    )


REVIEW_NOTE = (
    "[SYSTEM_NOTE: the supervisor's review found this part of the customer's request still open: {intent} "
    "({description}). {agent} answered the rest; answer this part.]"
)


async def supervisor_review(turn: Turn) -> None:
    """The review. With the profile's ``review_single_turns``, a single specialist's answer that leaves
    part of the request open is first sent on (:func:`_single_turn_review`); then an answer that failed the
    judges is replaced with a safe fallback (when the profile allows) — unless the turn already changed something
    (:func:`_side_effects`): then it stands, with a note in the customer's language. Not on a turn handed to a
    person."""
    if turn.escalate is not None:
        return
    single = await _single_turn_review(turn) if turn.input.profile.review_single_turns else None
    current = turn.input.snapshot or await sync_to_async(snapshots.current)()
    turn.review = review_decision(turn.judges, turn.input.profile.judges, side_effects=_side_effects(turn, current))
    if single is not None:
        turn.review["single_turn"] = single
    if turn.review.get("action") == REPLACE:
        turn.review["replaced_answer_chars"] = len(turn.answer)
        turn.answer = REVIEW_FALLBACK_ANSWER
    elif turn.review.get("action") == NOTE:
        language = turn.goal.decision.language if turn.goal is not None else detect_language(turn.sanitized_text)
        turn.answer = f"{turn.answer}\n\n{review_note(language)}"


def _side_effects(turn: Turn, current: Snapshot) -> list[str]:
    """The tools whose successful calls this turn may have changed something with (a message sent, an order placed:
    :attr:`routing.specs.ToolSpec.changes_things`), once each, in call order."""
    changed = [
        result.tool
        for result in turn.tool_results()
        if result.status == STATUS_OK and (tool := current.tools.get(result.tool)) is not None and tool.changes_things
    ]
    return list(dict.fromkeys(changed))


def _single_turn_reviewable(turn: Turn) -> bool:
    """A turn one specialist answered (router, hybrid, or a supervisor's one-specialist plan), not waiting for the
    user's permission, not a coordinator's, a goal's or the single-agent path's."""
    decision, outcome = turn.decision, turn.outcome
    return (
        decision is not None
        and not turn.blocked
        and not decision.is_plan
        and turn.goal is None
        and outcome is not None
        and not outcome.error
        and turn.pending_permission is None
        and not turn.input.single_agent
        and not delegation_active(turn.input.profile)
    )


async def _single_turn_review(turn: Turn) -> dict[str, Any] | None:
    """Send the open parts of a single specialist's turn on to the specialists whose intents cover them, at most
    :data:`MAX_REVIEW_ROUNDS` rounds, and merge the answers as a plan's are (then guard and judge the merged
    answer). What the review did goes to ``metadata.review.single_turn``, its rounds to ``metadata.review_rounds``,
    each part sent on to the handoffs as a supervisor's fan-out; ``None`` when the turn is not one to review."""
    if not _single_turn_reviewable(turn):
        return None
    assert turn.outcome is not None
    profile, answered_by = turn.input.profile, turn.agent
    source, more = _open_parts(turn, single_turn=True)
    first = Partial(answered_by, turn.final_intent, STATUS_OK, outcome=replace(turn.outcome, answer=turn.answer))

    def note(step: PlanStep) -> tuple[str, ...]:
        intent = profile.router.intents_by_name.get(step.intent)
        description = intent.description if intent else step.intent
        return (REVIEW_NOTE.format(intent=step.intent, description=description, agent=answered_by),)

    current = turn.input.snapshot or await sync_to_async(snapshots.current)()
    result = await review_loop(
        PlanResult(partials=[first]),
        run=_parts_runner(turn, current, note),
        uncovered=coverage_check([], more),
        max_rounds=MAX_REVIEW_ROUNDS,
    )
    if not result.rounds:
        return {"source": source, "open": []}
    turn.reviewed = PlanResult(partials=result.partials[1:], rounds=result.rounds)
    turn.answer, turn.consolidation = await consolidate(
        result, profile=profile, question=turn.sanitized_text, generation=turn.input.generation
    )
    await output_guardrails(turn)
    await judge(turn)
    return {
        "source": source,
        "open": [step for round_ in result.rounds for step in round_["uncovered"]],
        "parts": [partial.describe() for partial in turn.reviewed.partials],
    }


# An answer the assistants gave before a rule handed the conversation over stays, the customer's place after it.
ANSWER_KEPT = (EscalationReason.LOOP_STOP, EscalationReason.GOAL_FAILURE, EscalationReason.FALLBACKS)


async def escalation(turn: Turn) -> None:
    """Hand the conversation to a person when the routing or a specialist asked for one, or the profile's rules say
    so (:func:`conversations.escalation.escalation_after`): the escalation joins its team's queue with the turn, a
    ``human`` move records it, and the answer tells the customer their place in line, in their language."""
    profile, decision = turn.input.profile, turn.decision
    method = decision.method if decision is not None else ""
    turn.fallbacks_in_row = turn.fallbacks_in_row + 1 if method == "fallback" else 0
    people = profile.escalation
    ruled = people.on_guardrail_block or people.on_loop_stop or people.on_goal_failure or people.after_fallbacks
    if turn.escalate is None and people.enabled and ruled:
        turn.escalate = escalation_after(
            people,
            blocked=turn.blocked,
            moves=turn.all_moves(),
            goal_failed=turn.goal is not None and turn.goal.status == GOAL_FAILED,
            method=method,
            fallbacks_in_row=turn.fallbacks_in_row,
        )
    ask = turn.escalate
    if ask is None:
        return
    data = turn.input
    language = language_of(detect_language(turn.sanitized_text or data.text))
    answered_by = turn.agent if turn.runs or turn.goal is not None else ""
    kept = ask.reason in ANSWER_KEPT and turn.answer.strip()
    escalation = escalation_new(
        conversation_id=turn.conversation_pk,
        tenant_id=data.tenant_pk,
        profile_id=profile.pk,
        ask=ask,
        language=language,
        summary=summary_for_person(
            ask,
            intent=turn.final_intent or turn.active_intent,
            agent=answered_by or turn.active_agent,
            state=turn.state,
            history=[(entry.role, entry.content) for entry in turn.history],
            text=turn.sanitized_text,
            answer=turn.answer if kept else "",
        ),
        from_agent=answered_by if answered_by not in ("", PERSON) else turn.active_agent or profile.fallback_agent,
        intent=turn.final_intent or turn.active_intent,
        desk=profile.escalation.desk,
    )
    position = 1 + await sync_to_async(_queue_ahead)(escalation)
    turn.escalation, turn.escalation_position = escalation, position
    words = notice("queued", language, position=position)
    turn.answer = f"{turn.answer.strip()}\n\n{words}" if kept else words
    if not kept:
        turn.agent = PERSON
    turn.person_move = person_move(escalation)
    await _moves_out(turn, [turn.person_move])
    await emit_safely(data.emit, "escalation", escalation_public(escalation, position=position))


def _queue_ahead(escalation: Escalation) -> int:
    try:
        return queue_ahead(
            tenant_id=escalation.tenant_id,
            profile_id=escalation.profile_id,
            team=escalation.team,
            priority=escalation.priority,
        )
    finally:
        if not connection.in_atomic_block:
            connection.close()


def held_decision(held: Escalation, *, intent: str) -> RouteDecision:
    """The route decision of a message to a conversation a person holds under ``held``: it goes to the desk (method
    ``human``), the conversation staying where it was (``intent``: its active intent)."""
    who = f"{held.person} answers" if held.status == EscalationStatus.ASSIGNED else f"it waits in {held.team}'s queue"
    return RouteDecision(
        route=PERSON,
        agent=PERSON,
        intent=intent,
        confidence=1.0,
        reason=f"A person holds the conversation ({who}): the message goes to the desk.",
        method="human",
        metadata={"escalation": str(held.pk)},
        keeps_conversation=True,
    )


async def person(turn: Turn) -> None:
    """A person holds the conversation: the message is stored and goes to the desk, no assistant answers it. While
    it waits in line the customer is told their place; once a person has it, nothing is answered now (the person
    writes on the desk, and the reply reaches the customer's socket or stream, and the sessions API)."""
    held = turn.held
    assert held is not None
    if turn.blocked:
        turn.answer = BLOCKED_ANSWER
        return
    turn.agent = PERSON
    turn.final_intent = turn.active_intent
    turn.next_state = turn.state
    turn.decision = held_decision(held, intent=turn.active_intent)
    if held.status == EscalationStatus.QUEUED:
        language = language_of(detect_language(turn.sanitized_text), fallback=held.language)
        turn.answer = notice("waiting", language, position=turn.escalation_position)
    else:
        turn.answer, turn.answered = "", False
    await emit_safely(turn.input.emit, "escalation", escalation_public(held, position=turn.escalation_position))


def _answer_as_asked(turn: Turn) -> None:
    """The answer written as the client asked (:mod:`agents.generation`), whoever wrote it: in its format (unless
    the model that wrote it was cut by max_tokens: a cut JSON stays cut, as a model's would), ended at its first stop
    sequence, within max_tokens; a cut (or the model's own) is recorded as the ``max_tokens`` limit."""
    asked = turn.input.generation
    if asked is None or not turn.answered:
        return
    cut_by_model = turn.outcome is not None and turn.outcome.finish_reason == FINISH_LENGTH
    answer = turn.answer
    if asked.response_format is not None and not cut_by_model:
        answer = answer_formatted(answer, asked.response_format)
    answer, finish = text_within(answer, max_tokens=asked.max_tokens, stop=asked.stop)
    if finish == FINISH_LENGTH or cut_by_model:
        tokens = text_tokens(answer)
        turn.limits.append(
            limit_hit(LIMIT_MAX_TOKENS, "max_tokens", asked.max_tokens or tokens, text_tokens(turn.answer), tokens)
        )
    turn.answer = answer


async def persist(turn: Turn) -> None:
    _answer_as_asked(turn)
    turn.conversation_pk = await sync_to_async(_persist)(turn)
    turn_events_publish(turn)


def turn_events_publish(turn: Turn) -> None:
    """The persisted turn's events (common.infra.bus, delivered off the request path): each completed move, then
    ``agent.completed``. Names and figures only, no customer text."""
    data = turn.input
    where = {"tenant": data.tenant_slug, "profile": data.profile.agent_id, "conversation_key": data.conversation_key}
    for move in turn.all_moves():
        if move.status == HandoffStatus.COMPLETED:
            moved = {"from_agent": move.from_agent, "to_agent": move.to_agent, "kind": str(move.kind)}
            publish_event("handoff.completed", {**moved, "outcome": move.outcome}, **where)
    decision = turn.decision
    completed = {
        "agent": turn.agent,
        "intent": decision.intent if decision else "",
        "method": decision.method if decision else "",
        "mode": turn.mode,
        "latency_ms": round(sum(node["ms"] for node in turn.trace), 3),
        "message_id": turn.answer_message_id,
    }
    publish_event("agent.completed", completed, **where)


NODES: tuple[tuple[str, Node], ...] = (
    ("input_guardrails", input_guardrails),
    ("routing_decision", routing_decision),
    ("specialist", specialist),
    ("output_guardrails", output_guardrails),
    ("judge", judge),
    ("supervisor_review", supervisor_review),
    ("escalation", escalation),
    ("persist", persist),
)
# A message of a conversation a person holds.
HELD_NODES: tuple[tuple[str, Node], ...] = (
    ("input_guardrails", input_guardrails),
    ("person", person),
    ("persist", persist),
)


# --- database edges --------------------------------------------------------------


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
    """The user id the store keeps: a keyed pseudonym when the client's id is personal data (an e-mail, phone,
    CPF; the OpenAI ``user`` field too), else the id itself (:func:`conversations.guardrails.identifier_pseudonym`)."""
    return identifier_pseudonym(data.user_id, key=settings.SECRET_KEY) if data.user_id else ""


def _start(turn: Turn) -> bool:
    """Take the message's ticket; when no earlier message is being answered, read the conversation at once
    (one trip to the database thread, one connection). ``False`` when the turn must wait for its ticket. A ticket
    taken for a conversation that could not be read is handed on before the error goes up."""
    data = turn.input
    try:
        turn.conversation_pk, turn.ticket, state = ordering.ticket_take(
            conversation_key=data.conversation_key,
            defaults=conversation_defaults(data),
            and_read=history_read(
                conversation=ordering.conversation_table(), limit=settings.CONVERSATION_HISTORY_LIMIT
            ),
        )
        if state is not None:
            try:
                _load_conversation(turn, state)
            except BaseException:
                ordering.ticket_release(conversation_pk=turn.conversation_pk, ticket=turn.ticket)
                raise
        turn.ready = state is not None
        return turn.ready
    finally:
        if not connection.in_atomic_block:
            connection.close()


def _load_conversation(turn: Turn, state: dict[str, Any] | None) -> None:
    """Read the conversation's state (unless the ticket brought it) and recent history; give the connection back.

    The model call that follows takes seconds; a connection held across it (this
    request thread's, opened by authentication) would make every chat in flight
    hold one, and 200 of them exceed PostgreSQL's connections. Closed, it goes
    back to the pool (``DATABASE_POOL``) and ``_persist`` takes one again. Inside
    an atomic block (a test's transaction) the connection is left alone.
    """
    try:
        if state is None:
            state = Conversation.objects.filter(pk=turn.conversation_pk).values(*ordering.STATE_COLUMNS).first()
            if state is None:
                return
        turn.state = state["state"]
        turn.active_agent = state["active_specialist"]
        turn.active_intent = state["active_intent"]
        turn.sub_conversation = state["sub_conversation"]
        turn.pending_result = state["pending_result"]
        turn.pending_permission = state["pending_permission"]
        turn.granted = list(state["granted_permissions"] or [])
        turn.goal_state = state["goal_state"]
        turn.stored_cohort = state["cohort"]
        turn.handoff_kinds = state["handoff_kinds"]
        turn.conversation_created_at = state["created_at"]
        turn.fallbacks_in_row = turn.fallbacks_before = state["fallbacks_in_row"]
        turn.outcome_was = state["outcome"]
        if state["escalation_id"] is not None:  # a person holds the conversation (one read, only then)
            _held_load(turn, state["escalation_id"])
        _rollout_serve(turn)
        if ordering.READ in state:  # the ticket's statement brought it
            turn.history = history_parse(state[ordering.READ])
        else:
            turn.history = conversation_history(
                turn.conversation_pk, ended_at=state["ended_at"], limit=settings.CONVERSATION_HISTORY_LIMIT
            )
    finally:
        if not connection.in_atomic_block:
            connection.close()


def _held_load(turn: Turn, escalation_id: Any) -> None:
    """The escalation a person holds the conversation under, and its place in line while it waits."""
    held = Escalation.objects.filter(pk=escalation_id, status__in=ESCALATION_OPEN).first()
    if held is not None:
        turn.held = held
        turn.escalation_position = queue_position(held)


def _cohort_keep(turn: Turn) -> None:
    """The multi_agent flag's cohort is the conversation's for its lifetime: when a later percentage (a rollout
    plan's next stage, an edit) would bucket this message into the other cohort, the conversation keeps the one
    it started in. Overrides and the kill switch still decide at once: they are a person's or a rollback's."""
    data = turn.input
    flag = data.flags.get(MULTI_AGENT_FLAG) or {}
    kept = turn.stored_cohort
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


def _rollout_serve(turn: Turn) -> None:
    """While a rollout plan of the profile's version runs, the candidate version serves the conversations its
    bucket and start put in the candidate cohort (routing.rollout_plans); the rest keep the live version. Only
    customers' turns on the live version: an editor trying the draft keeps the draft."""
    _cohort_keep(turn)
    data = turn.input
    current = data.snapshot or snapshots.current()
    rollout = current.rollouts.get(data.profile.agent_id)
    live = current.released.get(data.profile.agent_id)
    if rollout is None or live is None or data.profile.version != live:
        return
    candidate = rollout.serves_candidate(data.conversation_key, turn.conversation_created_at)
    turn.rollout = {"plan": rollout.plan_id, "cohort": "candidate" if candidate else "control"}
    if candidate:
        turn.input = replace(data, profile=rollout.candidate)
        if not data.single_agent:
            turn.mode = rollout.candidate.effective_mode


def _recent_paths(conversation_pk: int, window: int) -> list[tuple[str, str]]:
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


def _active_specialist(turn: Turn) -> str:
    if turn.agent == PERSON:  # handed to a person: the assistant that answered before stays the active one
        return turn.escalation.from_agent if turn.escalation is not None else turn.active_agent
    profile = turn.input.profile
    if delegation_active(profile) and not turn.input.single_agent:
        return (turn.sub_conversation or {}).get("specialist") or profile.coordinator
    decision = turn.decision
    if decision is not None and decision.is_plan:
        return decision.agents[0]
    return turn.agent


def _response_bounded(turn: Turn, metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` cut so that the answer with it — the response every face returns, and the stored message —
    takes at most ``RESPONSE_MAX_BYTES`` of JSON: its longest strings (and lists) are cut with a marker
    (:func:`common.sizes.json_bounded`), and the cut is recorded in it."""
    envelope = {"answer": turn.answer, "agent": turn.agent, "conversation_key": turn.input.conversation_key}
    limit = settings.RESPONSE_MAX_BYTES
    budget = max(limit - json_size(envelope) - RESPONSE_RESERVE_BYTES, RESPONSE_RESERVE_BYTES)
    bounded, asked = json_bounded(metadata, budget)
    if not asked:
        return metadata
    if not isinstance(bounded, dict):  # not even its shape fits: what says what happened
        bounded = {key: metadata.get(key) for key in ("mode", "version", "route", "intent", "turn", "usage")}
        bounded["limits"] = list(metadata.get("limits") or [])
    hit = limit_hit(LIMIT_RESPONSE, "RESPONSE_MAX_BYTES", limit, asked + json_size(envelope), 0)
    bounded["limits"] = [*(bounded.get("limits") or []), hit]
    if isinstance(bounded.get("goal"), dict):
        bounded["goal"]["limits"] = bounded["limits"]
    hit["ran"] = json_size(bounded) + json_size(envelope)
    return bounded


def turn_record(turn: Turn) -> TurnRecord:
    """What the turn stores, as :mod:`conversations.records` defines it: personal data masked, results redacted,
    the answer with its metadata within ``RESPONSE_MAX_BYTES``."""
    data, vault = turn.input, turn.vault
    metadata = turn.metadata()
    usage = metadata["usage"]
    metadata = _response_bounded(turn, metadata)
    return TurnRecord(
        conversation_id=turn.conversation_pk,
        tenant_id=data.tenant_pk,
        profile_id=data.profile.pk,
        text=turn.text_to_store,
        answer=turn.answer,
        agent=turn.agent,
        mode=turn.mode,
        metadata=metadata,
        prompt_tokens=usage["prompt_tokens"],
        completion_tokens=usage["completion_tokens"],
        llm_model=usage["model"],
        other_models=other_models(usage),
        cohort=data.cohort,
        routing_version=data.profile.version,
        channel=data.channel,
        user_id=stored_user_id(data),
        latency_ms=round(sum(node["ms"] for node in turn.trace), 3),
        judge_score=(turn.judges.get("rule_based") or {}).get("score"),
        decision=turn.decision,
        notes=[(agent, vault.redact(note)) for agent, note in turn.stored_notes],
        parts=[
            PartRecord(
                agent=partial.agent,
                intent=partial.intent,
                status=partial.status,
                answer=vault.redact(partial.answer),
                error=partial.error,
                round=partial.round,
            )
            for partial in turn.supervised_parts()
        ],
        tool_calls=turn.mcp_results(),
        moves=turn.all_moves(),
        backend_calls=(turn.backend_reply,) if turn.backend_reply else (),
        answered=turn.answered,
        escalation=turn.escalation,
        goal=_goal_served(turn),
    )


def _goal_served(turn: Turn) -> str:
    """Goal mode: the goal the turn served (``domain.goal``), or the last one the conversation served."""
    if turn.goal is not None and turn.decision is not None and turn.decision.method == "goal":
        return turn.decision.intent
    last = (turn.goal_state or {}).get("last") if isinstance(turn.goal_state, dict) else None
    if isinstance(last, dict) and last.get("goal"):
        return f"{last.get('domain', '')}.{last['goal']}".strip(".")
    return ""


def _persist(turn: Turn) -> int:
    decision = turn.decision
    backends = turn.input.profile.backends
    backend = turn.agent if turn.agent in backends else ""
    was = turn.active_agent if turn.active_agent in backends else ""
    live = LiveState(
        active_backend=backend if decision is not None and backend != was else None,
        sub_conversation=turn.sub_conversation,
        pending_result=turn.pending_result,
        pending_permission=turn.pending_permission,
        granted_permissions=turn.granted,
        goal_state=turn.goal_state,
        # Small talk that moved nothing leaves the state, the active specialist and its intent as they were.
        routed=None
        if decision is None or (decision.keeps_conversation and not turn.moves)
        else (
            turn.next_state,
            _active_specialist(turn),
            decision.plan[0].intent if decision.plan else turn.final_intent,
        ),
        escalation_id=turn.escalation.pk if turn.escalation is not None else None,
        fallbacks_in_row=turn.fallbacks_in_row if turn.fallbacks_in_row != turn.fallbacks_before else None,
        outcome=_outcome_now(turn),
    )
    counted = CountedAs(
        cohort=turn.stored_cohort, handoff_kinds=turn.handoff_kinds, created_at=turn.conversation_created_at
    )
    record = turn_record(turn)
    rows = conversation_turn_record(record=record, live=live, counted=counted, ticket=turn.ticket)
    turn.stored_metadata = record.metadata
    turn.answer_message_id = rows.answer.pk if rows.answer is not None else None
    turn.user_message_id = rows.user_message.pk
    _desks_told(turn, rows.user_message)
    return turn.conversation_pk


def _outcome_now(turn: Turn) -> str | None:
    """The conversation's outcome column after the turn, ``None`` when it stays: ``escalated`` when the turn handed
    it to a person; open again (``""``) when the customer wrote to a conversation that had been closed as resolved or
    abandoned (or before outcomes were recorded). Escalated is final."""
    if turn.escalation is not None:
        return Outcome.ESCALATED
    if turn.outcome_was not in (OPEN, Outcome.ESCALATED):
        return OPEN
    return None


def _desks_told(turn: Turn, customer_message: Any) -> None:
    """The tenant's desks hear of the stored turn: a conversation that joined a queue, or the customer's message
    to a conversation a person holds (pushed now: this is the database thread, after the write)."""
    if turn.escalation is not None:
        escalation_opened(
            turn.escalation, conversation_key=turn.input.conversation_key, position=turn.escalation_position
        )
    elif turn.held is not None:
        public = message_public(customer_message)
        push_now(
            desk_group(turn.held.tenant_id),
            DESK_EVENT,
            {"kind": "message", "escalation": str(turn.held.pk), "message": public},
        )
        escalation_changed.send(sender=Escalation, escalation=turn.held, kind="customer_message", message=public)


def _turn_observe(turn: Turn) -> None:
    """The stored turn's figures (common/infra/metrics.py): profile, mode, routing method, latency and handoffs."""
    method = turn.decision.method if turn.decision is not None else ("blocked" if turn.blocked else "none")
    seconds = sum(node["ms"] for node in turn.trace) / 1000
    moves = ((move.kind, move.status) for move in turn.all_moves())
    metrics.turn_observe(turn.input.profile.agent_id, turn.mode, method, seconds, moves)


def _abandon_taken(start: asyncio.Future[bool], turn: Turn) -> None:
    """Give up the ticket a cancelled request took (if taking it succeeded)."""
    if not start.cancelled() and start.exception() is None:
        ordering.ticket_abandon(conversation_pk=turn.conversation_pk, ticket=turn.ticket)


# --- entry point -------------------------------------------------------------------


@dataclass(frozen=True)
class TurnResult:
    answer: str
    agent: str
    conversation_key: str
    metadata: dict[str, Any]
    message_id: int | None = None  # the stored answer: what POST /api/sessions/{key}/feedback rates

    def as_dict(self) -> dict[str, Any]:
        """The answer as every face returns it: the JSON routes' body, the SSE and WebSocket ``done`` event."""
        return {
            "answer": self.answer,
            "agent": self.agent,
            "conversation_key": self.conversation_key,
            "message_id": self.message_id,
            "metadata": self.metadata,
        }


def new_session_id() -> str:
    return uuid.uuid4().hex


# Turns whose client went away keep running to the end (and persist); these references keep their tasks alive.
_DETACHED: set[asyncio.Task[Any]] = set()


def turn_detach(work: Coroutine[Any, Any, T], *, context: contextvars.Context | None = None) -> asyncio.Task[T]:
    """Run ``work`` (a turn, or a face's wrapper around :func:`run_turn`) as a task of its own, which finishes and
    persists whatever happens to the client that asked: a streaming face awaits it (or shields it) and may go.
    ``context``: run it in that context instead of a copy of the caller's."""
    task = asyncio.create_task(work, context=context)
    _DETACHED.add(task)
    task.add_done_callback(_DETACHED.discard)
    return task


def turns_detached() -> int:
    """How many detached turns this process is running."""
    return len(_DETACHED)


async def turns_finished() -> None:
    """Wait for every detached turn of this process (tests, shutdown)."""
    while _DETACHED:
        await asyncio.gather(*list(_DETACHED), return_exceptions=True)


def _turn_new(data: TurnInput) -> Turn:
    mode = "single_agent" if data.single_agent else data.profile.effective_mode
    return Turn(input=data, mode=mode, context=dict(data.context))


def turn_begin(data: TurnInput) -> Turn:
    """A turn with its ticket taken and, when its turn has come, its conversation read (sync: on the database
    thread, one connection given back). For a face that has a trip to that thread to make anyway: it hands the
    turn to :func:`run_turn`, or, if it never will (its request was cancelled), to :func:`turn_abandon`."""
    turn = _turn_new(data)
    _start(turn)
    return turn


def turn_abandon(turn: Turn) -> None:
    """Hand on the ticket of a begun turn that will not run, as soon as its turn comes (from the background)."""
    ordering.ticket_abandon(conversation_pk=turn.conversation_pk, ticket=turn.ticket)


async def run_turn(data: TurnInput, *, begun: Turn | None = None) -> TurnResult:
    """Run one user message through the graph and persist it; never raises for model failures. ``begun``: the
    turn :func:`turn_begin` started for ``data``. Traced as the ``turn`` span, the root of the message's spans."""
    if not tracing.tracing_on():
        return await _turn_run(data, begun)
    profile = data.profile
    with (
        tracing.turn_attributes(
            conversation_key=data.conversation_key, tenant=data.tenant_slug, profile=profile.agent_id
        ),
        tracing.span("turn", channel=data.channel, cohort=data.cohort or None, version=profile.version) as root,
    ):
        result = await _turn_run(data, begun)
        decision = result.metadata.get("route_decision") or {}
        tracing.annotate(
            root,
            mode=result.metadata.get("mode"),
            method=decision.get("method"),
            intent=decision.get("intent"),
            agent=result.agent,
        )
        return result


async def _turn_run(data: TurnInput, begun: Turn | None) -> TurnResult:
    if begun is None:
        turn = _turn_new(data)
        # The ticket is taken in a thread that a cancellation cannot stop: a request cancelled meanwhile gives
        # the ticket up once it has been taken (see conversations.ordering for who hands a ticket on).
        start = asyncio.ensure_future(sync_to_async(_start)(turn))
        try:
            ready = await asyncio.shield(start)
        except asyncio.CancelledError:
            start.add_done_callback(lambda task: _abandon_taken(task, turn))
            raise
    else:
        turn, ready = begun, begun.ready
    handed_on = False
    try:
        if not ready:
            waited = await ordering.ticket_wait(conversation_pk=turn.conversation_pk, ticket=turn.ticket)
            turn.trace.append({"node": "wait_for_previous_message", "ms": round(waited * 1000, 3)})
            await sync_to_async(_load_conversation)(turn, None)
        with usage_counting(turn.model_calls):
            for name, node in HELD_NODES if turn.held is not None else NODES:
                await _timed(turn, name, node)
        handed_on = True  # by the persisting transaction
        _turn_observe(turn)
    except asyncio.CancelledError:
        # The client went away while the turn waited or ran: awaiting anything more here could be cancelled
        # again, so the ticket is handed on from the background as soon as its turn comes.
        ordering.ticket_abandon(conversation_pk=turn.conversation_pk, ticket=turn.ticket)
        handed_on = True
        raise
    finally:
        if not handed_on:
            await sync_to_async(ordering.ticket_release)(conversation_pk=turn.conversation_pk, ticket=turn.ticket)
    return TurnResult(
        answer=turn.answer,
        agent=turn.agent,
        conversation_key=data.conversation_key,
        # Built once, for the stored answer; its trace is the turn's own list, which has persist's time since.
        metadata=turn.stored_metadata if turn.stored_metadata is not None else turn.metadata(),
        message_id=turn.answer_message_id,
    )
