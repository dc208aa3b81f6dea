"""Writes of the agent_handoffs table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import F

from analytics.services import conversation_counted_again
from handoffs.models import KIND_BITS, Handoff, HandoffKind, HandoffStatus, kinds_mask
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
    handoff = Handoff.objects.create(
        conversation=conversation,
        tenant_id=conversation.tenant_id,
        profile_id=conversation.profile_id,
        cohort=conversation.cohort,
        from_agent=from_agent,
        to_agent=to_agent,
        kind=kind,
        status=status,
        reason=reason,
        context_summary=context_summary,
    )
    bit = KIND_BITS[kind]
    if status == HandoffStatus.COMPLETED and not conversation.handoff_kinds & bit:
        conversation.handoff_kinds |= bit
        Conversation.objects.filter(pk=conversation.pk).update(handoff_kinds=F("handoff_kinds").bitor(bit))
        conversation_counted_again(conversation.created_at)
    return handoff


def moves_kinds(moves: Iterable[Move]) -> int:
    """The :data:`~handoffs.models.KIND_BITS` of the moves that happened, for ``Conversation.handoff_kinds``."""
    return kinds_mask(move.kind for move in moves if move.status == HandoffStatus.COMPLETED)


def moves_record(
    *, conversation_id: int, tenant_id: int, profile_id: int, moves: list[Move], cohort: str = ""
) -> list[Handoff]:
    """Record a turn's moves in one insert, in order (call inside the turn's transaction, which also adds
    :func:`moves_kinds` to the conversation's ``handoff_kinds``). ``cohort``: the turn's rollout cohort."""
    return Handoff.objects.bulk_create(
        Handoff(
            conversation_id=conversation_id, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, **move.as_dict()
        )
        for move in moves
    )
