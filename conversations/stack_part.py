"""The conversation stack's part of one turn: the conversation's live state as loaded, changed by the turn and
written back by persist — the stored frames (:mod:`routing.stack`), an open delegation, a coordinator's pending
result, a permission question and the permissions granted, goal mode's pending goal — and what the message did to
them.

Read and written by :mod:`conversations.stack_turn` and the graph's nodes; the turn holds one
(:attr:`conversations.turn.Turn.stack`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from routing.public import CLARIFICATION_FRAME, DELEGATION, GOAL_AGENT, PERMISSION, Frame, Reply, StackStep


@dataclass
class TurnStack:
    """The conversation's frames and live state as one turn reads and changes them."""

    frames: list[Frame] = field(default_factory=list)  # the stored frames, as loaded and as the turn leaves them
    step: StackStep | None = None  # what the message did to them (conversations.stack_turn)
    sub_conversation: dict[str, Any] | None = None
    sub_conversation_before: dict[str, Any] | None = None  # the delegation open when the message arrived
    pending_result: dict[str, Any] | None = None
    pending_permission: dict[str, Any] | None = None
    granted: list[str] = field(default_factory=list)
    permission: dict[str, Any] | None = None  # metadata.permission: the permission gate's reading of the message
    goal_state: dict[str, Any] | None = None  # goal mode: the pending goal (a clarification) and the last one
    # The questions and delegation waiting when the message arrived, as (kind, name): what the turn opened is new.
    found_waiting: tuple[tuple[str, str], ...] = ()
    # The message read as the yes or no to the question the answering specialist asked (the permission gate's, a
    # state policy's flow): its words answer the question and move nothing (routing.replies).
    reply: Reply | None = None

    def waiting_frames(self) -> list[Frame]:
        """The frames kept in their own columns rather than the stack's: a goal's clarification, an open delegation,
        a permission question — in that order, on top of the stored ones."""
        frames: list[Frame] = []
        pending = (self.goal_state or {}).get("pending") if isinstance(self.goal_state, dict) else None
        if pending:
            read = pending.get("intent_output") or {}
            name = f"{read.get('primary_domain', '')}.{read.get('goal', '')}".strip(".")
            frames.append(Frame(kind=CLARIFICATION_FRAME, name=name, agent=GOAL_AGENT))
        if self.sub_conversation:
            specialist = str(self.sub_conversation.get("specialist", ""))
            frames.append(Frame(kind=DELEGATION, name=specialist, agent=specialist))
        if self.pending_permission:
            pending = self.pending_permission
            agent = str(pending.get("agent", ""))
            frames.append(Frame(kind=PERMISSION, name=str(pending.get("tool", "")), agent=agent))
        return frames

    def metadata(self, *, by: str) -> dict[str, Any]:
        """``metadata["conversation"]``: the frames open after the turn (bottom first; a delegation or a permission
        question on top), what the message did to them, the repair pattern it read as, the requests it held;
        no events when the message did nothing to them. A question asked or a delegation begun by this turn is
        ``opened`` like a state the turn set; one that was waiting and is gone with no event of its own (a delegation
        that moved to another specialist) is ``closed``; ``by`` is the intent (else the agent) that answered."""
        step = self.step
        waiting = self.waiting_frames()
        shown = [frame.as_dict() for frame in (*self.frames, *waiting)]
        told = step.as_metadata() if step is not None else {"events": [], "repair": None, "topics": []}
        events = list(told["events"])
        after = {(frame.kind, frame.name) for frame in waiting}
        for kind, name in self.found_waiting:  # ended by the turn (a delegation moved on) with no event of its own
            label = {"kind": kind, "name": name}
            if (kind, name) not in after and all(e["frame"] != label for e in events):
                events.append({"event": "closed", "frame": label, "by": by})
        for frame in waiting:
            label = frame.label()
            if (frame.kind, frame.name) not in self.found_waiting and all(e["frame"] != label for e in events):
                events.append({"event": "opened", "frame": label, "by": by})
        return {**told, "events": events, "stack": shown}
