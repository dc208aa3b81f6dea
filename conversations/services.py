"""Writes of the conversation store outside a turn: ending or clearing a session."""

from __future__ import annotations

import datetime as dt
from typing import TypedDict

from django.db import transaction
from django.db.models.functions import Trunc
from django.utils import timezone

from conversations.models import Conversation, Message, RouteDecisionRecord, ToolCall
from conversations.outcomes import outcome_on_end
from conversations.signals import store_rows_deleted
from handoffs.models import Handoff

# The conversation's live state: what the next message would continue. Turn tickets are not part of it: a turn
# may be queued or running while the session is ended, and the ordering still has to serve it.
LIVE_STATE_RESET = {
    "state": "",
    "active_specialist": "",
    "active_intent": "",
    "backend_task": "",
    "sub_conversation": None,
    "pending_result": None,
    "pending_permission": None,
}


class ClearedCounts(TypedDict):
    messages: int
    route_decisions: int
    tool_calls: int


def _locked(conversation: Conversation) -> Conversation:
    """The conversation's row, locked until the surrounding transaction ends.

    Raises :class:`Conversation.DoesNotExist` if the row went away since it was read.
    """
    return Conversation.objects.select_for_update().get(pk=conversation.pk)


@transaction.atomic
def session_end(*, conversation: Conversation) -> Conversation:
    """End the session: forget its live state (state, active specialist and intent, an open
    sub-conversation, a pending result or permission, granted permissions) and stamp ``ended_at``.

    An open conversation's outcome is decided at once (resolved or abandoned, :func:`conversations.outcomes.
    outcome_on_end`: the same rules as an idle one's, read before the live state is forgotten), and a person who
    held it lets it go. The history (messages, route decisions, tool calls, handoffs) is kept; the next message in
    the session starts fresh on the same row (and opens a closed conversation again). Returns the updated
    conversation.
    """
    locked = _locked(conversation)
    locked.outcome = outcome_on_end(conversation=locked)
    for field, value in LIVE_STATE_RESET.items():
        setattr(locked, field, value)
    locked.granted_permissions = []
    locked.escalation = None
    locked.ended_at = timezone.now()
    # The next session starts without the summary too; its own waits for as many messages as a first one.
    locked.memory_summary, locked.memory_summary_at_count = "", locked.message_count
    memory = ["memory_summary", "memory_summary_at_count"]
    locked.save(update_fields=[*LIVE_STATE_RESET, "granted_permissions", "ended_at", *memory, "updated_at"])
    return locked


def _hours_written(conversation: Conversation) -> set:
    """The UTC hours (their starts) in which the conversation's messages, route decisions and tool calls were
    written."""
    hours: set = set()
    for model in (Message, RouteDecisionRecord, ToolCall):
        rows = model.objects.filter(conversation=conversation).order_by()
        written = rows.annotate(hour=Trunc("created_at", "hour", tzinfo=dt.UTC))
        hours.update(written.values_list("hour", flat=True).distinct())
    return hours


@transaction.atomic
def session_clear(*, conversation: Conversation) -> ClearedCounts:
    """Clear the session's history: delete its messages, route decisions and tool calls, set the
    message count to 0 and blank the context summary of its handoffs.

    Handoff rows stay (the analytics count them), but their summaries may quote the user. The live
    state is left alone (that is :func:`session_end`). Returns how many rows of each kind were deleted.
    """
    locked = _locked(conversation)
    # Totals of the days (or hours) these rows were written in go stale (the analytics listen).
    store_rows_deleted.send(sender=Conversation, hours=_hours_written(locked))
    # Decisions and tool calls first: both also cascade from their message, which would fold them into its count.
    _, tool_calls = ToolCall.objects.filter(conversation=locked).delete()
    _, route_decisions = RouteDecisionRecord.objects.filter(conversation=locked).delete()
    _, messages = Message.objects.filter(conversation=locked).delete()
    Handoff.objects.filter(conversation=locked).exclude(context_summary="").update(context_summary="")
    locked.message_count = 0
    # The summary quotes the messages cleared.
    locked.memory_summary, locked.memory_summary_through, locked.memory_summary_at_count = "", 0, 0
    memory = ["memory_summary", "memory_summary_through", "memory_summary_at_count"]
    locked.save(update_fields=["message_count", *memory, "updated_at"])
    return {
        "messages": messages.get(Message._meta.label, 0),
        "route_decisions": route_decisions.get(RouteDecisionRecord._meta.label, 0),
        "tool_calls": tool_calls.get(ToolCall._meta.label, 0),
    }
