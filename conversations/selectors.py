"""Reads of the conversation store (the turn reads what it needs itself, see :mod:`conversations.graph`)."""

from __future__ import annotations

from typing import Any

from conversations.models import Conversation
from tenants.models import Tenant


def conversation_get_for_tenant(*, tenant: Tenant, conversation_key: str) -> Conversation | None:
    """The conversation if it belongs to ``tenant``; ``None`` otherwise (callers answer 404, not 403)."""
    return Conversation.objects.filter(tenant=tenant, conversation_key=conversation_key).first()


def conversation_messages(*, conversation: Conversation) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A conversation's messages and route decisions, oldest first, as the sessions API shows them."""
    messages = [
        {
            "id": message.pk,  # an answer's id is what POST /api/sessions/{key}/feedback rates
            "role": message.role,
            "agent": message.agent,
            "content": message.content,
            "step": message.step,
            "created_at": message.created_at,
            "metadata": message.metadata,
        }
        for message in conversation.messages.order_by("created_at", "id")
    ]
    decisions = [
        {
            "mode": decision.mode,
            "route": decision.route,
            "agent": decision.agent,
            "intent": decision.intent,
            "confidence": decision.confidence,
            "reason": decision.reason,
            "method": decision.method,
            "next_state": decision.next_state,
            "handoff": decision.handoff,
            "domain": decision.domain,
            "mcp_tools": decision.mcp_tools,
            "metadata": decision.metadata,
            "created_at": decision.created_at,
        }
        for decision in conversation.route_decisions.order_by("created_at", "id")
    ]
    return messages, decisions


def conversation_get(*, conversation_key: str) -> Conversation | None:
    """Any tenant's conversation (staff); tenants' callers use :func:`conversation_get_for_tenant`."""
    return Conversation.objects.filter(conversation_key=conversation_key).first()


def conversation_route_state(*, conversation_key: str) -> tuple[str, str]:
    """``(state, active_specialist)`` of the conversation, ``("", "")`` when it does not exist yet."""
    row = Conversation.objects.filter(conversation_key=conversation_key).values_list("state", "active_specialist")
    return row.first() or ("", "")


def conversation_goal_state(*, conversation_key: str) -> dict[str, Any] | None:
    """The conversation's goal state (goal mode's pending and last goal), ``None`` when it has none or does not
    exist yet."""
    return Conversation.objects.filter(conversation_key=conversation_key).values_list("goal_state", flat=True).first()
