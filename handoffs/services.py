"""Writes of the agent_handoffs table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from handoffs.models import Handoff, HandoffKind, HandoffStatus, kinds_mask


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

    def as_dict(self) -> dict[str, str]:
        # Written out rather than dataclasses.asdict: a turn calls it per move, the bench generator a million times.
        return {
            "from_agent": str(self.from_agent),
            "to_agent": str(self.to_agent),
            "kind": str(self.kind),
            "status": str(self.status),
            "reason": str(self.reason),
            "context_summary": str(self.context_summary),
            "outcome": str(self.outcome),
        }


def moves_kinds(moves: Iterable[Move]) -> int:
    """The :data:`~handoffs.models.KIND_BITS` of the moves that happened, for ``Conversation.handoff_kinds``."""
    return kinds_mask(move.kind for move in moves if move.status == HandoffStatus.COMPLETED)


def handoff_rows(
    *,
    conversation_id: int,
    tenant_id: int,
    profile_id: int,
    moves: Iterable[Move],
    cohort: str = "",
    routing_version: int | None = None,
) -> list[Handoff]:
    """The ``agent_handoffs`` rows of a turn's moves, in order, unsaved. ``cohort``: the turn's rollout cohort;
    ``routing_version``: the published version that served it."""
    return [
        Handoff(
            conversation_id=conversation_id,
            tenant_id=tenant_id,
            profile_id=profile_id,
            cohort=cohort,
            routing_version=routing_version,
            **move.as_dict(),
        )
        for move in moves
    ]


def moves_record(
    *, conversation_id: int, tenant_id: int, profile_id: int, moves: Iterable[Move], cohort: str = ""
) -> list[Handoff]:
    """Record a turn's moves in one insert, in order (call inside the turn's transaction, which also adds
    :func:`moves_kinds` to the conversation's ``handoff_kinds``). ``cohort``: the turn's rollout cohort."""
    rows = handoff_rows(
        conversation_id=conversation_id, tenant_id=tenant_id, profile_id=profile_id, moves=moves, cohort=cohort
    )
    return Handoff.objects.bulk_create(rows)
