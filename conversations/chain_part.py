"""The specialist chain's part of one turn: the context and the notes the chain starts from, the specialists that
ran and the moves between them, the answering specialist's outcome and the tools it was offered.

Read and written by :mod:`conversations.chain` and the graph's ``specialist`` node; the turn holds one
(:attr:`conversations.turn.Turn.chain`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conversations.runtime import SpecialistOutcome
from handoffs.public import Move


@dataclass
class TurnChain:
    """What the chain of specialists was given and did in one turn."""

    context: dict[str, Any] = field(default_factory=dict)  # the message's context, as the moves change it
    notes: list[str] = field(default_factory=list)  # system notes for the first specialist of the chain
    stored_notes: list[tuple[str, str]] = field(default_factory=list)  # (agent, note) kept as system messages
    runs: list[tuple[str, SpecialistOutcome]] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    outcome: SpecialistOutcome | None = None  # the answering specialist's
    offered_tools: list[str] = field(default_factory=list)
