"""Writes of the agent_handoffs table."""

from __future__ import annotations

from handoffs.models import Handoff, HandoffKind, HandoffStatus
from routing.models import Conversation


def handoff_record(
    *,
    conversation: Conversation,
    from_agent: str,
    to_agent: str,
    kind: str = HandoffKind.HANDOFF,
    reason: str = "",
    context_summary: str = "",
    status: str = HandoffStatus.COMPLETED,
) -> Handoff:
    """Record one move of ``conversation`` from ``from_agent`` to ``to_agent``.

    Call inside the transaction that persists the turn, so a handoff never
    exists without the messages that caused it.
    """
    return Handoff.objects.create(
        conversation=conversation,
        tenant_id=conversation.tenant_id,
        profile_id=conversation.profile_id,
        from_agent=from_agent,
        to_agent=to_agent,
        kind=kind,
        status=status,
        reason=reason,
        context_summary=context_summary,
    )
