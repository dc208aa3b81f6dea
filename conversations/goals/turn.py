"""Goal mode inside the routing graph (docs/goals.md): the decision node's goal reading and the plan as the answer.

A goal-mode profile's message goes through the same graph as any other — input guardrails, the decision,
the answer, output guardrails, judges, review, persist — with two nodes doing goal work:

* :func:`goal_routing` (in ``routing_decision``): :func:`routing.goals.decide.goal_decide` reads the goal and
  entities, completes them from the conversation's goal state and gates them. A message no goal covers
  (domain ``general``) is routed to the profile's specialists as in router mode, handoffs and all;
* :func:`goal_answer` (in ``specialist``): the plan runs over MCP (:mod:`conversations.goals.engine`), its
  outputs are combined and the profile's model writes the answer; a clarification's question is the answer.

What happened is ``metadata.goal`` (:meth:`GoalTurn.metadata`; ``reading`` says how the goal was read — by the
hints, a follow-up, the goals' examples with their scores and nearest examples, the model; ``limits`` the
platform's limits that bit) and, for streaming clients, the ``goal`` and ``plan_step`` events. Why a plan could
not be made or run stays there (``reason``, the outputs' metadata) and in the log: the customer reads
:data:`FAILED_PLAN_ANSWER`.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from common.events import emit_safely
from conversations.goals.engine import answer_write, outputs_combine, plan_execute
from conversations.goals.part import GoalTurn
from conversations.knowledge_turn import asked_before, knowledge_answers
from conversations.turn import Turn
from routing.public import (
    CANCEL,
    CLARIFICATION,
    CLARIFICATION_FRAME,
    CORRECT,
    FAILURE,
    GENERAL,
    LOW_CONFIDENCE,
    MESSAGES,
    MISSING_ENTITY,
    PLAN,
    REPAIR_INTENT,
    REPEAT,
    SKIP,
    SMALL_TALK,
    Frame,
    GoalDecision,
    Repair,
    RouteDecision,
    Snapshot,
    StackStep,
    after_phrases,
    ambiguity_pending,
    candidate_choose,
    goal_decide,
    route_decide,
    said,
    snapshot_current,
)

logger = logging.getLogger(__name__)

GOAL_ROUTE = "goal"
GOAL_AGENT = "goal_planner"  # the answer's author in goal mode: the plan, written up by the profile's model
DOCUMENTS_ANSWER = (
    "The goal lacks an entity or is unsure of its reading, and the profile's documents answer the message: its "
    "specialists answer."
)
# What a goal asks the customer before it acts that a question the documents answer is left to the specialists for:
# an entity it lacks, or a reading below its threshold ("como são calculadas as maiores altas?" read as the movers).
DOCUMENTS_FIRST = (MISSING_ENTITY, LOW_CONFIDENCE)
# The answer when a plan cannot be made or is refused before it runs, said in the turn's language.
FAILED_PLAN_ANSWER = MESSAGES["failed_plan"]


async def goal_claim(turn: Turn) -> RouteDecision | None:
    """Goal mode's claim of the routing (:mod:`conversations.stages`): every message of a goal-mode profile."""
    return await goal_routing(turn) if turn.mode == "goal" else None


async def goal_routing(turn: Turn) -> RouteDecision:
    """The decision for a goal-mode message; sets ``turn.goal`` and the goal state the conversation keeps."""
    profile = turn.input.profile
    pending = (turn.stack.goal_state or {}).get("pending")
    waiting: dict[str, Any] = pending if isinstance(pending, dict) else {}
    repair = profile.repair_words.read(turn.guardrails.sanitized_text) if waiting else None
    asked_yes_or_no = waiting.get("reason") == LOW_CONFIDENCE
    if asked_yes_or_no and profile.reply_words.read_past_fillers(turn.guardrails.sanitized_text).reads_as is not None:
        repair = None  # "is this what you want?" answered no: the goal's own answer to a no (it asks what instead)
    if waiting and repair is not None and repair.pattern == CANCEL:
        return clarification_cancelled(turn, waiting, repair)
    if repair is not None and repair.pattern in (REPEAT, SKIP):
        return question_repeated(turn, waiting, repair)
    said = turn.guardrails.sanitized_text
    correction = profile.repair_words.read(said) if not waiting else None
    if correction is not None and correction.pattern == CORRECT:
        said = after_phrases(said, profile.repair_words.correct)  # "errei, eu queria dizer VALE3": "VALE3"
    if not said:
        correction, said = (
            None,
            turn.guardrails.sanitized_text,
        )  # nothing follows the apology: the message is read whole
    decision = await goal_decide(
        profile=profile, text=said, goal_state=turn.stack.goal_state, language=turn.language.code
    )
    if not waiting and await _documents_answer(turn, decision):
        kept = turn.stack.goal_state
        decision = replace(decision, status=GENERAL, goal_state=kept, clarification=None, reason=DOCUMENTS_ANSWER)
    turn.goal = GoalTurn(decision)
    turn.stack.goal_state = decision.goal_state
    resumed = bool(waiting) and (decision.goal_state or {}).get("pending") == waiting and not _small_talk(decision)
    read = decision.intent_output
    await emit_safely(turn.input.emit, "goal", {"phase": "decided", **_public(decision)})
    if decision.status == GENERAL:
        routed = await route_decide(
            profile=profile,
            text=turn.guardrails.sanitized_text,
            state=turn.route.state or None,
            active_agent=turn.route.active_agent,
            active_intent=turn.route.active_intent,
        )
        routed.metadata["goal"] = {"status": GENERAL, "intent_output": read.as_dict(), "reading": dict(read.reading)}
        if resumed:  # a side question for the specialists; out of scope, it moves no frame
            turn.stack.step = clarification_resumed(
                waiting, decision, turn=turn.store.ticket + 1, moved=routed.method != "fallback"
            )
        return routed
    if resumed:
        turn.stack.step = clarification_resumed(waiting, decision, turn=turn.store.ticket + 1, moved=True)
    elif correction is not None and correction.pattern == CORRECT:
        turn.stack.step = StackStep(frames=[], turn=turn.store.ticket + 1, now=timezone.now(), repair=correction)
    elif waiting and not (decision.goal_state or {}).get("pending") and decision.status != CLARIFICATION:
        frame = _clarification_frame(waiting, turn=turn.store.ticket + 1)
        turn.stack.step = StackStep(frames=[], turn=turn.store.ticket + 1, now=timezone.now())
        turn.stack.step.event("bound", frame, "reply")
        turn.stack.step.event("closed", frame, "reply")
    tools = [
        spec.tool_name
        for step in (decision.plan.steps if decision.plan else ())
        if (spec := profile.goals.capabilities.get(step.capability)) is not None
    ]
    previous = turn.route.active_agent
    return RouteDecision(
        route=GOAL_ROUTE,
        agent=GOAL_AGENT,
        intent=f"{read.primary_domain}.{read.goal}",
        confidence=read.confidence,
        reason=decision.reason,
        method="goal",
        handoff=bool(previous) and previous != GOAL_AGENT,
        domain=read.primary_domain,
        mcp_tools=sorted(set(tools)),
        metadata={"goal_status": decision.status, "reading": dict(read.reading)},
    )


async def _documents_answer(turn: Turn, decision: GoalDecision) -> bool:
    """Whether a goal that would ask the customer before it acts (an entity it lacks, a reading below its threshold:
    :data:`DOCUMENTS_FIRST`) leaves the message to the profile's specialists instead, because the profile's documents
    answer it (:func:`conversations.knowledge_turn.knowledge_answers`, a follow-up with its thread, as the specialists
    search it): "as cotações que vocês mostram têm atraso?" reads as a quote without its stock, and the help centre
    says how late they are; so does "e o preço?" after it."""
    if decision.status != CLARIFICATION or (decision.clarification or {}).get("reason") not in DOCUMENTS_FIRST:
        return False
    current = turn.input.snapshot or await sync_to_async(snapshot_current)()
    profile = turn.input.profile
    return await knowledge_answers(
        profile=profile,
        held=profile.pk in current.knowledge,
        tenant_pk=turn.input.tenant_pk,
        text=turn.guardrails.sanitized_text,
        language=turn.language.code,
        # A follow-up of the specialists' answer is searched with its thread, as they search it; one of a goal's
        # answer is the goal's, which its state completes ("e o preço?" after the day's movers is no article's).
        earlier=asked_before(turn.history) if turn.route.active_agent != GOAL_AGENT else (),
    )


def _small_talk(decision: GoalDecision) -> bool:
    return decision.intent_output.reading.get("method") == SMALL_TALK


def clarification_resumed(waiting: dict[str, Any], decision: GoalDecision, *, turn: int, moved: bool) -> StackStep:
    """A side question while a goal waits for its clarification: the goal's frame, pushed under the side question
    and resumed after its answer with the question asked again."""
    frame = _clarification_frame(waiting, turn=turn)
    step = StackStep(frames=[frame], turn=turn, now=timezone.now(), resume=frame)
    if moved:
        by = decision.intent_output.goal or decision.status
        step.event("pushed", frame, by)
        step.event("resumed", frame, by)
    return step


def question_repeated(turn: Turn, waiting: dict[str, Any], repair: Repair) -> RouteDecision:
    """ "Pode repetir?" while a goal waits: its question again (the last answer), nothing read or run. A skip ("pula
    essa") gets the question again too, with why: a goal asks only what it cannot go on without (a required entity,
    which of several it means, whether it read the request right), so no question of a goal is passed."""
    frames = [_clarification_frame(waiting, turn=turn.store.ticket + 1)] if waiting else []
    pattern = repair.pattern
    turn.stack.step = StackStep(
        frames=frames, turn=turn.store.ticket + 1, now=timezone.now(), repair=repair, fixed=pattern
    )
    return RouteDecision(
        route=GOAL_ROUTE,
        agent=GOAL_AGENT,
        intent=REPAIR_INTENT.format(pattern=pattern),
        confidence=1.0,
        reason="The customer asked to hear the question again."
        if pattern == REPEAT
        else "The customer would skip a question the goal cannot go on without: asked again.",
        method="repair",
        metadata={"repair": repair.as_metadata()},
        keeps_conversation=True,
    )


def clarification_cancelled(turn: Turn, waiting: dict[str, Any], repair: Repair) -> RouteDecision:
    """A cancel while a goal waits for its clarification: the goal is dropped, nothing runs, the platform answers."""
    frame = _clarification_frame(waiting, turn=turn.store.ticket + 1)
    step = StackStep(
        frames=[], turn=turn.store.ticket + 1, now=timezone.now(), repair=repair, fixed=CANCEL, cancelled=frame
    )
    step.event("cancelled", frame, CANCEL)
    turn.stack.step = step
    turn.stack.goal_state = {**(turn.stack.goal_state or {}), "pending": None}
    return RouteDecision(
        route=GOAL_ROUTE,
        agent=GOAL_AGENT,
        intent=REPAIR_INTENT.format(pattern=CANCEL),
        confidence=1.0,
        reason=f"The customer dropped the goal waiting for an answer ({frame.name}).",
        method="repair",
        metadata={"repair": repair.as_metadata()},
    )


async def _chosen_in_the_reply(turn: Turn, clarification: dict[str, Any]) -> GoalDecision | None:
    """The goal planned with the option the message picks ("a segunda", "Helsinki") when the message answered the
    goal's question (its frame was bound); ``None`` when it did not, or picks none."""
    step = turn.stack.step
    if step is None or not any(event["event"] == "bound" for event in step.events):
        return None
    picked = candidate_choose(
        turn.guardrails.sanitized_text,
        clarification.get("candidates") or [],
        label_fields=tuple(clarification.get("label_fields") or ("label",)),
        value_field=str(clarification.get("value_field") or "value"),
    )
    if picked is None:
        return None
    decided = await goal_decide(
        profile=turn.input.profile, text=turn.guardrails.sanitized_text, goal_state=turn.stack.goal_state
    )
    return decided if decided.status == PLAN else None


def _clarification_frame(waiting: dict[str, Any], *, turn: int) -> Frame:
    intent = waiting.get("intent_output") or {}
    return Frame(
        kind=CLARIFICATION_FRAME,
        name=f"{intent.get('primary_domain', '')}.{intent.get('goal', '')}".strip("."),
        agent=GOAL_AGENT,
        intent=str(intent.get("goal", "")),
        opened_turn=turn - 1,
        question=str((waiting.get("clarification") or {}).get("question", "")),
    )


def _public(decision: GoalDecision) -> dict[str, Any]:
    shown = decision.as_dict()
    return {key: shown[key] for key in ("status", "intent_output", "plan", "clarification")}


async def goal_answer(turn: Turn, current: Snapshot, *, replied: bool = True) -> None:
    """Run the plan (or ask), combine its outputs and write the answer. A reply to the goal's question that also
    picks among the options its answer leads to ("da Nordea, a segunda") is not asked which (``replied``: look for
    such a pick, once)."""
    goal = turn.goal
    assert goal is not None and goal.decision.status != GENERAL
    decision = goal.decision
    if decision.status == CLARIFICATION:
        turn.answer = str((decision.clarification or {}).get("question", ""))
        return
    language = decision.language
    if decision.status == FAILURE or decision.plan is None:
        logger.info("A goal plan could not be made: %s", decision.reason)
        turn.answer = said("failed_plan", language)
        return
    turn.chain.offered_tools = sorted({*turn.chain.offered_tools, *(turn.decision.mcp_tools if turn.decision else [])})

    async def on_event(event: str, data: dict[str, Any]) -> None:
        await emit_safely(turn.input.emit, event, turn.guardrails.vault.redact(data))

    goal.run = await plan_execute(
        decision.plan, turn.input.profile.goals, current, on_event=on_event, language=language
    )
    if goal.run.error:
        logger.info("A goal plan was refused before it ran: %s", goal.run.error)
        turn.answer = said("failed_plan", language)
        return
    if goal.run.status == CLARIFICATION and goal.run.clarification:
        turn.stack.goal_state = ambiguity_pending(decision, goal.run.clarification)
        chosen = await _chosen_in_the_reply(turn, goal.run.clarification) if replied else None
        if chosen is not None:
            turn.goal, turn.stack.goal_state = GoalTurn(chosen), chosen.goal_state
            await goal_answer(turn, current, replied=False)
            return
        turn.answer = str(goal.run.clarification.get("question", ""))
        return
    goal.combined = outputs_combine(decision.plan, goal.run.outputs, language)
    turn.answer, goal.writing = await answer_write(
        turn.input.profile, turn.guardrails.sanitized_text, goal.combined, language
    )
    await emit_safely(turn.input.emit, "goal", {"phase": "finished", "status": goal.status})
