"""What a message did to the conversation's open flows, in words a business user reads: from the conversation part of
an answer's metadata (``metadata["conversation"]``, :meth:`routing.stack.StackStep.as_metadata` with the frames open
after the turn), for the route preview and a conversation's page in the admin.

The words are plain text (the pages escape them) built from stored data that is never trusted to have the shape it
should: what does not read as a frame or an event is left out, and a name is shown cut to a frame's own limits
(:meth:`routing.stack.Frame.from_dict`). Pure: no ORM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from routing.repairs import ALREADY_TOLD, CANCEL, CORRECT, REPEAT, SKIP
from routing.stack import CLARIFICATION, DELEGATION, PERMISSION, STATE, TOPIC, Frame, StackStep

KIND_WORDS = {
    STATE: "the flow {name}",
    PERMISSION: "the permission question for {name}",
    CLARIFICATION: "the clarification {name}",
    DELEGATION: "the delegation to {name}",
    TOPIC: "the queued request {name}",
}
REPAIR_WORDS = {
    CANCEL: "cancel — the customer dropped what was open",
    CORRECT: "correction — the previous step runs again with the corrected value",
    REPEAT: "repeat — the last answer is said again",
    SKIP: "skip — the customer passed on the question",
    ALREADY_TOLD: "already told — the specialist reads what the customer said before",
}
# Why a frame closed or was dropped, by what the event says caused it (``StackStep.event``'s ``by``).
CLOSED_BY = {
    "reply": "its reply ended it",
    SKIP: "the customer skipped its question",
    "new request": "the customer asked something new",
}
EXPIRED_BY = {
    "expiry": "it was older than the profile keeps a flow open (messages or minutes)",
    "depth": "more flows were open than the profile keeps (stack depth)",
}
NOTHING_MOVED = "nothing moved"


@dataclass(frozen=True)
class StackExplained:
    """One message's part of the conversation stack, told: each event as a phrase (in order), the frames open after
    it (the one the next reply goes to first), the repair pattern it read as, and the requests it held."""

    events: tuple[str, ...]
    frames: tuple[str, ...]
    repair: str = ""
    topics: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """All of it but the open frames in one line: "pushed the flow X under a side question (Y); resumed the flow
        X", "cancelled the flow X; repair: cancel — …", "2 requests in one message: …"."""
        repair = [f"repair: {self.repair}"] if self.repair else []
        topics = [self.topics_line] if self.topics else []
        return "; ".join([*self.events, *repair, *topics]) or NOTHING_MOVED

    @property
    def topics_line(self) -> str:
        """The requests of a message that held several ("2 requests in one message: A (agent) answered, B (agent)
        queued"), or ``""``."""
        return f"{len(self.topics)} requests in one message: " + ", ".join(self.topics) if self.topics else ""

    @property
    def worth_showing(self) -> bool:
        """Whether the message touched the stack or left flows open (a plain one-off question did neither)."""
        return bool(self.events or self.frames or self.repair or self.topics)


def frame_named(frame: Frame) -> str:
    """A frame by its kind and name: "the flow WAITING_PAYMENT_CONFIRMATION", "the queued request tech_support"."""
    return KIND_WORDS.get(frame.kind, "{name}").format(name=frame.name or "(unnamed)")


def frame_described(frame: Frame) -> str:
    """A frame as a list shows it: its name, the specialist it waits for, what it asked or the request it keeps."""
    text = frame_named(frame)
    if frame.agent and frame.agent != frame.name:
        text += f", with {frame.agent}"
    if frame.text:
        text += f": “{frame.text}”"
    elif frame.question:
        text += f", which asked “{frame.question}”"
    return text


def event_phrase(name: str, frame: Frame, by: str) -> str:
    """One event of :meth:`routing.stack.StackStep.event` as a phrase."""
    named = frame_named(frame)
    if name == "opened":
        return f"opened {named}" + (f" ({by})" if by else "")
    if name == "queued":
        return f"queued the request {frame.name} for later"
    if name == "pushed":
        return f"pushed {named} under a side question" + (f" ({by})" if by else "")
    if name == "resumed":
        return f"took up {named}" if frame.kind == TOPIC else f"resumed {named}"
    if name == "bound":
        return f"read as the reply to {named}"
    if name == "closed":
        return f"closed {named} ({CLOSED_BY.get(by, by or 'done')})"
    if name == "cancelled":
        return f"declined {named}" if frame.kind == TOPIC else f"cancelled {named}"
    if name == "expired":
        return f"dropped {named}: {EXPIRED_BY.get(by, by or 'expired')}"
    return f"{name} {named}" + (f" ({by})" if by else "")


def events_explained(events: Any) -> list[str]:
    """The phrases of stored events, in order; an entry that is not an event is left out."""
    phrases = []
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            continue
        frame = _frame(event.get("frame"))
        if frame is not None:
            phrases.append(event_phrase(event["event"][:40], frame, str(event.get("by") or "")[:100]))
    return phrases


def topic_phrase(topic: Any) -> str:
    if not isinstance(topic, dict):
        return ""
    intent, agent, status = (str(topic.get(key) or "")[:100] for key in ("intent", "agent", "status"))
    return f"{intent or '(no intent)'}" + (f" ({agent})" if agent else "") + (f" {status}" if status else "")


def stack_explained(conversation: Any) -> StackExplained | None:
    """``metadata["conversation"]`` told (:class:`StackExplained`); ``None`` when the message was not routed with
    the stack (no such part, or not a mapping)."""
    return _told(conversation) if isinstance(conversation, dict) else None


def step_explained(step: StackStep) -> StackExplained:
    """What one message does to the frames (:func:`routing.stack.conversation_decide`'s step), told."""
    return _told(step.as_metadata())


def _told(conversation: dict[str, Any]) -> StackExplained:
    repair = conversation.get("repair")
    if isinstance(repair, dict):  # the decision's form: {"pattern": …, "phrase": …}
        repair = repair.get("pattern")
    topics = conversation.get("topics")
    told = [phrase for phrase in map(topic_phrase, topics if isinstance(topics, list) else []) if phrase]
    return StackExplained(
        events=tuple(events_explained(conversation.get("events"))),
        frames=frames_told(conversation.get("stack")),
        repair=REPAIR_WORDS.get(repair, repair[:40]) if isinstance(repair, str) else "",
        topics=tuple(told),
    )


def frames_top_first(frames: list[Frame]) -> list[str]:
    """Open frames as a list shows them, the one the next reply goes to first."""
    return [frame_described(frame) for frame in reversed(frames)]


def frames_told(stored: Any) -> tuple[str, ...]:
    """Stored frames (a conversation's ``stack`` column, ``metadata["conversation"]["stack"]``) as a list shows them,
    top first; what does not read as a frame is left out."""
    frames = [frame for frame in map(_frame, stored if isinstance(stored, list) else []) if frame is not None]
    return tuple(frames_top_first(frames))


def _frame(data: Any) -> Frame | None:
    try:
        return Frame.from_dict(data)
    except (TypeError, ValueError):  # a number of the frame's that holds something else
        return None
