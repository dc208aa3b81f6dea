"""Supervisor mode's model planner: the model says which specialists a message needs.

A profile with ``supervisor_planner = "model"`` asks its routing endpoint (structured output,
:func:`routing.classifier.structured_answer`, as the LLM classifier does) which of its enabled specialists must
answer, given their names, display names, descriptions and their intents' descriptions. The answer is a list of
``{specialist, intent, reason}``; names that are not the profile's are dropped. One specialist left → that
specialist's decision, as router mode gives it; several → a plan (``supervisor_agent``, ``multi_intent``); both
with method ``llm_plan``. No endpoint, an error, a timeout or nothing usable left → ``None`` and why: the caller
(:func:`routing.decide.route_decide`) then plans by keywords, as the ``keywords`` planner always does, and
records ``metadata.plan_source = "keywords"`` with ``metadata.planner_error``.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field

from routing.classifier import routing_model_configured, structured_answer
from routing.router import IntentSpec, PlanStep, RouteDecision, plan_decision
from routing.specs import ProfileSpec

logger = logging.getLogger(__name__)

MODEL_PLANNER = "model"
PLAN_BY_MODEL = "model"
PLAN_BY_KEYWORDS = "keywords"
NO_ENDPOINT = "no model endpoint is configured"
NOTHING_PLANNED = "the model named no specialist of this profile"

PLANNER_PROMPT = (
    "You are the supervisor of a customer-service team. Decide which specialists must answer the customer's "
    "message: one when a single specialist covers it, one per part when it asks for several things. Use only the "
    "specialists' names listed below, each at most once; name an intent only when one of that specialist's "
    "intents fits. Specialists:\n{catalogue}"
)


class PlannedSpecialist(BaseModel):
    """One specialist the model wants to answer."""

    specialist: str = Field(description="The specialist's name, exactly as listed.")
    intent: str = Field(default="", description="The name of that specialist's intent the part is about, or empty.")
    reason: str = Field(default="", description="One short sentence: which part of the message it answers.")


class SupervisorPlan(BaseModel):
    """Structured output of the supervisor's planner."""

    specialists: list[PlannedSpecialist] = Field(
        default_factory=list, description="The specialists that must answer, the most important first."
    )


def planner_catalogue(profile: ProfileSpec) -> str:
    """The profile's enabled specialists as the planner's prompt lists them, each with its intents."""
    lines: list[str] = []
    for name, spec in sorted(profile.specialists.items()):
        lines.append(f"- {name} ({spec.display_name}): {spec.description}")
        lines.extend(
            f"  - intent {intent.name}: {intent.description}" for intent in profile.intents if intent.agent == name
        )
    return "\n".join(lines)


async def model_plan(profile: ProfileSpec, text: str) -> tuple[RouteDecision | None, str]:
    """The model's plan for ``text`` as a decision, or ``None`` and why the keyword plan must stand in."""
    if not routing_model_configured(profile):
        return None, NO_ENDPOINT
    messages = [("system", PLANNER_PROMPT.format(catalogue=planner_catalogue(profile))), ("human", text)]
    try:
        answer = await structured_answer(profile, SupervisorPlan, messages)
    except Exception as exc:  # noqa: BLE001 — any client failure means "plan by keywords"
        logger.warning("Supervisor planner failed: %s", exc)
        return None, f"{type(exc).__name__}: {exc}"
    named = answer.specialists if answer is not None else []
    chosen = [item for item in named if item.specialist in profile.specialists]
    dropped = [item.specialist for item in named if item.specialist not in profile.specialists]
    steps: dict[str, tuple[PlanStep, IntentSpec | None]] = {}
    for item in chosen:
        if item.specialist not in steps:
            intent = profile.router.intents_by_name.get(item.intent)
            if intent is None or intent.agent != item.specialist:
                intent = profile.router.intent_of(item.specialist, text)
            steps[item.specialist] = (_step(item.specialist, intent), intent)
    if not steps:
        return None, NOTHING_PLANNED + (f" (dropped: {', '.join(dropped)})" if dropped else "")
    metadata: dict[str, Any] = {
        "plan_source": PLAN_BY_MODEL,
        "planner": [item.model_dump() for item in named],
        "planner_dropped": dropped,
    }
    return _decision([step for step, _ in steps.values()], [intent for _, intent in steps.values()], metadata), ""


def _step(agent: str, intent: IntentSpec | None) -> PlanStep:
    if intent is None:
        return PlanStep(agent=agent, intent="")
    return PlanStep(agent=agent, intent=intent.name, mcp_tools=intent.mcp_tools, next_state=intent.next_state)


def _decision(steps: list[PlanStep], intents: list[IntentSpec | None], metadata: dict[str, Any]) -> RouteDecision:
    reasons = {item["specialist"]: item["reason"] for item in metadata["planner"] if item["reason"]}
    if len(steps) == 1:
        step, intent = steps[0], intents[0]
        return RouteDecision(
            route=step.agent,
            agent=step.agent,
            intent=step.intent,
            confidence=0.9,
            reason=f"The supervisor's model chose {step.agent}: {reasons.get(step.agent, 'no reason given')}.",
            method="llm_plan",
            next_state=step.next_state or None,
            domain=(intent.domain or None) if intent else None,
            mcp_tools=list(step.mcp_tools),
            metadata=metadata,
        )
    return plan_decision(
        steps,
        domains={intent.domain for intent in intents if intent is not None and intent.domain},
        reason=(
            f"The supervisor's model planned {len(steps)} specialists ("
            + ", ".join(f"{step.intent or '-'} → {step.agent}" for step in steps)
            + ") and will consult each."
        ),
        method="llm_plan",
        metadata=metadata,
    )
