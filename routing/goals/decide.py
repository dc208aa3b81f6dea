"""Goal mode's decision for one message (docs/goals.md): what the user wants, whether to ask first, and the plan.

:func:`goal_decide` reads the message's goal and entities (:mod:`routing.goals.intent`: the model, or the offline
reading of the manifests' hints), completes them from the conversation's goal state, passes them through the
confidence gate and, when nothing needs asking, resolves and plans them (:mod:`routing.goals.planner`). It executes
nothing: the engine runs the plan (``conversations.goals.engine``), and ``/api/debug/plan`` shows the decision.

The conversation's goal state (``Conversation.goal_state``) carries two things between messages:

* ``pending`` — a goal that asked the user something: ``{"reason", "intent_output", "clarification"}``. The
  reply completes it: a choice among the candidates of an ambiguous entity ("a segunda", the symbol), the
  missing entity, or a yes to "is this what you meant?" (read by :mod:`routing.replies` with the profile's
  words); a no to that question drops the goal, runs nothing and asks what the user wants instead;
* ``last`` — the last goal served with its entities, so a follow-up that names only what changes ("e da
  Vale?") keeps the goal and the entities it leaves out (unless the schema says ``"carry": false``).

A message no goal covers (domain ``general``) is answered by the profile's specialists, and is exempt from the
gate. Small talk (:mod:`routing.small_talk`) is too, and leaves the goal state as it was: a greeting between a
question and its answer does not drop the pending goal. Nor does a side question — a message for the specialists,
or another goal served in the middle — which leaves the pending goal waiting (the turn asks its question again).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from common.translations import translated_only
from routing.goals.intent import (
    clarification_question,
    entities_merge,
    entities_said,
    intent_read,
    missing_required,
)
from routing.goals.planner import (
    CHOSEN_PARAM,
    CLARIFICATION,
    FAILURE,
    GENERAL_DOMAIN,
    ExecutionIntent,
    ExecutionPlan,
    GoalSpec,
    IntentOutput,
    PlanError,
    candidate_choose,
    goal_resolve,
    plan_build,
    plan_limits,
)
from routing.goals.words import DEFAULT_LANGUAGE, said, turn_language
from routing.replies import NO, YES
from routing.small_talk import small_talk_read
from routing.specs import ProfileSpec

PLAN, GENERAL = "plan", "general"  # besides CLARIFICATION and FAILURE
SMALL_TALK = "small_talk"  # how a greeting, thanks or goodbye was read: no goal, and the goal state is left as it was
AMBIGUOUS, MISSING_ENTITY, LOW_CONFIDENCE = "ambiguous", "missing_entity", "low_confidence"
UNREAD = "unread"  # the model could not read the message (an error): the user is asked to rephrase
DECLINED = "declined"  # the user said no to the low-confidence question: nothing runs, they are asked what they want


@dataclass
class GoalDecision:
    """What goal mode decided for a message, and the goal state the conversation keeps after it."""

    status: str  # plan | clarification | general | failure
    intent_output: IntentOutput
    goal_state: dict[str, Any] | None
    execution_intents: list[ExecutionIntent] = field(default_factory=list)
    plan: ExecutionPlan | None = None
    clarification: dict[str, Any] | None = None
    reason: str = ""
    threshold: float | None = None
    language: str = DEFAULT_LANGUAGE  # the customer's (routing.goals.words.turn_language): questions and answer

    @property
    def domain(self) -> str:
        return self.intent_output.primary_domain

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "intent_output": self.intent_output.as_dict(),
            "reading": dict(self.intent_output.reading),
            "execution_intents": [intent.as_dict() for intent in self.execution_intents],
            "plan": self.plan.as_dict() if self.plan else None,
            "limits": [dict(hit) for hit in self.plan.limits] if self.plan else [],
            "clarification": self.clarification,
            "reason": self.reason,
            "threshold": self.threshold,
            "language": self.language,
        }


def _intent(data: Mapping[str, Any]) -> IntentOutput:
    return IntentOutput(
        primary_domain=str(data.get("primary_domain", "")),
        goal=str(data.get("goal", "")),
        entities=dict(data.get("entities") or {}),
        confidence=float(data.get("confidence", 0.0)),
        original_query=str(data.get("original_query", "")),
    )


def _replaced(entities: Mapping[str, Any], query: str, value: str) -> dict[str, Any]:
    """``entities`` with the ambiguous text the user was asked about replaced by the candidate they chose."""
    out: dict[str, Any] = {}
    for name, current in entities.items():
        if isinstance(current, list):
            out[name] = [value if item == query else item for item in current]
        else:
            out[name] = value if current == query else current
    return out


_GLOSSED_GOAL = re.compile(r"^\s*(?P<label>[^()]+?)\s*\((?P<gloss>[^()]+)\)\s*\.?\s*$")


def _goal_named(goal: GoalSpec, language: str, own: str) -> str:
    """The goal as the confirmation question names it in ``language``: its description's translation into it (for a
    profile whose texts are in ``own``), else its description (``"<label> (<English label>)."``: the English one in
    English); lower-cased at the start and without its full stop, else its name."""
    described = translated_only("", goal.translations, "description", language, own=own).strip()
    if not described:
        described = goal.description.strip()
        glossed = _GLOSSED_GOAL.match(described)
        if glossed:
            described = glossed["gloss"] if language == "en" else glossed["label"]
    described = described.strip().rstrip(".")
    if not described:
        return goal.name
    first = described.split()[0]
    # An acronym keeps its capitals ("PIX"); a capital that only starts the sentence ("O preço") does not.
    return described if first.isupper() and len(first) > 1 else described[0].lower() + described[1:]


def _describe(goal: GoalSpec, read: IntentOutput) -> str:
    """The entities the confirmation repeats, in brackets, as the customer said them (:func:`entities_said`)."""
    shown = entities_said(goal, read.entities, read.original_query)
    return f" ({', '.join(shown)})" if shown else ""


async def goal_decide(
    *, profile: ProfileSpec, text: str, goal_state: Mapping[str, Any] | None, language: str = ""
) -> GoalDecision:
    """The decision for ``text`` given the conversation's goal state (see the module docstring), in the customer's
    ``language`` (the conversation's; without one, :func:`routing.goals.words.turn_language`: the message's, else the
    one the goal state keeps)."""
    state = dict(goal_state or {})
    language = language or turn_language(text, state.get("language"))
    decision = await _decided(profile, text, state, language)
    decision.language = language
    if decision.goal_state is not None and decision.intent_output.reading.get("method") != SMALL_TALK:
        decision.goal_state = {**decision.goal_state, "language": language}
    return decision


async def _decided(profile: ProfileSpec, text: str, state: dict[str, Any], language: str) -> GoalDecision:
    pending, last = state.get("pending"), state.get("last")
    if pending:
        # "Is this what you want?" is a yes/no question: its answer is read as one (routing.replies).
        reply = profile.reply_words.read(text).reads_as if pending.get("reason") == LOW_CONFIDENCE else None
        if reply == NO:
            return _declined(pending, last, language)
        answered = _pending_answered(text, pending, said_yes=reply == YES)
        if answered is not None:
            return _planned(profile, answered, last_kept=last, reason=f"The user answered: {pending['reason']}.")
        previous: IntentOutput | None = _intent(pending["intent_output"])
    else:
        previous = _intent({**last, "primary_domain": last.get("domain", ""), "confidence": 1.0}) if last else None
    talk = small_talk_read(text)
    if talk is not None:
        read = IntentOutput(GENERAL_DOMAIN, "", {}, 1.0, text, {"method": SMALL_TALK, "small_talk": talk.as_dict()})
        return GoalDecision(GENERAL, read, state or None, reason="Small talk: no goal is read, and none is dropped.")
    read = await intent_read(profile, text, previous=previous)
    if not read.primary_domain and read.confidence <= 0.0:  # the model failed: ask rather than guess
        clarification = {"reason": UNREAD, "question": said("rephrase", language), "candidates": []}
        kept = {"pending": None, "last": last} if last else None
        return GoalDecision(CLARIFICATION, read, kept, clarification=clarification, reason="The message was not read.")
    goal = profile.goals.goal(read.primary_domain, read.goal) if read.goal else None
    if read.primary_domain == GENERAL_DOMAIN or goal is None or not goal.enabled:
        general = replace(read, primary_domain=GENERAL_DOMAIN, goal="") if goal is None else read
        # A side question for the specialists: the goal that asked waits for its answer.
        kept = {"pending": pending or None, "last": last} if last or pending else None
        return GoalDecision(GENERAL, general, kept, reason="No goal of the profile's domains covers the message.")
    if previous is not None and (previous.primary_domain, previous.goal) == (goal.domain, goal.name):
        read = replace(read, entities=entities_merge(goal, previous.entities, read.entities))
    decided = _gated(profile, goal, read, last, language)
    asked_for = _intent(pending["intent_output"]) if pending else None
    other_goal = asked_for is not None and (asked_for.primary_domain, asked_for.goal) != (goal.domain, goal.name)
    if other_goal and decided.status != CLARIFICATION and decided.goal_state is not None:
        # Another goal asked in the middle: served now, and the goal that asked still waits for its answer.
        decided.goal_state = {**decided.goal_state, "pending": pending}
    return decided


def _declined(pending: Mapping[str, Any], last: Any, language: str) -> GoalDecision:
    """The user said no to the low-confidence question: the goal is dropped, nothing runs, and they are asked what
    they want (their next message is read afresh)."""
    clarification = {"reason": DECLINED, "question": said("declined", language), "candidates": []}
    return GoalDecision(
        CLARIFICATION,
        _intent(pending["intent_output"]),
        {"pending": None, "last": last},
        clarification=clarification,
        reason="The user said no to the goal they were asked about: nothing is run.",
    )


def _pending_answered(text: str, pending: Mapping[str, Any], *, said_yes: bool) -> IntentOutput | None:
    """The pending goal completed by ``text`` when it answers the question asked (``said_yes``: the message reads as
    a yes to the low-confidence question), else ``None``."""
    intent = _intent(pending["intent_output"])
    clarification = pending.get("clarification") or {}
    if pending.get("reason") == AMBIGUOUS:
        candidates = clarification.get("candidates") or []
        index = candidate_choose(
            text,
            candidates,
            label_fields=tuple(clarification.get("label_fields") or ("label",)),
            value_field=str(clarification.get("value_field") or "value"),
        )
        if index is None:
            return None
        chosen = str(candidates[index].get("value", ""))
        entities = _replaced(intent.entities, str(clarification.get("query", "")), chosen)
        param = str(clarification.get("param") or "")
        if param:  # the chosen value is the param's: the plan needs no search for it (a code no search may know)
            recorded = entities.get(CHOSEN_PARAM)
            earlier: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
            entities[CHOSEN_PARAM] = {**earlier, param: [*earlier.get(param, ()), chosen]}
        return replace(intent, entities=entities, confidence=1.0, reading={"method": "answer"})
    if pending.get("reason") == LOW_CONFIDENCE and said_yes:
        return replace(intent, confidence=1.0, reading={"method": "answer"})
    return None


def _gated(profile: ProfileSpec, goal: GoalSpec, read: IntentOutput, last: Any, language: str) -> GoalDecision:
    """Ask when an entity the goal requires is missing or the reading is not sure enough; else plan."""
    threshold = goal.confidence_threshold if goal.confidence_threshold is not None else profile.goal_threshold
    missing = missing_required(goal, read.entities)
    if missing:
        question = clarification_question(goal, missing, language)
        return _asking(read, last, MISSING_ENTITY, {"question": question, "missing": missing}, threshold)
    if read.confidence < threshold:
        question = said(
            "confirm", language, goal=_goal_named(goal, language, profile.language), entities=_describe(goal, read)
        )
        return _asking(read, last, LOW_CONFIDENCE, {"question": question}, threshold)
    decision = _planned(profile, read, last_kept=last, reason="")
    decision.threshold = threshold
    return decision


def _asking(read: IntentOutput, last: Any, reason: str, details: dict[str, Any], threshold: float) -> GoalDecision:
    clarification = {"reason": reason, "candidates": [], **details}
    pending = {"reason": reason, "intent_output": read.as_dict(), "clarification": clarification}
    why = {
        MISSING_ENTITY: f"The goal needs {', '.join(details.get('missing', []))}: the user is asked.",
        LOW_CONFIDENCE: f"Confidence {read.confidence:.2f} is below the threshold {threshold:.2f}: the user is asked.",
    }[reason]
    return GoalDecision(
        CLARIFICATION,
        read,
        {"pending": pending, "last": last},
        clarification=clarification,
        reason=why,
        threshold=threshold,
    )


def _planned(profile: ProfileSpec, read: IntentOutput, *, last_kept: Any, reason: str) -> GoalDecision:
    """Resolve and plan ``read`` (deterministic: capability_map and the capabilities' metadata)."""
    goal = profile.goals.goal(read.primary_domain, read.goal)
    served = {"domain": read.primary_domain, "goal": read.goal, "entities": dict(read.entities)}
    if goal is None:
        return GoalDecision(FAILURE, read, {"pending": None, "last": last_kept}, reason="The goal is not served.")
    try:
        intents = goal_resolve(read, goal)
        plan = plan_build(intents, profile.goals.capabilities, limits=plan_limits())
    except PlanError as exc:
        return GoalDecision(FAILURE, read, {"pending": None, "last": served}, reason=str(exc))
    return GoalDecision(
        PLAN,
        read,
        {"pending": None, "last": served},
        execution_intents=intents,
        plan=plan,
        reason=reason or f"Goal {read.primary_domain}.{read.goal} with confidence {read.confidence:.2f}.",
    )


def ambiguity_pending(decision: GoalDecision, clarification: Mapping[str, Any]) -> dict[str, Any]:
    """The goal state after the engine found an ambiguous entity: the reply will choose among the candidates."""
    pending = {
        "reason": AMBIGUOUS,
        "intent_output": decision.intent_output.as_dict(),
        "clarification": dict(clarification),
    }
    return {"pending": pending, "last": (decision.goal_state or {}).get("last"), "language": decision.language}
