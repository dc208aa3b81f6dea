"""The conversation stack in a turn: the frames read from the conversation, the routing with them
(:func:`routing.stack.conversation_decide`), what that does to the conversation's columns, and the words the customer
reads — the platform's own answer to a cancel or a repeat, the line that resumes a flow after a side question, the
offer of a queued request — in the customer's language (Django i18n: ``locale/``).

Frames of a state or a queued request are stored in the conversation's ``stack`` column; a permission question
and an open delegation are frames read from their own columns (``pending_permission``, ``sub_conversation``) and
written back to them.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from django.utils import timezone, translation
from django.utils.translation import gettext

from agents.public import permission_note
from common.i18n import language_known
from conversations.permissions import DENIED, GRANTED, permission_reply
from conversations.turn import Turn
from handoffs.models import HandoffKind
from routing.public import (
    ALREADY_TOLD,
    CANCEL,
    CORRECT,
    DELEGATION,
    NO,
    PERMISSION,
    REPEAT,
    SKIP,
    STATE,
    STORED_KINDS,
    Frame,
    Repair,
    Reply,
    RouteDecision,
    StackStep,
    conversation_decide,
    is_question,
    marks_digression,
    skips_the_question,
)

_QUESTION = re.compile(r"[^.!?\n]*\?")


def frames_live(turn: Turn) -> list[Frame]:
    """The conversation's frames as the turn found them: the stored ones, then a waiting permission question or an
    open delegation on top (read from their own columns). A stored state frame that is no longer the conversation's
    state (the state was changed elsewhere: a session ended, an editor's reset) is left out, and a state with no
    frame (a conversation from before the stack) gets one."""
    frames = [
        frame
        for frame in turn.stack.frames
        if frame.kind != STATE or frame.name == turn.route.state or not turn.route.state
    ]
    if not turn.route.state:
        frames = [frame for frame in frames if frame.kind != STATE]
    elif not any(frame.kind == STATE and frame.name == turn.route.state for frame in frames):
        frames.append(
            Frame(kind=STATE, name=turn.route.state, agent=turn.route.active_agent, intent=turn.route.active_intent)
        )
    if turn.stack.sub_conversation:
        specialist = str(turn.stack.sub_conversation.get("specialist", ""))
        frames.append(
            Frame(
                kind=DELEGATION,
                name=specialist,
                agent=specialist,
                intent=str(turn.stack.sub_conversation.get("intent", "")),
            )
        )
    if turn.stack.pending_permission:
        pending = turn.stack.pending_permission
        frames.append(
            Frame(
                kind=PERMISSION,
                name=str(pending.get("tool", "")),
                agent=str(pending.get("agent", "")),
                intent=str(pending.get("intent", "")),
                question=str(pending.get("question", "")),
            )
        )
    return frames


async def stack_route(turn: Turn) -> RouteDecision:
    """The message routed with the conversation's frames; the step is kept on the turn (``turn.stack.step``) and the
    columns it changes are set (:func:`stack_apply`)."""
    sub = turn.stack.sub_conversation or {}
    decision, step = await conversation_decide(
        profile=turn.input.profile,
        text=turn.guardrails.sanitized_text,
        frames=frames_live(turn),
        turn=turn.store.ticket + 1,
        now=timezone.now(),
        active_agent=turn.route.active_agent,
        active_intent=turn.route.active_intent,
        delegated_to=sub.get("specialist", ""),
        delegated_intent=sub.get("intent", ""),
        single_agent=turn.input.single_agent,
        context=turn.chain.context,
    )
    turn.stack.step = step
    turn.stack.sub_conversation_before = dict(turn.stack.sub_conversation) if turn.stack.sub_conversation else None
    stack_apply(turn, step)
    return decision


def permission_bound(turn: Turn, pending: dict[str, Any], *, repair: Repair | None = None) -> StackStep:
    """The reply to the permission question: bound to its frame, which closes; the frames under it stay. ``repair``:
    the question was passed (a skip) rather than answered."""
    frames = frames_live(turn)
    step = StackStep(frames=frames, turn=turn.store.ticket + 1, now=timezone.now(), repair=repair)
    frame = Frame(
        kind=PERMISSION,
        name=str(pending.get("tool", "")),
        agent=str(pending.get("agent", "")),
        intent=str(pending.get("intent", "")),
    )
    if repair is None:
        step.event("bound", frame, "reply")
    step.event("closed", frame, repair.pattern if repair is not None else "reply")
    turn.stack.frames = [frame for frame in frames if frame.kind in STORED_KINDS]
    return step


def stack_apply(turn: Turn, step: StackStep) -> None:
    """The conversation's columns after the step: a permission question or a delegation no frame holds any more is
    dropped, the stored frames are the state and queued-request frames, a correction's values replace the context's."""
    kinds = {frame.kind for frame in step.frames}
    if PERMISSION not in kinds:
        turn.stack.pending_permission = None
    if DELEGATION not in kinds and step.cancelled is not None and step.cancelled.kind == DELEGATION:
        turn.stack.sub_conversation = None
    turn.stack.frames = [frame for frame in step.frames if frame.kind in STORED_KINDS]
    if step.corrected:
        turn.chain.context = {**turn.chain.context, **step.corrected}
    if step.note:
        turn.chain.notes.append(step.note)


def repair_rest(turn: Turn) -> str | None:
    """What of the message may move the conversation on, when it repairs a step (a correction, "I already told
    you", a skip): nothing — it answers that step's specialist, and the order it names again ("é o mesmo pedido")
    is no request for another; ``None`` for any other message (read whole)."""
    step = turn.stack.step
    redone = step is not None and step.repair is not None and step.repair.pattern in (CORRECT, ALREADY_TOLD, SKIP)
    return "" if redone else None


def stack_state(turn: Turn) -> str:
    """The conversation state after the turn: the topmost state frame's."""
    return next((frame.name for frame in reversed(turn.stack.frames) if frame.kind == STATE), "")


def fixed_answer(turn: Turn) -> str | None:
    """The platform's own answer to a cancel, a repeat or a skip of a question that cannot be passed (no specialist
    runs), or ``None``."""
    step = turn.stack.step
    if step is None or not step.fixed:
        return None
    with translation.override(language_known(turn.language.code)):
        if step.fixed == SKIP and step.top is not None and step.top.question:
            return gettext("I need this answer to go on: %(question)s") % {"question": step.top.question}
        if step.fixed in (REPEAT, SKIP):
            last = next((entry.content for entry in reversed(turn.history) if entry.role == "assistant"), "")
            return last or gettext("I have not said anything yet that I could repeat. How can I help you?")
        assert step.fixed == CANCEL
        answer = gettext("All right, I have dropped that.")
        below = step.top
        if below is None or below.kind != STATE:
            more = gettext("Is there anything else I can help you with?")
            return f"{answer} {more}"
        return f"{answer} {_resume_line(below)}"


def delegation_kept(turn: Turn) -> None:
    """A side question inside a delegation: the delegated specialist handed it back as out of scope and the
    coordinator passed it on. Answered, the delegation that was open is resumed — pushed under the side question —
    rather than replaced (a cancel, or its expiry, ends it)."""
    step, before = turn.stack.step, turn.stack.sub_conversation_before
    if step is None or step.fixed or not before or turn.stack.sub_conversation == before:
        return
    specialist = str(before.get("specialist", ""))
    handed_back = any(move.kind == HandoffKind.RETURN and move.from_agent == specialist for move in turn.chain.moves)
    if not handed_back or not (
        is_question(turn.guardrails.sanitized_text) or marks_digression(turn.guardrails.sanitized_text)
    ):
        return
    frame = Frame(kind=DELEGATION, name=specialist, agent=specialist, intent=str(before.get("intent", "")))
    turn.stack.sub_conversation = before
    turn.stack.pending_result = None
    step.event("pushed", frame, turn.route.final_intent or turn.agent)
    step.event("resumed", frame, turn.route.final_intent or turn.agent)
    step.resume = frame


def answer_lines(turn: Turn) -> str:
    """What the answer ends with: the line that resumes the flow a side question interrupted, the offer of the
    requests queued for later; ``""`` when none."""
    step = turn.stack.step
    if step is None or step.fixed:
        return ""
    resumed = step.resume if turn.input.profile.resume_style == "explicit" else None
    if resumed is None and not step.queued:
        return ""  # most messages: no line to write, so no language is switched to for it
    lines: list[str] = []
    with translation.override(language_known(turn.language.code)):
        if resumed is not None:
            lines.append(_resume_line(resumed))
        for frame in step.queued:
            lines.append(
                gettext("Next, your other request: “%(text)s”. Shall I look into it now?") % {"text": frame.text}
            )
    return " ".join(lines)


def _resume_line(frame: Frame) -> str:
    if frame.question:
        return gettext("Back to where we were: %(question)s") % {"question": frame.question}
    if frame.kind == PERMISSION:
        return gettext("Back to where we were: may I use %(tool)s to go on?") % {"tool": frame.name}
    return gettext("Back to where we were: shall we carry on?")


def question_of(answer: str) -> str:
    """The last question an answer asks (what a flow's frame says again when it is resumed), or ``""``."""
    found = _QUESTION.findall(answer)
    return found[-1].strip() if found else ""


def frames_asked(turn: Turn) -> None:
    """After the answer: a frame the turn opened keeps the question its answer asked."""
    step = turn.stack.step
    if step is None or not turn.stack.frames:
        return
    top = turn.stack.frames[-1]
    if top.kind == STATE and top.opened_turn == step.turn and not top.question:
        question = question_of(turn.answer)
        if question:
            turn.stack.frames[-1] = replace(top, question=question)


async def permission_claim(turn: Turn) -> RouteDecision | None:
    """A reply to the permission question goes back to the specialist that asked, granted or denied (a claim of the
    routing, :mod:`conversations.stages`); it is recorded as ``metadata["reply"]`` and its words move nothing
    (:attr:`TurnStack.reply`).

    Any other message is routed with the conversation's frames (:func:`stack_route`): a side question
    keeps the request waiting and asks again after its answer; a new request to the same specialist drops it.
    """
    pending = turn.stack.pending_permission
    if not pending:
        return None
    repair = turn.input.profile.repair_words.read(turn.guardrails.sanitized_text)
    if repair is not None and repair.pattern == CANCEL:
        return None  # "pode esquecer": the stack drops the question (conversations.stack_turn)
    said = turn.guardrails.sanitized_text
    reading = turn.input.profile.reply_words.read_past_fillers(said)
    skipped = skips_the_question(repair, reading, said)  # passed as a no is: the tool does not run
    reply = DENIED if skipped else permission_reply(reading)
    if reply is None:
        return None  # the stack reads it: a side question keeps the question waiting, a new request drops it
    turn.stack.pending_permission = None
    turn.stack.step = permission_bound(turn, pending, repair=repair if skipped else None)
    if skipped and repair is not None:
        reading = Reply(NO, repair.phrase, "")
    turn.stack.reply = reading
    tool = pending["tool"]
    if reply == GRANTED and tool not in turn.stack.granted:
        turn.stack.granted.append(tool)
    turn.stack.permission = {"tool": tool, "reply": reply}
    turn.chain.context = {**pending.get("context", {}), **turn.input.context}
    turn.chain.notes.append(permission_note(tool, granted=reply == GRANTED))
    tools = [name for name in pending.get("mcp_tools", []) if reply == GRANTED or name != tool]
    return RouteDecision(
        route=pending["agent"],
        agent=pending["agent"],
        intent=pending.get("intent", ""),
        confidence=1.0,
        reason=f"Reply to the permission question: the user {reply} {tool}.",
        method="permission",
        mcp_tools=tools,
        metadata={"permission": turn.stack.permission, "reply": reading.as_metadata()},
    )
