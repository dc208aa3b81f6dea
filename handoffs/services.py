"""Writes of the agent_handoffs table."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from handoffs.models import Handoff, HandoffKind, HandoffStatus
from routing.models import Conversation


@dataclass(frozen=True)
class Move:
    """One move of a turn between agents, before it is stored (see :func:`moves_record`)."""

    from_agent: str
    to_agent: str
    kind: str = HandoffKind.HANDOFF
    status: str = HandoffStatus.COMPLETED
    reason: str = ""
    context_summary: str = ""
    outcome: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {key: str(value) for key, value in asdict(self).items()}


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


def moves_record(*, conversation_id: int, tenant_id: int, profile_id: int, moves: list[Move]) -> list[Handoff]:
    """Record a turn's moves in one insert, in order (call inside the turn's transaction)."""
    return Handoff.objects.bulk_create(
        Handoff(conversation_id=conversation_id, tenant_id=tenant_id, profile_id=profile_id, **move.as_dict())
        for move in moves
    )
