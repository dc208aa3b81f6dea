"""Reads of the agent_handoffs table."""

from __future__ import annotations

from typing import Any

from handoffs.models import Handoff


def handoff_list_for_conversation(*, conversation_id: int) -> list[dict[str, Any]]:
    """A conversation's handoffs, oldest first, as the sessions API shows them."""
    return [
        {
            "from_agent": row.from_agent,
            "to_agent": row.to_agent,
            "kind": row.kind,
            "status": row.status,
            "reason": row.reason,
            "context_summary": row.context_summary,
            "outcome": row.outcome,
            "created_at": row.created_at,
        }
        for row in Handoff.objects.filter(conversation_id=conversation_id).order_by("created_at", "id")
    ]
