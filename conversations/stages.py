"""A turn's stages: the features that may take a message before its routing and act once it is answered and stored.

The routing graph (:mod:`conversations.graph`) runs the same nodes for every message. The features that step in
around them are stages: each one a :class:`Stage` with its hooks, registered in :data:`STAGES` in the order they run,
as the chain's moves are (:data:`conversations.chain.MOVES`). A feature's state is its own typed part of the turn
(:class:`conversations.turn.Turn`: ``memory``, ``stack``, ``backend``, ``goal``); a new feature adds its part, its
module with its hooks, and a line here — no other feature's file.

- ``claim``: at the start of the routing, in order; the first stage that returns a decision decides the message and
  the profile's routing does not run (the customer's memory command, the reply to a permission question, the answer
  to a remote backend's question, goal mode's plan). A stage may do work of its own there and claim nothing (memory
  starts the summary's rewrite).
- ``settle``: once the answer is final, before the turn is stored (memory waits for the summary's rewrite).
- ``stored``: in the database thread, once the turn's rows are written and the customer's message has its id
  (memory keeps and forgets facts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from conversations.backend_turn import backend_answer_claim
from conversations.goals.turn import goal_claim
from conversations.memory.stage import memory_begin, memory_persist, memory_settle
from conversations.stack_turn import permission_claim
from conversations.turn import Turn
from routing.public import RouteDecision


@dataclass(frozen=True)
class Stage:
    """A feature's hooks in a turn (each optional; see the module)."""

    name: str
    claim: Callable[[Turn], Awaitable[RouteDecision | None]] | None = None
    settle: Callable[[Turn], Awaitable[None]] | None = None
    stored: Callable[[Turn], None] | None = None


STAGES: tuple[Stage, ...] = (
    Stage("memory", claim=memory_begin, settle=memory_settle, stored=memory_persist),
    Stage("permission", claim=permission_claim),
    Stage("backend", claim=backend_answer_claim),
    Stage("goal", claim=goal_claim),
)


async def stages_claim(turn: Turn) -> RouteDecision | None:
    """The decision of the first stage that claims the message, in :data:`STAGES`' order; ``None``: the routing's."""
    for stage in STAGES:
        if stage.claim is not None and (decision := await stage.claim(turn)) is not None:
            return decision
    return None


async def stages_settle(turn: Turn) -> None:
    """Every stage's ``settle``, in order."""
    for stage in STAGES:
        if stage.settle is not None:
            await stage.settle(turn)


def stages_stored(turn: Turn) -> None:
    """Every stage's ``stored``, in order (the database thread's)."""
    for stage in STAGES:
        if stage.stored is not None:
            stage.stored(turn)
