"""Loop safety (docs/handoffs.md): whether a move between agents may happen, and what the user gets when not.

Pure functions over plain data; the limits come from the profile
(:class:`routing.specs.LoopSafety`, editable in the admin).

Checked before every handoff and delegation, in this order:

1. ``handoff_limit`` — the turn already made ``max_handoffs_per_turn`` moves;
2. ``ping_pong``     — the move goes straight back to the agent that just
   handed over (A → B → A within one user message);
3. ``path_repeated`` — the from → to path would appear ``max_repeats`` times
   among the conversation's last ``window`` agent handoffs (earlier turns'
   and this turn's; routing handoffs are the router's doing, not a loop, and
   are not counted);
4. ``step_limit``    — the target has no model steps left in this turn
   (``max_steps_per_agent``, or the specialist's own lower limit).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.translation import gettext_lazy

from common.i18n import say

STOP_HANDOFF_LIMIT = "handoff_limit"
STOP_PING_PONG = "ping_pong"
STOP_PATH_REPEATED = "path_repeated"
STOP_STEP_LIMIT = "step_limit"
REFUSED_NOT_ALLOWED = "not_allowed"

# What the customer reads when a turn is stopped, in the conversation's language (common.i18n.say).
STOP_DESCRIPTIONS = {
    STOP_HANDOFF_LIMIT: gettext_lazy("the limit of handoffs per message was reached"),
    STOP_PING_PONG: gettext_lazy("the conversation would go straight back to the previous specialist"),
    STOP_PATH_REPEATED: gettext_lazy("the same transfer has repeated too often in this conversation"),
    STOP_STEP_LIMIT: gettext_lazy("the specialist's step limit for this message was reached"),
}
STOPPED = gettext_lazy("I'm stopping here so you are not kept waiting: {why}.")
FOUND_SO_FAR = gettext_lazy("What I found so far:")
NOTHING_FOUND = gettext_lazy("I could not gather the information yet; could you tell me in one sentence what you need?")


def move_check(
    *,
    chain: Sequence[str],
    target: str,
    moves_this_turn: int,
    recent_paths: Sequence[tuple[str, str]],
    steps_left: int,
    max_handoffs: int,
    block_ping_pong: bool,
    window: int,
    max_repeats: int,
) -> str | None:
    """The reason the move ``chain[-1] → target`` must not happen, or ``None`` when it may.

    ``chain`` is the agents that held this turn, in order; ``recent_paths`` the
    conversation's agent handoffs (from, to), oldest first, including this
    turn's so far.
    """
    source = chain[-1]
    if moves_this_turn >= max_handoffs:
        return STOP_HANDOFF_LIMIT
    if block_ping_pong and len(chain) >= 2 and chain[-2] == target:
        return STOP_PING_PONG
    last = list(recent_paths)[-(window - 1) :] if window > 1 else []
    if sum(1 for path in last if path == (source, target)) + 1 >= max_repeats:
        return STOP_PATH_REPEATED
    if steps_left <= 0:
        return STOP_STEP_LIMIT
    return None


def stop_summary(*, reason: str, answer: str, findings: Sequence[str], language: str | None = None) -> str:
    """The graceful answer when loop safety ends a turn: what was found so far, never an error; the platform's words
    in the conversation's ``language``.

    ``answer`` is the last specialist's own text (used when it says something),
    ``findings`` one line per tool result of the turn.
    """
    why = STOP_DESCRIPTIONS.get(reason, reason)
    lines = [say(language, STOPPED, why=say(language, why))]
    if answer.strip():
        lines.append(answer.strip())
    if findings:
        lines.append(say(language, FOUND_SO_FAR))
        lines.extend(f"- {finding}" for finding in findings)
    if not answer.strip() and not findings:
        lines.append(say(language, NOTHING_FOUND))
    return "\n".join(lines)
