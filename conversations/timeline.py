"""A conversation as a reader follows it: turn by turn, what the customer wrote, how it was routed and why, what it
did to the conversation's open flows, who answered, which tools and remote backends were called, the moves between
agents, the answer and its rating.

A turn begins with a user message and holds the rows stored after it up to the next one (``conversations.records``
writes a turn's rows in that order): the route decision points at the user message, tool calls and remote
backend calls at the answer, a goal-mode run and a rating at the answer; moves between agents carry no message and
belong to the turn they were recorded in, by time. Read in a fixed number of queries whatever the length; a long
conversation shows its last :data:`TURNS_SHOWN` turns.
"""

from __future__ import annotations

import bisect
import datetime as dt
from dataclasses import dataclass, field

from django.db.models import Q

from conversations.models import (
    BackendCall,
    Conversation,
    GoalRun,
    Message,
    MessageFeedback,
    MessageRole,
    RouteDecisionRecord,
    ToolCall,
)
from handoffs.models import Handoff
from routing.public import StackExplained, stack_explained

TURNS_SHOWN = 50


@dataclass
class RatedAnswer:
    message: Message
    rating: MessageFeedback | None = None
    goal_run: GoalRun | None = None


@dataclass
class Turn:
    """One turn: ``question`` is ``None`` only for rows stored before the conversation's first user message."""

    question: Message | None
    number: int
    decision: RouteDecisionRecord | None = None
    notes: list[Message] = field(default_factory=list)  # results handed to the specialists (system messages)
    parts: list[Message] = field(default_factory=list)  # each specialist's part of a supervisor turn
    answers: list[RatedAnswer] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    backend_calls: list[BackendCall] = field(default_factory=list)
    handoffs: list[Handoff] = field(default_factory=list)

    @property
    def started_at(self) -> dt.datetime | None:
        return self.question.created_at if self.question else None

    @property
    def stack(self) -> StackExplained | None:
        """What the message did to the conversation's open flows, from its answer's ``metadata["conversation"]``;
        ``None`` when it was not routed with them (goal mode, a reply to a permission question, older turns)."""
        for answer in reversed(self.answers):
            metadata = answer.message.metadata
            if isinstance(metadata, dict) and "conversation" in metadata:
                return stack_explained(metadata["conversation"])
        return None


@dataclass(frozen=True)
class Timeline:
    turns: list[Turn]
    total_turns: int  # user messages in the conversation; more than ``len(turns)`` when the oldest are left out

    @property
    def turns_left_out(self) -> int:
        return max(0, self.total_turns - sum(1 for turn in self.turns if turn.question is not None))


def conversation_timeline(*, conversation: Conversation, turns: int = TURNS_SHOWN) -> Timeline:
    """The conversation's last ``turns`` turns, oldest first, each with its rows (:class:`Turn`). Nine queries."""
    questions = Message.objects.filter(conversation=conversation, role=MessageRole.USER)
    total = questions.count()
    # The oldest user message shown: rows stored before it belong to turns left out.
    since = questions.order_by("-created_at", "-id").values_list("created_at", flat=True)[turns - 1 : turns].first()
    recent = Q() if since is None else Q(created_at__gte=since)

    shown: list[Turn] = []
    turn_of: dict[int, Turn] = {}  # message id -> its turn
    for message in Message.objects.filter(recent, conversation=conversation).order_by("created_at", "id"):
        if message.role == MessageRole.USER or not shown:
            shown.append(Turn(question=message if message.role == MessageRole.USER else None, number=0))
        turn = shown[-1]
        turn_of[message.pk] = turn
        if message.role == MessageRole.SYSTEM:
            turn.notes.append(message)
        elif message.role == MessageRole.AGENT:
            turn.parts.append(message)
        elif message.role == MessageRole.ASSISTANT:
            turn.answers.append(RatedAnswer(message))
    asked = [turn for turn in shown if turn.question is not None]
    for number, turn in enumerate(asked, start=total - len(asked) + 1):
        turn.number = number

    starts = [turn.started_at or dt.datetime.min.replace(tzinfo=dt.UTC) for turn in shown]

    def by_time(when: dt.datetime) -> Turn | None:
        """The turn under way at ``when``: the last one begun by then (the first, for a row older than all)."""
        return shown[max(bisect.bisect_right(starts, when) - 1, 0)] if shown else None

    def owner(message_id: int | None, when: dt.datetime) -> Turn | None:
        turn = turn_of.get(message_id) if message_id is not None else None
        return turn or by_time(when)

    for decision in RouteDecisionRecord.objects.filter(recent, conversation=conversation).order_by("created_at", "id"):
        decided_in = owner(decision.message_id, decision.created_at)
        if decided_in is not None and decided_in.decision is None:
            decided_in.decision = decision
    for call in ToolCall.objects.filter(recent, conversation=conversation).order_by("created_at", "id"):
        if (called_in := owner(call.message_id, call.created_at)) is not None:
            called_in.tool_calls.append(call)
    for hop in BackendCall.objects.filter(recent, conversation=conversation).order_by("created_at", "id"):
        if (called_in := owner(hop.message_id, hop.created_at)) is not None:
            called_in.backend_calls.append(hop)
    for move in Handoff.objects.filter(recent, conversation=conversation).order_by("created_at", "id"):
        if (moved_in := by_time(move.created_at)) is not None:
            moved_in.handoffs.append(move)

    answers = {answer.message.pk: answer for turn in shown for answer in turn.answers}
    for rating in MessageFeedback.objects.filter(message_id__in=answers):
        answers[rating.message_id].rating = rating
    for run in GoalRun.objects.filter(message_id__in=answers):
        answers[run.message_id].goal_run = run
    return Timeline(turns=shown, total_turns=total)
