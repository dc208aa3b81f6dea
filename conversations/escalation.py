"""When a turn hands its conversation to a person, and what the customer and the person read (docs/desk.md).

Pure rules over plain data, no ORM: the graph asks :func:`escalation_asked` what the routing decided (the customer
asked for a person, or an intent that people answer won), :func:`escalation_after` what the turn came to (loop
safety stopped a move, a goal could not be handled, the fallback answered once too often, a guardrail blocked the
message), and reads a specialist's ``request_human`` as :func:`specialist_asked`. Each gives an
:class:`EscalationAsk` — why, to which team, how urgent — or ``None``. The customer's notices are written here in
Portuguese, English and Spanish (:func:`notice`), the person's summary too (:func:`summary_for_person`).

The order when several hold: what the customer asked for, then the intent, the specialist, and the rules in
:data:`RULES`' order (one escalation per turn).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext_lazy

from agents.public import EscalationSettings
from common.i18n import DEFAULT_LANGUAGE, say
from common.language import LANGUAGES
from conversations.models import Escalation, EscalationPriority, EscalationReason
from handoffs.models import HandoffStatus
from handoffs.public import REFUSED_NOT_ALLOWED, Move
from routing.public import RouteDecision

HUMAN_REQUEST = "human_request"  # the small-talk kind of "I want to talk to a person" (routing.small_talk)
FALLBACK_METHOD = "fallback"
SUMMARY_MAX_CHARS = 2000
# How urgent each reason is by default (a specialist may say otherwise; a person may change it on the desk): a customer
# the assistants have already failed waits less.
PRIORITIES: dict[str, int] = {
    EscalationReason.THUMBS_DOWN: EscalationPriority.HIGH,
    EscalationReason.FALLBACKS: EscalationPriority.HIGH,
    EscalationReason.LOOP_STOP: EscalationPriority.HIGH,
    EscalationReason.GOAL_FAILURE: EscalationPriority.HIGH,
}
PRIORITY_WORDS: dict[str, int] = {choice.label.lower(): choice.value for choice in EscalationPriority}


@dataclass(frozen=True)
class EscalationAsk:
    """A turn's reason to hand its conversation to a person: the reason (:class:`EscalationReason`), why in words,
    the team, the priority, and what the asker said the person should know (a specialist's summary)."""

    reason: str
    why: str
    team: str
    priority: int = EscalationPriority.NORMAL
    summary: str = ""


@dataclass
class TurnEscalation:
    """People in the loop's part of one turn (``turn.escalation``): the escalation a person holds the conversation
    under, as loaded (its messages then go to the desk), with its place in line; this turn's reason to hand the
    conversation over (the routing's or a specialist's, else the escalation node's rules), the escalation it opens
    (stored with the turn) and its move."""

    held: Escalation | None = None
    ask: EscalationAsk | None = None
    opened: Escalation | None = None
    position: int | None = None
    person_move: Move | None = None
    answered: bool = True  # False: nobody answers now (a person holds the conversation and writes on the desk)


def _ask(settings: EscalationSettings, reason: str, why: str, team: str = "", **kwargs: Any) -> EscalationAsk:
    return EscalationAsk(
        reason=reason,
        why=why,
        team=settings.team_of(team),
        priority=kwargs.pop("priority", PRIORITIES.get(reason, EscalationPriority.NORMAL)),
        **kwargs,
    )


def escalation_asked(
    settings: EscalationSettings, decision: RouteDecision, *, escalate_to: str = ""
) -> EscalationAsk | None:
    """What the routing decided: the customer asked for a person (small talk's ``human_request``: "quero falar com
    um atendente", "a real person please"), or the winning intent is answered by people (``escalate_to``, its team).
    ``None`` when the profile hands nothing to people, or neither holds."""
    if not settings.enabled:
        return None
    talk = decision.metadata.get("small_talk") if decision.method == "small_talk" else None
    if isinstance(talk, dict) and talk.get("kind") == HUMAN_REQUEST:
        return _ask(settings, EscalationReason.CUSTOMER_REQUEST, "The customer asked for a person.")
    if escalate_to:
        why = f"The intent {decision.intent} is answered by people of {settings.team_of(escalate_to)}."
        return _ask(settings, EscalationReason.INTENT, why, escalate_to)
    return None


def specialist_asked(settings: EscalationSettings, agent: str, args: dict[str, Any]) -> EscalationAsk:
    """A specialist's ``request_human(reason, context_summary, team?, priority?)``: its words are the reason and the
    summary; a team it names that the profile has not is the default team."""
    reason = str(args.get("reason") or "").strip() or f"{agent} handed the conversation to a person."
    priority = PRIORITY_WORDS.get(str(args.get("priority") or "").strip().lower(), EscalationPriority.NORMAL)
    return _ask(
        settings,
        EscalationReason.SPECIALIST,
        reason[:500],
        str(args.get("team") or ""),
        priority=priority,
        summary=str(args.get("context_summary") or "").strip()[:SUMMARY_MAX_CHARS],
    )


# The profile's rules (EscalationSettings' switches), in the order they are read.
RULES = ("guardrail_block", "loop_stop", "goal_failure", "fallbacks")


def escalation_after(
    settings: EscalationSettings,
    *,
    blocked: bool,
    moves: Iterable[Move],
    goal_failed: bool,
    method: str,
    fallbacks_in_row: int,
) -> EscalationAsk | None:
    """What the turn came to, by the profile's rules: a message the guardrails blocked, a move loop safety stopped
    (ping-pong, a repeated path, a limit: not a refused target), a goal that could not be handled, or the fallback's
    answer made ``after_fallbacks`` in a row (``fallbacks_in_row`` counts this turn's)."""
    if not settings.enabled:
        return None
    if blocked and settings.on_guardrail_block:
        return _ask(settings, EscalationReason.GUARDRAIL_BLOCK, "A guardrail blocked the customer's message.")
    if settings.on_loop_stop:
        stopped = next(
            (
                move
                for move in moves
                if move.status == HandoffStatus.STOPPED and move.outcome and move.outcome != REFUSED_NOT_ALLOWED
            ),
            None,
        )
        if stopped is not None:
            why = f"Loop safety stopped a move ({stopped.outcome}: {stopped.from_agent} → {stopped.to_agent or '—'})."
            return _ask(settings, EscalationReason.LOOP_STOP, why)
    if goal_failed and settings.on_goal_failure:
        return _ask(settings, EscalationReason.GOAL_FAILURE, "The customer's goal could not be handled.")
    if method == FALLBACK_METHOD and settings.after_fallbacks and fallbacks_in_row >= settings.after_fallbacks:
        why = f"The fallback answered {fallbacks_in_row} messages in a row."
        return _ask(settings, EscalationReason.FALLBACKS, why)
    return None


def thumbs_down_asked(settings: EscalationSettings) -> EscalationAsk | None:
    """The customer rated an answer down, and the profile hands such conversations to people."""
    if not (settings.enabled and settings.on_thumbs_down):
        return None
    return _ask(settings, EscalationReason.THUMBS_DOWN, "The customer rated an answer down.")


# -- what the customer reads -------------------------------------------------------------------------------------

# English message ids, in the customer's language by the catalogues (common.i18n).
NOTICES: dict[str, Any] = {
    "queued": gettext_lazy(
        "I'm passing you to a person from our team. You are number {position} in line; someone will be with you "
        "shortly."
    ),
    "waiting": gettext_lazy(
        "You are still in line: number {position}. A person from our team will be with you shortly."
    ),
    "assigned": gettext_lazy("{person} is with you now."),
    "returned": gettext_lazy("{person} has finished and the virtual assistant is with you again. How can I help?"),
    "person": gettext_lazy("A person from our team"),
}


def language_of(detected: str | None, *, fallback: str = "") -> str:
    """The notices' language: the one told from the customer's words, else ``fallback`` (the escalation's), else
    Portuguese."""
    for language in (detected, fallback):
        if language in LANGUAGES:
            return str(language)
    return DEFAULT_LANGUAGE


def notice(kind: str, language: str, *, position: int | None = None, person: str = "") -> str:
    """The customer's notice of ``kind`` — ``queued`` (just handed over), ``waiting`` (a message while in line),
    ``assigned`` (a person took it), ``returned`` (handed back) — in ``language``."""
    return say(language, NOTICES[kind], position=position or 1, person=person or say(language, NOTICES["person"]))


# -- what the person reads first -----------------------------------------------------------------------------------


def summary_for_person(
    ask: EscalationAsk,
    *,
    intent: str,
    agent: str,
    state: str,
    history: Sequence[tuple[str, str]],
    text: str,
    answer: str = "",
) -> str:
    """What the person who takes the conversation reads first: why it came, the asker's own summary, where it stood
    (intent, assistant, state) and its last exchanges (personal data already masked), at most
    :data:`SUMMARY_MAX_CHARS`."""
    lines = [f"Why: {ask.why}"]
    if ask.summary:
        lines.append(f"Summary: {ask.summary}")
    where = ", ".join(
        part for part in (f"intent {intent}" if intent else "", f"answered by {agent}" if agent else "") if part
    )
    if where:
        lines.append(f"Where: {where}" + (f"; state {state}" if state else "") + ".")
    recent = [*history[-4:], ("user", text)]
    if answer:
        recent.append(("assistant", answer))
    lines.append("Last messages:")
    lines += [f"- {'customer' if role == 'user' else 'assistant'}: {_short(content)}" for role, content in recent]
    summary = "\n".join(lines)
    return summary if len(summary) <= SUMMARY_MAX_CHARS else summary[: SUMMARY_MAX_CHARS - 1] + "…"


def _short(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
