"""What the platform's desk reads (docs/desk.md): the queues of some tenants in serving order with each waiting
conversation's place, the conversations a person holds, and one escalation's conversation as the person who takes
it reads it (the summary, the history with the people's replies and notes, the assistants' route decisions).

Selectors only; who may read which tenant is the faces' business (:mod:`chat.desk.access`): they pass the tenants.
Escalations sent to an external desk (a profile's ``escalation.desk``) are that desk's, and not listed here. Each
read is a fixed number of queries whatever the queues' length (the queues: one; the detail: three).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from conversations.desk.escalations import DESK_ROLES, desk_row, escalation_teams, message_public, queue_position
from conversations.memory.facts import facts_of
from conversations.models import (
    Escalation,
    EscalationPriority,
    EscalationReason,
    EscalationStatus,
    Message,
    RouteDecisionRecord,
)

QUEUE_ROWS_MAX = 500  # waiting conversations listed at most (the first served); the places of those listed stay right
MINE_ROWS_MAX = 200
HISTORY_MAX = 200  # the conversation's last messages shown
DECISIONS_MAX = 200

# What a row needs (conversations.desk.escalations.desk_row): the escalation's columns, the conversation's key, the
# profile's id.
ROW_FIELDS = (
    "id",
    "status",
    "team",
    "reason",
    "priority",
    "desk",
    "person",
    "tenant_id",
    "profile_id",
    "assigned_to_id",
    "created_at",
    "conversation__conversation_key",
    "profile__agent_id",
)
PRIORITIES = [{"value": choice.value, "label": str(choice.label)} for choice in EscalationPriority]
REASONS = {choice.value: str(choice.label) for choice in EscalationReason}


@dataclass(frozen=True)
class DeskTenant:
    """A tenant a desk serves: its id, slug and name."""

    id: int
    slug: str
    name: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "slug": self.slug, "name": self.name}


def _platform_rows(tenant_ids: Collection[int]) -> Any:
    return (
        Escalation.objects.filter(tenant_id__in=list(tenant_ids), desk="")
        .select_related("conversation", "profile")
        .only(*ROW_FIELDS)
    )


def desk_entry(
    escalation: Escalation, *, tenants: Mapping[int, DeskTenant], position: int | None = None
) -> dict[str, Any]:
    """The escalation's desk row (:func:`conversations.desk.escalations.desk_row`) with its tenant's ``slug`` (blank for
    a tenant not among ``tenants``); its conversation and profile loaded."""
    row = desk_row(escalation, escalation.conversation.conversation_key, position)
    row["tenant"] = tenants[escalation.tenant_id].slug if escalation.tenant_id in tenants else ""
    return row


def desk_queues(
    *, tenants: Mapping[int, DeskTenant], team: str = "", limit: int = QUEUE_ROWS_MAX
) -> list[dict[str, Any]]:
    """The conversations waiting in the queues of ``tenants`` (of ``team`` only, when given), first served first:
    higher priority, then first queued. Each is a desk row (:func:`conversations.desk.escalations.desk_row`) with its
    ``position`` in its queue (tenant, profile, team) and its tenant's ``slug``. One query."""
    rows = _platform_rows(tenants).filter(status=EscalationStatus.QUEUED)
    if team:
        rows = rows.filter(team=team)
    served: Counter[tuple[int, int, str]] = Counter()
    listed = []
    # Served in this order, each queue's rows among them in its own order: counting them gives the places.
    for escalation in rows.order_by("priority", "created_at", "id")[:limit]:
        queue = (escalation.tenant_id, escalation.profile_id, escalation.team)
        served[queue] += 1
        listed.append(desk_entry(escalation, tenants=tenants, position=served[queue]))
    return listed


def desk_mine(*, tenants: Mapping[int, DeskTenant], user_id: int, limit: int = MINE_ROWS_MAX) -> list[dict[str, Any]]:
    """The conversations the staff user ``user_id`` holds among ``tenants``' escalations, first taken first. One
    query."""
    rows = _platform_rows(tenants).filter(status=EscalationStatus.ASSIGNED, assigned_to_id=user_id)
    return [desk_entry(escalation, tenants=tenants) for escalation in rows.order_by("assigned_at", "id")[:limit]]


def desk_snapshot(*, tenants: Mapping[int, DeskTenant], user_id: int, team: str = "") -> dict[str, Any]:
    """What a desk shows when it opens: the tenants it serves, their queues (:func:`desk_queues`), the user's own
    conversations (:func:`desk_mine`), and the words of the reasons and priorities. Two queries."""
    return {
        "tenants": [tenant.as_json() for tenant in tenants.values()],
        "queues": desk_queues(tenants=tenants, team=team),
        "mine": desk_mine(tenants=tenants, user_id=user_id),
        "reasons": REASONS,
        "priorities": PRIORITIES,
    }


def escalation_detail(*, escalation: Escalation, tenants: Mapping[int, DeskTenant]) -> dict[str, Any]:
    """One escalation's conversation as the person who takes it reads it: the escalation (a desk row, with its place
    while it waits), why it came and its summary, the profile's teams (to transfer to), the conversation's last
    :data:`HISTORY_MAX` messages of the customer, the assistants and the people (replies and internal notes, each with
    its ``author``) and the assistants' route decisions, oldest first. ``escalation`` as
    :func:`conversations.desk.escalations.escalation_get` loads it (its conversation and profile), and what memory holds
    of the customer (:mod:`conversations.memory`: a cache read, one query when not cached). Three queries, four while it
    waits (its place)."""
    conversation = escalation.conversation
    messages = Message.objects.filter(conversation_id=conversation.pk, role__in=DESK_ROLES).order_by(
        "-created_at", "-id"
    )[:HISTORY_MAX]
    decisions = (
        RouteDecisionRecord.objects.filter(conversation_id=conversation.pk)
        .order_by("-created_at", "-id")
        .values("message_id", "agent", "intent", "method", "confidence", "reason", "created_at")[:DECISIONS_MAX]
    )
    return {
        "escalation": desk_entry(escalation, tenants=tenants, position=queue_position(escalation)),
        "reason_text": escalation.reason_text,
        "summary": escalation.summary,
        "language": escalation.language,
        "from_agent": escalation.from_agent,
        "intent": escalation.intent,
        "assigned_at": escalation.assigned_at.isoformat() if escalation.assigned_at else None,
        "ended_at": escalation.ended_at.isoformat() if escalation.ended_at else None,
        "conversation": {
            "key": conversation.conversation_key,
            "channel": conversation.channel,
            "state": conversation.state,
            "active_specialist": conversation.active_specialist,
        },
        "teams": list(escalation_teams(escalation)),
        # What the assistants remember beyond the history: the conversation's summary, the customer's facts.
        "memory": {
            "summary": conversation.memory_summary,
            "facts": [
                {"id": fact.id, "text": fact.text, "created_at": fact.created_at.isoformat()}
                for fact in facts_of(tenant_id=conversation.tenant_id, user_id=conversation.user_id)
            ],
        },
        "history": [message_public(message) for message in reversed(messages)],
        "decisions": [
            {**decision, "created_at": decision["created_at"].isoformat()} for decision in reversed(decisions)
        ],
    }
