"""A remote backend's part of a turn (docs/gateway.md): a message that answers the backend's question goes back to
it (:func:`backend_answer_claim`, a claim of the routing), and a move to, from or between backends is checked and
recorded as a handoff (:func:`backend_move`). The backend's state is :class:`conversations.gateway.TurnBackend`.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async

from conversations.gateway import handoff_summary
from conversations.turn import Turn
from conversations.turn_store import recent_paths
from handoffs.models import HandoffKind, HandoffStatus
from handoffs.public import Move, move_check
from routing.public import RouteDecision


async def backend_answer_claim(turn: Turn) -> RouteDecision | None:
    """The message answers the active remote backend's question (its task waits for input,
    :attr:`TurnBackend.task`): it goes to that backend, which continues its task; the conversation stays there (a
    claim of the routing, :mod:`conversations.stages`)."""
    backend = turn.route.active_agent
    if not turn.backend.task or backend not in turn.input.profile.backends:
        return None
    return RouteDecision(
        route=backend,
        agent=backend,
        intent=turn.route.active_intent,
        confidence=1.0,
        reason=f"{backend} asked the customer a question; this message answers it",
        method="state",
        keeps_conversation=True,
    )


async def backend_move(turn: Turn) -> None:
    """The answering side changes to, from or between remote backends: a ``backend_handoff`` with the decision's
    reason and a short summary of the conversation, checked by loop safety as agents' handoffs are (the
    conversation's recent backend moves count as its handoff paths); a local specialist taking the conversation
    back gets the summary as a system note (a backend gets it in ``context.gateway``)."""
    decision, limits = turn.decision, turn.input.profile.loop_safety
    assert decision is not None
    source, target = turn.route.active_agent, decision.agent
    summary = handoff_summary(turn.history)
    if turn.store.recent_paths is None:
        turn.store.recent_paths = await sync_to_async(recent_paths)(turn.store.conversation_pk, limits.window)
    stop = move_check(
        chain=[source],
        target=target,
        moves_this_turn=0,
        recent_paths=turn.store.recent_paths,
        steps_left=1,
        max_handoffs=limits.max_handoffs_per_turn,
        block_ping_pong=limits.block_ping_pong,
        window=limits.window,
        max_repeats=limits.max_repeats,
    )
    status = HandoffStatus.STOPPED if stop else HandoffStatus.COMPLETED
    turn.backend.move = Move(source, target, HandoffKind.BACKEND, status, decision.reason, summary, outcome=stop or "")
    if stop is None and target not in turn.input.profile.backends:
        turn.chain.notes.append(
            f"[SYSTEM_NOTE: the backend {source} handed this conversation back to you. Summary: {summary}]"
        )
