"""Reads of the agent_handoffs table."""

from __future__ import annotations

import datetime as dt
from typing import Any

from handoffs.models import Handoff


def handoff_list_for_conversation(
    *, conversation_id: int, since: dt.datetime | None = None, until: dt.datetime | None = None
) -> list[dict[str, Any]]:
    """A conversation's handoffs, oldest first, as the sessions API shows them: those made after ``since`` and up to
    ``until`` (``None``: from the start, to the end), the span of a page of its messages."""
    rows = Handoff.objects.filter(conversation_id=conversation_id)
    if since is not None:
        rows = rows.filter(created_at__gt=since)
    if until is not None:
        rows = rows.filter(created_at__lte=until)
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
        for row in rows.order_by("created_at", "id")
    ]
