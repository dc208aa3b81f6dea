"""The specialist chain: who answers a turn, and how the conversation moves between specialists within it.

:func:`chain_run` runs specialists until one answers; each control tool a specialist calls (a handoff, a delegation,
the end of a delegated sub-conversation, a request for a person) has its handler in :data:`MOVES`, checked by loop
safety (:mod:`handoffs.safety`) and recorded as a move. :func:`remote_answer` lets a remote backend answer instead
(:mod:`conversations.gateway`), and :func:`supervisor_run` runs a supervisor plan's parts on the fan-out
(:mod:`conversations.supervisor`). The graph's ``specialist`` node (:mod:`conversations.graph`) chooses among them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.translation import gettext_lazy

from agents.public import llm_configured, result_summary
from common.events import Emit, emit_safely
from common.i18n import say
from common.infra import tracing
from conversations.escalation import specialist_asked
from conversations.fanout import executor_for
from conversations.gateway import GatewayMessage, backend_call
from conversations.guardrails import StreamMasker
from conversations.memory.stage import memory_notes
from conversations.permissions import permission_context
from conversations.runtime import (
    STATUS_PERMISSION_REQUIRED,
    SpecialistOutcome,
    SpecialistRequest,
    specialist_run,
    tools_for_turn,
)
from conversations.stack_turn import repair_rest
from conversations.supervisor import (
    MAX_REVIEW_ROUNDS,
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
from conversations.turn import Turn
from conversations.turn_store import recent_paths, stored_user_id
from handoffs.models import HandoffKind, HandoffStatus
from handoffs.public import (
    END_SUB_CONVERSATION,
    REFUSED_NOT_ALLOWED,
    REQUEST_HANDOFF,
    REQUEST_HUMAN,
    REQUEST_SUB_CONVERSATION,
    STATUS_OUT_OF_SCOPE,
    STOP_STEP_LIMIT,
    ControlCall,
    ControlTool,
    Move,
    move_check,
    stop_summary,
)
from routing.public import COORDINATION_INTENT, FALLBACK_INTENT, IntentSpec, PlanStep, Snapshot, delegation_active

# In the conversation's language (common.i18n.say).
NO_SPECIALIST_ANSWER = gettext_lazy("No specialist is available for this profile right now.")
BACKEND_UNAVAILABLE_ANSWER = gettext_lazy(
    "The team that answers this could not be reached right now; please try again in a moment."
)


# The note with which a client's instructions reach the specialists (the OpenAI-compatible faces' system messages and
# ``instructions``): under the profile's policy and the specialist's prompt, never in their place.
INSTRUCTIONS_NOTE = (
    "[CLIENT_INSTRUCTIONS: the application that sent this message asks, for this answer only (your policy and role "
    "above still apply): {instructions}]"
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


def specialist_request(
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
        notes = (*notes, INSTRUCTIONS_NOTE.format(instructions=turn.guardrails.vault.mask(turn.input.instructions)))
    return SpecialistRequest(
        profile=profile,
        specialist=spec,
        text=turn.guardrails.sanitized_text,
        intent=intent_name,
        intent_description=profile.subject_line_in(intent, turn.language.code),
        history=turn.history,
        memory=memory_notes(turn, agent),
        context=turn.chain.context,
        model_context=turn.guardrails.vault.mask_value(turn.chain.context),
        tools=tools,
        servers=current.servers,
        unmask=turn.guardrails.vault.unmask,
        mask=turn.guardrails.vault.mask_value,
        control=control,
        notes=notes,
        step_limit=step_limit,
        granted=frozenset(turn.stack.granted),
        language=turn.language.code,
        emit=emit,
        reply_rest=reply_rest,
        generation=generation,
        tenant_pk=turn.input.tenant_pk,
        knowledge_held=profile.pk in current.knowledge,
        customer_identified=bool(turn.memory.user_id),
    )


async def remote_answer(turn: Turn, current: Snapshot) -> None:
    """A remote backend answers (conversations/gateway.py): its tokens stream through as a specialist's do. A hop
    that fails gets the profile's fallback specialist (told why), or a graceful sentence when it has none."""
    data, profile = turn.input, turn.input.profile
    backend = profile.backends[turn.agent]
    move = turn.backend.move
    event = {"agent": backend.name, "display_name": backend.display_name, "via": "backend"}
    await emit_safely(data.emit, "agent", event)
    masker = StreamMasker(turn.guardrails.vault, profile.guardrails)
    message = GatewayMessage(
        text=data.text.strip(),  # the remote deployment applies its own guardrails to what the user wrote
        conversation_key=data.conversation_key,
        from_profile=profile.agent_id,
        user_id=stored_user_id(data),
        context=turn.chain.context,
        handoff_summary=move.context_summary if move is not None else "",
        reason=turn.decision.reason if turn.decision else "",
        task_id=turn.backend.task if backend.name == turn.route.active_agent else "",
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
    turn.backend.reply = reply
    turn.backend.task = reply.waiting_task if reply.ok else ""
    if reply.ok:
        turn.answer = reply.answer
        return
    if move is not None:
        turn.backend.move = replace(move, status=HandoffStatus.STOPPED, outcome=f"backend_{reply.status}"[:32])
    await emit_safely(data.emit, "discard", {"agent": backend.name})
    if profile.fallback_agent not in profile.specialists:
        turn.agent, turn.answer = "", say(turn.language.code, BACKEND_UNAVAILABLE_ANSWER)
        return
    turn.agent, turn.route.final_intent = profile.fallback_agent, FALLBACK_INTENT
    turn.chain.notes.append(
        f"[SYSTEM_NOTE: {backend.display_name} could not answer ({reply.status}); answer as you can.]"
    )
    await chain_run(turn, current)


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
        sub = turn.stack.sub_conversation
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


async def chain_run(turn: Turn, current: Snapshot) -> None:
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
        intent=turn.route.final_intent,
        tools=tools,
        notes=tuple(turn.chain.notes),
        path=[turn.agent],
        reply_rest=turn.stack.reply.rest if turn.stack.reply else repair_rest(turn),
    )
    while True:
        moves_before = len(turn.chain.moves)
        step = await _step(turn, current, link)
        if step is None:
            turn.answer = say(turn.language.code, NO_SPECIALIST_ANSWER)
            return
        request, outcome = step
        if outcome.permission_needed is not None:
            # The specialist called a needs-permission tool without a grant: it asks, and the request waits.
            turn.answer = outcome.answer
            turn.stack.pending_permission = _waiting_request(turn, request, outcome.permission_needed.name)
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
    masker = StreamMasker(turn.guardrails.vault, profile.guardrails)
    request = specialist_request(
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
    turn.agent, turn.route.final_intent = agent, link.intent
    turn.chain.offered_tools = sorted({*turn.chain.offered_tools, *(tool.name for tool in request.tools)})
    event = {
        "agent": agent,
        "display_name": profile.display_name_in(request.specialist, turn.language.code),
        "via": link.via,
    }
    await emit_safely(turn.input.emit, "agent", event)
    outcome = await specialist_run(request)
    if rest := masker.flush():
        await emit_safely(turn.input.emit, "token", {"agent": agent, "text": rest})
    turn.chain.outcome = outcome
    turn.chain.runs.append((agent, outcome))
    link.used[agent] = link.used.get(agent, 0) + outcome.steps
    for refused in outcome.refused:
        kind = HandoffKind.DELEGATION if refused.name == REQUEST_SUB_CONVERSATION else HandoffKind.HANDOFF
        reason = refused.text("reason") or f"{refused.target or '(none)'} is not a target of {agent}."
        summary = refused.text("context_summary") or refused.text("initial_context")
        turn.chain.moves.append(
            Move(agent, refused.target, kind, HandoffStatus.REFUSED, reason, summary, outcome=REFUSED_NOT_ALLOWED)
        )
    if outcome.stopped == STOP_STEP_LIMIT:
        reason = f"{agent} used its {outcome.steps - 1} steps; it answered with what it had."
        turn.chain.moves.append(
            Move(agent, "", HandoffKind.HANDOFF, HandoffStatus.STOPPED, reason, outcome=STOP_STEP_LIMIT)
        )
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
    note = result_note(turn.stack.pending_result or {})
    turn.stack.pending_result = None
    turn.chain.stored_notes.append((coordinator, note))
    intent = turn.input.profile.router.intent_of(coordinator, turn.guardrails.sanitized_text)
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
    if turn.store.recent_paths is None:
        turn.store.recent_paths = await sync_to_async(recent_paths)(turn.store.conversation_pk, limits.window)
    stop = move_check(
        chain=link.path,
        target=target,
        moves_this_turn=sum(1 for m in turn.chain.moves if _counts_as_move(m)),
        recent_paths=turn.store.recent_paths
        + [(m.from_agent, m.to_agent) for m in turn.chain.moves if _counts_as_path(m)],
        steps_left=_steps_left(turn, target, link.used),
        max_handoffs=limits.max_handoffs_per_turn,
        block_ping_pong=limits.block_ping_pong,
        window=limits.window,
        max_repeats=limits.max_repeats,
    )
    if stop:
        turn.chain.moves.append(Move(agent, target, kind, HandoffStatus.STOPPED, reason, summary, outcome=stop))
        turn.answer = stop_summary(
            reason=stop, answer=outcome.answer, findings=_findings(turn), language=turn.language.code
        )
        return True
    turn.chain.moves.append(Move(agent, target, kind, HandoffStatus.COMPLETED, reason, summary))
    intent = turn.input.profile.router.intent_of(target, turn.guardrails.sanitized_text)
    turn.route.next_state = intent.next_state if intent else ""
    if kind == HandoffKind.DELEGATION:
        turn.stack.sub_conversation = {
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
    turn.escalation.ask = specialist_asked(turn.input.profile.escalation, link.agent, move.args)
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
    await moves_out(turn, turn.chain.moves[since:])


async def moves_out(turn: Turn, moves: list[Move]) -> None:
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
    sub = turn.stack.sub_conversation or {}
    coordinator = sub.get("coordinator") or turn.input.profile.coordinator
    result = {
        "specialist": agent,
        "status": move.status,
        "final_result": move.args.get("final_result"),
        "last_user_message": move.text("last_user_message") or turn.guardrails.sanitized_text,
        "message_to_coordinator": move.text("message_to_coordinator"),
    }
    turn.stack.sub_conversation = None
    turn.stack.pending_result = result
    turn.chain.moves.append(
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
        "context": permission_context(request.tools, turn.chain.context),
        "asked_at": time.time(),
    }


def parts_runner(turn: Turn, current: Snapshot, notes: Callable[[PlanStep], tuple[str, ...]] | None = None) -> Runner:
    """Runs a batch of steps as a supervisor's parts (the executor: in this process or Celery), each told
    ``notes(step)``; streaming clients see each part the moment it finishes."""

    async def run(batch: list[PlanStep], round_number: int) -> PlanResult:
        requests = {
            step.agent: specialist_request(
                turn, current, step.agent, step.intent, step.mcp_tools, notes=notes(step) if notes else (), part=True
            )
            for step in batch
        }
        offered = {tool.name for request in requests.values() if request for tool in request.tools}
        turn.chain.offered_tools = sorted({*turn.chain.offered_tools, *offered})
        return await executor_for().run(
            batch,
            requests,
            timeout=settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS,
            round_number=round_number,
            vault=turn.guardrails.vault,
            on_partial=report if turn.input.emit is not None else None,
        )

    async def report(partial: Partial) -> None:
        """A step finished: streaming clients see its part at once, before the others and the consolidation."""
        event = {"agent": partial.agent, "intent": partial.intent, "status": partial.status, "round": partial.round}
        await emit_safely(turn.input.emit, "partial", {**event, "answer": turn.guardrails.vault.redact(partial.answer)})

    return run


def parts_open(turn: Turn, *, single_turn: bool = False) -> tuple[str, CoverageCheck]:
    """What the review finds still open in the request, and how it finds it: the model's verdict (the history in
    its prompt) when one is configured; else, for a single-specialist turn, the keyword coverage rule (the
    conversation's active specialist answered the previous message); else (a plan offline) nothing beyond its
    failed parts."""
    profile, question, history = turn.input.profile, turn.guardrails.sanitized_text, turn.history

    async def by_model(result: PlanResult) -> list[PlanStep]:
        return await llm_uncovered(profile=profile, question=question, result=result, history=history)

    async def by_keywords(result: PlanResult) -> list[PlanStep]:
        return keyword_uncovered(
            profile=profile, question=question, result=result, history=history, also_answered=turn.route.active_agent
        )

    async def nothing(result: PlanResult) -> list[PlanStep]:
        return []

    if llm_configured(profile):
        return "model", by_model
    return ("keywords", by_keywords) if single_turn else ("failed_parts", nothing)


async def supervisor_run(turn: Turn, current: Snapshot, steps: list[PlanStep]) -> None:
    """Run the plan, then the review loop (uncovered parts go on to their specialists), then consolidate."""
    steps = list(steps)
    run = parts_runner(turn, current)
    for step in steps:
        spec = turn.input.profile.specialists.get(step.agent)
        name = turn.input.profile.display_name_in(spec, turn.language.code) if spec else step.agent
        await emit_safely(turn.input.emit, "agent", {"agent": step.agent, "display_name": name, "via": "supervisor"})
    result = await run(steps, 0)
    uncovered = coverage_check(steps, parts_open(turn)[1])
    turn.supervisor.plan_result = await review_loop(result, run=run, uncovered=uncovered, max_rounds=MAX_REVIEW_ROUNDS)
    # A part that stopped at a tool needing permission asked for it in its answer; the reply goes to that
    # specialist, as in router mode.
    for partial in turn.supervisor.plan_result.partials:
        results = partial.outcome.tool_results if partial.outcome else []
        waiting = next((r.tool for r in results if r.status == STATUS_PERMISSION_REQUIRED), None)
        planned = next((item for item in steps if item.agent == partial.agent), None)
        if waiting and planned is not None and turn.stack.pending_permission is None:
            request = specialist_request(turn, current, planned.agent, planned.intent, planned.mcp_tools)
            if request is not None:
                turn.stack.pending_permission = _waiting_request(turn, request, waiting)
    turn.answer, turn.supervisor.consolidation = await consolidate(
        turn.supervisor.plan_result,
        profile=turn.input.profile,
        question=turn.guardrails.sanitized_text,
        generation=turn.input.generation,
        language=turn.language.code,
    )
