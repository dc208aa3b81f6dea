"""Where the conversation stands in the routing, for one turn: its state, active specialist and intent as the turn
found them (the conversation's columns, read with the ticket), and the intent that answered and the state the turn
leaves it in (written back by persist).

Read by the routing decision and written by the graph's nodes and :mod:`conversations.chain`; the turn holds one
(:attr:`conversations.turn.Turn.route`), beside the decision itself (``turn.decision``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TurnRoute:
    """The conversation's routing position before and after one turn."""

    state: str = ""
    active_agent: str = ""
    active_intent: str = ""
    final_intent: str = ""
    next_state: str = ""
