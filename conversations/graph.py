"""The routing graph: one pass per user message.

``input_guardrails → routing_decision → <specialist> → output_guardrails → judge
→ supervisor_review → escalation → persist``

Each node is an async function over :class:`Turn` and is timed into
``turn.trace``. The graph reads configuration only from the compiled snapshot
and touches the database at the edges: a ticket that orders the
conversation's turns (:mod:`conversations.ordering`), one read of the
conversation's state, and one transaction that persists the whole turn. No
transaction or lock is held while a model is called.

The ``specialist`` node runs a chain (:mod:`conversations.chain`): the chosen specialist may hand the turn
to another (``request_handoff``), a coordinator may delegate it
(``request_specialist_sub_conversation``), a delegated specialist may give it
back (``end_specialist_sub_conversation``) — each move checked by loop safety
(:mod:`handoffs.safety`) and recorded in ``agent_handoffs``. The database edges are
:mod:`conversations.turn_store`'s.

Before the profile's routing, the turn's stages (:mod:`conversations.stages`) may claim the message — memory's
command, the reply to a permission question, a remote backend's question answered, goal mode — and they settle and
write their own rows around ``persist``.

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
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection
from django.utils.translation import gettext_lazy

from agents.public import (
    ERROR_ANSWER,
    FINISH_LENGTH,
    AttachmentScope,
    answer_fitted,
    answer_limit,
    attachments_for,
    json_answer,
    json_text,
    judge_asker,
    strings_mapped,
    strings_of,
    text_tokens,
    text_within,
    usage_counting,
)
from common.events import emit_safely
from common.i18n import language_known, say
from common.infra import tracing
from common.infra.bus import publish_event
from common.infra.crossing import on_the_request_thread
from common.sizes import limit_hit, text_cut
from conversations import ordering
from conversations.answer_limit import NOTE_GAP, answer_cut_recorded, answer_stream_bounded
from conversations.backend_turn import backend_move
from conversations.chain import (
    BACKEND_UNAVAILABLE_ANSWER,
    NO_SPECIALIST_ANSWER,
    chain_run,
    moves_out,
    parts_open,
    parts_runner,
    remote_answer,
    result_note,
    supervisor_run,
)
from conversations.chain_part import TurnChain
from conversations.desk.escalations import (
    escalation_new,
    escalation_public,
    person_move,
    queue_ahead,
)
from conversations.escalation import (
    FALLBACK_METHOD,
    escalation_after,
    escalation_asked,
    language_of,
    notice,
    summary_for_person,
)
from conversations.gateway import gateway_note
from conversations.goals.turn import GENERAL, goal_answer
from conversations.guardrails import (
    run_input_guardrails,
    run_output_guardrails,
)
from conversations.judges import NOTE, REPLACE, REVIEW_FALLBACK_ANSWER, judge_answer, review_decision, review_note
from conversations.language import language_decide
from conversations.models import (
    Escalation,
    EscalationReason,
    EscalationStatus,
)
from conversations.stack_turn import (
    answer_lines,
    delegation_kept,
    fixed_answer,
    frames_asked,
    stack_route,
    stack_state,
)
from conversations.stages import stages_claim, stages_settle, stages_stored
from conversations.supervisor import (
    MAX_REVIEW_ROUNDS,
    STATUS_OK,
    Partial,
    PlanResult,
    consolidate,
    coverage_check,
    review_loop,
)
from conversations.turn import (
    LIMIT_MAX_TOKENS,
    Turn,
    TurnInput,
    TurnResult,
)
from conversations.turn_store import (
    conversation_load,
    ticket_abandon_taken,
    turn_observe_metrics,
    turn_persist,
    turn_start,
)
from handoffs.models import PERSON, HandoffStatus
from handoffs.public import stop_summary
from routing.public import FAILURE as GOAL_FAILED
from routing.public import PlanStep, ProfileSpec, RouteDecision, Snapshot, delegation_active, snapshot_current

T = TypeVar("T")

BLOCKED_ANSWER = gettext_lazy("I can't help with this message; please rephrase it.")  # in the turn's language


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
        turn.guardrails.vault,
        default_max_input_chars=settings.MAX_INPUT_CHARS,
    )
    turn.guardrails.blocked = report.blocked
    turn.guardrails.sanitized_text = report.text_for_model
    turn.guardrails.text_to_store = report.text_to_store
    turn.guardrails.report["input"] = report.as_dict()
    earlier = (entry.content for entry in reversed(turn.history) if entry.role == "user")
    turn.language.code, turn.language.kept = language_decide(
        kept=turn.language.kept,
        channel=turn.input.language,
        text=turn.guardrails.sanitized_text,
        earlier=earlier,
        hint=turn.input.language_hint,
        own=turn.input.profile.language,
    )


async def routing_decision(turn: Turn) -> None:
    """The permission gate's reply first, then a remote backend's question's answer, then the profile's routing
    (coordinator or router/hybrid/supervisor)."""
    if turn.guardrails.blocked:
        return
    profile = turn.input.profile
    turn.decision = await stages_claim(turn)
    if turn.decision is None:
        turn.decision = await stack_route(turn)
        if turn.decision.method in ("coordinator", "sub_conversation"):
            turn.decision.handoff = False  # moves under a coordinator are delegations and returns
    if turn.stack.reply is None and turn.decision.method == "state" and "reply" in turn.decision.metadata:
        # What the router recorded, with what follows it.
        turn.stack.reply = profile.reply_words.read(turn.guardrails.sanitized_text)
    turn.agent = turn.decision.agent
    turn.route.final_intent = turn.decision.intent
    # Small talk keeps the conversation's state (a flow waiting for its reply still waits); anything else sets it —
    # with the stack, to the flow on top of it after the message.
    route = turn.route
    if turn.stack.step is not None:
        route.next_state = stack_state(turn)
    else:
        route.next_state = route.state if turn.decision.keeps_conversation else (turn.decision.next_state or "")
    decision = turn.decision
    turn.escalation.ask = escalation_asked(profile.escalation, decision, escalate_to=escalation_team(profile, decision))
    if turn.escalation.ask is not None:
        # A person answers: the assistant routed to never takes the conversation, and its state stays as it was.
        decision.handoff, decision.keeps_conversation = False, True
        decision.metadata["escalation"] = turn.escalation.ask.reason
        turn.route.next_state = turn.route.state
    if note := gateway_note(turn.input.context):  # another deployment's gateway handed the conversation here
        turn.chain.notes.append(note)
        turn.chain.stored_notes.append((turn.agent, note))
    if (
        decision.handoff
        and turn.escalation.ask is None
        and profile.backends
        and (turn.agent in profile.backends or turn.route.active_agent in profile.backends)
    ):
        await backend_move(turn)
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
        await moves_out(turn, turn.all_moves()[:1])
    coordinated = turn.decision.method == "coordinator" or (
        turn.decision.method == "small_talk" and turn.agent == profile.coordinator
    )
    if coordinated and turn.stack.pending_result and turn.escalation.ask is None:
        # A delegation's finished sub-conversation: its result reaches the coordinator once, with this message
        # (a greeting too).
        note = result_note(turn.stack.pending_result)
        turn.chain.notes.append(note)
        turn.chain.stored_notes.append((turn.agent, note))
        turn.stack.pending_result = None


def escalation_team(profile: ProfileSpec, decision: RouteDecision) -> str:
    """The team of people the decision's intent (or a plan's first such step) hands its conversations to; ``""``."""
    intents = profile.router.intents_by_name
    for name in (decision.intent, *(step.intent for step in decision.plan)):
        spec = intents.get(name)
        if spec is not None and spec.escalate_to:
            return spec.escalate_to
    return ""


async def specialist(turn: Turn) -> None:
    """The chosen specialist answers (and may hand over); for a supervisor plan, every planned one does. A cancel or a
    repeat is the platform's own answer; a flow a side question interrupted is resumed at the end of the answer."""
    answering = not turn.guardrails.blocked and turn.escalation.ask is None
    fixed = (fixed_answer(turn) or turn.memory.answer or None) if answering else None
    if fixed is not None:
        turn.agent, turn.answer = turn.decision.agent if turn.decision else turn.agent, fixed
        await emit_safely(turn.input.emit, "token", {"agent": turn.agent, "text": fixed})
        return
    await _answered(turn)
    if turn.escalation.ask is None and not turn.guardrails.blocked:
        delegation_kept(turn)
        frames_asked(turn)
        if lines := answer_lines(turn):
            turn.answer = f"{turn.answer.rstrip()}\n\n{lines}" if turn.answer.strip() else lines
            await emit_safely(turn.input.emit, "token", {"agent": turn.agent, "text": f"\n\n{lines}"})


async def _answered(turn: Turn) -> None:
    if turn.guardrails.blocked:
        turn.answer = say(turn.language.code, BLOCKED_ANSWER)
        return
    if turn.escalation.ask is not None:  # the routing handed the conversation to a person: the escalation node answers
        turn.agent = PERSON
        return
    decision = turn.decision
    current = turn.input.snapshot or await on_the_request_thread(snapshot_current)()
    if decision is not None and decision.is_plan:
        await supervisor_run(turn, current, decision.plan)
        return
    if turn.goal is not None and turn.goal.decision.status != GENERAL:
        await goal_answer(turn, current)
        return
    if turn.backend.move is not None and turn.backend.move.status == HandoffStatus.STOPPED:
        # Loop safety stopped a move to, from or between backends: the conversation stays where it was.
        turn.agent = turn.route.active_agent
        reason = turn.backend.move.outcome
        turn.answer = stop_summary(reason=reason, answer="", findings=[], language=turn.language.code)
        return
    if turn.agent in turn.input.profile.backends:
        await remote_answer(turn, current)
        return
    await chain_run(turn, current)


def _tool_results(turn: Turn) -> list[dict[str, Any]]:
    return [result.as_dict() for result in turn.tool_results()]


def _answer_bounded(turn: Turn) -> None:
    """The answer cut to ``ANSWER_MAX_CHARS`` with a marker (stored and returned cut), and the cut recorded."""
    limit = settings.ANSWER_MAX_CHARS
    if len(turn.answer) <= limit:
        return
    asked = len(turn.answer)
    turn.answer = text_cut(turn.answer, limit)
    turn.limits = answer_cut_recorded(turn.limits, limit=limit, asked=asked, ran=len(turn.answer))


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
        report = run_output_guardrails(turn.answer, turn.guardrails.vault, results, settings=options)
        turn.answer = report.answer
        turn.guardrails.report["output"] = report.as_dict()
        return
    reports: list[Any] = []

    def guarded(text: str) -> str:
        reports.append(run_output_guardrails(text, turn.guardrails.vault, results, settings=options))
        return reports[-1].answer

    changed = strings_mapped(value, guarded)
    if changed != value:
        turn.answer = json_text(changed)
    checks = reports or [run_output_guardrails("", turn.guardrails.vault, results, settings=options)]
    turn.guardrails.report["output"] = {
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
    if turn.escalation.ask is not None:
        return
    judges = turn.input.profile.judges
    is_json, value = _asked_json(turn)
    turn.supervisor.judges = await judge_answer(
        question=turn.guardrails.sanitized_text,
        answer="\n".join(strings_of(value)) if is_json else turn.answer,  # the words of a JSON answer, not its keys
        tool_results=_tool_results(turn),
        settings=judges,
        boilerplate=_boilerplate(language_known(turn.language.code)),
        ask=judge_asker(turn.input.profile) if judges.get("llm_judge") else None,
    )


@functools.cache  # a few languages; the catalogues are compiled once for the process
def _boilerplate(language: str) -> tuple[str, ...]:
    """The platform's canned answers in ``language``: never an answer to the judges."""
    answers = (ERROR_ANSWER, BLOCKED_ANSWER, NO_SPECIALIST_ANSWER, REVIEW_FALLBACK_ANSWER, BACKEND_UNAVAILABLE_ANSWER)
    return tuple(say(language, text) for text in answers)


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
    if turn.escalation.ask is not None:
        return
    single = await _single_turn_review(turn) if turn.input.profile.review_single_turns else None
    current = turn.input.snapshot or await on_the_request_thread(snapshot_current)()
    supervision = turn.supervisor
    supervision.review = review_decision(
        supervision.judges, turn.input.profile.judges, side_effects=_side_effects(turn, current)
    )
    if single is not None:
        supervision.review["single_turn"] = single
    if supervision.review.get("action") == REPLACE:
        supervision.review["replaced_answer_chars"] = len(turn.answer)
        turn.answer = say(turn.language.code, REVIEW_FALLBACK_ANSWER)
    elif supervision.review.get("action") == NOTE:
        answer_noted(turn, review_note(turn.language.code))


def answer_noted(turn: Turn, note: str) -> None:
    """The answer with ``note`` after it, within ``ANSWER_MAX_CHARS``: an answer that leaves the note no room is cut
    (its marker kept, the cut recorded as :func:`_answer_bounded` records one) so that the whole fits. What a stream
    sent of the answer is still its start (:func:`conversations.answer_limit.stream_room` leaves the note's room)."""
    limit = settings.ANSWER_MAX_CHARS
    tail = NOTE_GAP + note
    whole = len(turn.answer) + len(tail)
    if whole > limit:
        turn.answer = text_cut(turn.answer, max(limit - len(tail), 0))
        turn.limits = answer_cut_recorded(turn.limits, limit=limit, asked=whole, ran=len(turn.answer) + len(tail))
    turn.answer += tail


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
    decision, outcome = turn.decision, turn.chain.outcome
    return (
        decision is not None
        and not turn.guardrails.blocked
        and not decision.is_plan
        and turn.goal is None
        and outcome is not None
        and not outcome.error
        and turn.stack.pending_permission is None
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
    assert turn.chain.outcome is not None
    profile, answered_by = turn.input.profile, turn.agent
    source, more = parts_open(turn, single_turn=True)
    outcome = replace(turn.chain.outcome, answer=turn.answer)
    first = Partial(answered_by, turn.route.final_intent, STATUS_OK, outcome=outcome)

    def note(step: PlanStep) -> tuple[str, ...]:
        intent = profile.router.intents_by_name.get(step.intent)
        description = intent.description if intent else step.intent
        return (REVIEW_NOTE.format(intent=step.intent, description=description, agent=answered_by),)

    current = turn.input.snapshot or await on_the_request_thread(snapshot_current)()
    result = await review_loop(
        PlanResult(partials=[first]),
        run=parts_runner(turn, current, note),
        uncovered=coverage_check([], more),
        max_rounds=MAX_REVIEW_ROUNDS,
    )
    if not result.rounds:
        return {"source": source, "open": []}
    turn.supervisor.reviewed = PlanResult(partials=result.partials[1:], rounds=result.rounds)
    turn.answer, turn.supervisor.consolidation = await consolidate(
        result,
        profile=profile,
        question=turn.guardrails.sanitized_text,
        generation=turn.input.generation,
        language=turn.language.code,
    )
    await output_guardrails(turn)
    await judge(turn)
    return {
        "source": source,
        "open": [step for round_ in result.rounds for step in round_["uncovered"]],
        "parts": [partial.describe() for partial in turn.supervisor.reviewed.partials],
    }


# An answer the assistants gave before a rule handed the conversation over stays, the customer's place after it.
ANSWER_KEPT = (EscalationReason.LOOP_STOP, EscalationReason.GOAL_FAILURE, EscalationReason.FALLBACKS)


async def escalation(turn: Turn) -> None:
    """Hand the conversation to a person when the routing or a specialist asked for one, or the profile's rules say
    so (:func:`conversations.escalation.escalation_after`): the escalation joins its team's queue with the turn, a
    ``human`` move records it, and the answer tells the customer their place in line, in their language."""
    profile, decision = turn.input.profile, turn.decision
    # "I don't know" (conversations.knowledge_turn) counts as the fallback's answer.
    method: str = FALLBACK_METHOD if turn.knowledge_unknown() else (decision.method if decision is not None else "")
    turn.store.fallbacks_in_row = turn.store.fallbacks_in_row + 1 if method == FALLBACK_METHOD else 0
    people = profile.escalation
    ruled = people.on_guardrail_block or people.on_loop_stop or people.on_goal_failure or people.after_fallbacks
    if turn.escalation.ask is None and people.enabled and ruled:
        turn.escalation.ask = escalation_after(
            people,
            blocked=turn.guardrails.blocked,
            moves=turn.all_moves(),
            goal_failed=turn.goal is not None and turn.goal.status == GOAL_FAILED,
            method=method,
            fallbacks_in_row=turn.store.fallbacks_in_row,
        )
    ask = turn.escalation.ask
    if ask is None:
        return
    data = turn.input
    language = language_of(turn.language.code)
    answered_by = turn.agent if turn.chain.runs or turn.goal is not None else ""
    route = turn.route
    kept = ask.reason in ANSWER_KEPT and turn.answer.strip()
    escalation = escalation_new(
        conversation_id=turn.store.conversation_pk,
        tenant_id=data.tenant_pk,
        profile_id=profile.pk,
        ask=ask,
        language=language,
        summary=summary_for_person(
            ask,
            intent=turn.route.final_intent or turn.route.active_intent,
            agent=answered_by or turn.route.active_agent,
            state=turn.route.state,
            history=[(entry.role, entry.content) for entry in turn.history],
            text=turn.guardrails.sanitized_text,
            answer=turn.answer if kept else "",
        ),
        from_agent=answered_by if answered_by not in ("", PERSON) else route.active_agent or profile.fallback_agent,
        intent=route.final_intent or route.active_intent,
        desk=profile.escalation.desk,
    )
    position = 1 + await on_the_request_thread(_queue_ahead)(escalation)
    turn.escalation.opened, turn.escalation.position = escalation, position
    words = notice("queued", language, position=position)
    turn.answer = f"{turn.answer.strip()}\n\n{words}" if kept else words
    if not kept:
        turn.agent = PERSON
    turn.escalation.person_move = person_move(escalation)
    await moves_out(turn, [turn.escalation.person_move])
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
    held = turn.escalation.held
    assert held is not None
    if turn.guardrails.blocked:
        turn.answer = say(turn.language.code, BLOCKED_ANSWER)
        return
    turn.agent = PERSON
    turn.route.final_intent = turn.route.active_intent
    turn.route.next_state = turn.route.state
    turn.decision = held_decision(held, intent=turn.route.active_intent)
    if held.status == EscalationStatus.QUEUED:
        language = language_of(turn.language.code, fallback=held.language)
        turn.answer = notice("waiting", language, position=turn.escalation.position)
    else:
        turn.answer, turn.escalation.answered = "", False
    await emit_safely(turn.input.emit, "escalation", escalation_public(held, position=turn.escalation.position))


def _answer_as_asked(turn: Turn) -> None:
    """The answer written as the client asked (:mod:`agents.generation`), whoever wrote it: in its format (unless
    the model that wrote it was cut by max_tokens: a cut JSON stays cut, as a model's would), ended at its first stop
    sequence, within max_tokens; a cut (or the model's own) is recorded as the ``max_tokens`` limit, and its text cut
    to make room for the format's other values (here, or by the offline model that wrote it) as ``answer_chars``."""
    asked = turn.input.generation
    if asked is None or not turn.escalation.answered:
        return
    cut_by_model = turn.chain.outcome is not None and turn.chain.outcome.finish_reason == FINISH_LENGTH
    answer = turn.answer
    whole = 0
    if turn.chain.outcome is not None and turn.supervisor.review.get("action") != REPLACE:  # the model's answer stands
        whole = turn.chain.outcome.answer_chars_asked
    if asked.response_format is not None and not cut_by_model:
        answer, fitted_from = answer_fitted(answer, asked.response_format)
        whole = max(whole, fitted_from)
    if whole > len(answer):
        turn.limits = answer_cut_recorded(turn.limits, limit=answer_limit(), asked=whole, ran=len(answer))
    answer, finish = text_within(answer, max_tokens=asked.max_tokens, stop=asked.stop)
    if finish == FINISH_LENGTH or cut_by_model:
        tokens = text_tokens(answer)
        turn.limits.append(
            limit_hit(LIMIT_MAX_TOKENS, "max_tokens", asked.max_tokens or tokens, text_tokens(turn.answer), tokens)
        )
    turn.answer = answer


async def persist(turn: Turn) -> None:
    _answer_as_asked(turn)
    await stages_settle(turn)
    turn.store.conversation_pk = await on_the_request_thread(turn_persist)(turn, stored=stages_stored)
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
        "message_id": turn.store.answer_message_id,
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


# --- entry point -------------------------------------------------------------------


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
    # What the turn streams keeps to the answer's limit, as what it stores does (_answer_bounded).
    data = replace(data, emit=answer_stream_bounded(data.emit, settings.ANSWER_MAX_CHARS))
    return Turn(input=data, mode=mode, chain=TurnChain(context=dict(data.context)))


def turn_begin(data: TurnInput) -> Turn:
    """A turn with its ticket taken and, when its turn has come, its conversation read (sync: on the database
    thread, one connection given back). For a face that has a trip to that thread to make anyway: it hands the
    turn to :func:`run_turn`, or, if it never will (its request was cancelled), to :func:`turn_abandon`."""
    turn = _turn_new(data)
    turn_start(turn)
    return turn


def turn_abandon(turn: Turn) -> None:
    """Hand on the ticket of a begun turn that will not run, as soon as its turn comes (from the background)."""
    ordering.ticket_abandon(conversation_pk=turn.store.conversation_pk, ticket=turn.store.ticket)


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
        start = asyncio.ensure_future(on_the_request_thread(turn_start)(turn))
        try:
            ready = await asyncio.shield(start)
        except asyncio.CancelledError:
            start.add_done_callback(lambda task: ticket_abandon_taken(task, turn))
            raise
    else:
        turn, ready = begun, begun.store.ready
    handed_on = False
    try:
        if not ready:
            waited = await ordering.ticket_wait(conversation_pk=turn.store.conversation_pk, ticket=turn.store.ticket)
            turn.trace.append({"node": "wait_for_previous_message", "ms": round(waited * 1000, 3)})
            await on_the_request_thread(conversation_load)(turn, None)
        scope = AttachmentScope(tenant=data.tenant_pk, origin=data.origin)
        with usage_counting(turn.model_calls), attachments_for(scope):
            for name, node in HELD_NODES if turn.escalation.held is not None else NODES:
                await _timed(turn, name, node)
        handed_on = True  # by the persisting transaction
        turn_observe_metrics(turn)
    except asyncio.CancelledError:
        # The client went away while the turn waited or ran: awaiting anything more here could be cancelled
        # again, so the ticket is handed on from the background as soon as its turn comes.
        ordering.ticket_abandon(conversation_pk=turn.store.conversation_pk, ticket=turn.store.ticket)
        handed_on = True
        raise
    finally:
        if not handed_on:
            store = turn.store
            await on_the_request_thread(ordering.ticket_release)(
                conversation_pk=store.conversation_pk, ticket=store.ticket
            )
    return turn.result()
