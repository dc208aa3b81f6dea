"""What persisting a turn reads and writes: the turn's place in its conversation (the ticket, :mod:`.ordering`), the
ids of the messages it stored and the metadata stored with the answer, and what the conversation's columns and the
analytics' daily totals knew of the conversation when the turn began.

Read and written by :mod:`conversations.turn_store`; the turn holds one (:attr:`conversations.turn.Turn.store`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any


@dataclass
class TurnStore:
    """The conversation's row as one turn found it, and what persisting the turn stored."""

    conversation_pk: int = 0  # set when the turn takes its ticket
    ticket: int = 0
    ready: bool = False  # its ticket's turn had come when it was taken (the conversation was read with it)
    user_message_id: int | None = None  # the stored customer message (set by persist)
    answer_message_id: int | None = None  # the stored answer's id, set by persist (what feedback names)
    metadata: dict[str, Any] | None = None  # the answer's metadata as persist stored it
    state: str | None = None  # the conversation's state as persist left it (None: not stored)
    fallbacks_in_row: int = 0  # the conversation's fallback answers in a row, this turn's counted
    fallbacks_before: int = 0  # ... as the turn found it (the column is written only when it changes)
    outcome_was: str = ""  # the conversation's outcome when the turn began (OPEN: still open)
    recent_paths: list[tuple[str, str]] | None = None  # read when the first move of the turn is checked
    # What the analytics' daily totals know of the conversation (see conversations.turn_store.turn_persist).
    cohort: str = ""
    rollout: dict[str, Any] | None = None  # a running rollout plan's {plan, cohort} for this conversation
    handoff_kinds: int = 0
    conversation_created_at: dt.datetime | None = None
    message_count: int = 0  # the conversation's messages when the turn began (0: the turn is its first)
