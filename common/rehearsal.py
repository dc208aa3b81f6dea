"""A turn played as a rehearsal — a saved conversation test's — rather than for a customer.

What the turn writes to the database is the rehearsal's caller's to roll back (``releases.evals`` plays each test in
a transaction it rolls back). What would leave the process on the way is held back here, by the code that would
send it, while :func:`rehearsing` holds:

* operational events (``agent.completed``, ``handoff.completed``: :func:`common.infra.bus.publish_event`) are not
  published, and nothing is pushed to a desk or a conversation's sockets (``conversations.delivery``);
* a supervisor plan's specialists and a goal plan's tool calls run in this process, never on Celery workers (whose
  writes no rollback here would reach, and who would call the tools for real);
* the customer's facts read in the test's transaction are not cached (``conversations.memory.facts``): they may be
  the test's own, and the cache would hand them to the next test and to the tenant's customer of the same id;
* a tool whose answer the rehearsal recorded (``tool_answers``) is not called: its recorded answer is taken, its
  arguments checked as a real call's would be (``agents.mcp.tool_call``). Every tool call the turn makes is noted in
  :attr:`Rehearsal.calls`, with the arguments it was called with (the conversation store keeps them masked).

A context variable: the turn's tasks and the threads ``asgiref`` runs its database work in see the same rehearsal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCalled:
    """A tool call a rehearsed turn made: the tool, the arguments it was called with, its status, and whether the
    answer was the recorded one."""

    tool: str
    arguments: Mapping[str, Any]
    status: str
    recorded: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": dict(self.arguments), "status": self.status, "recorded": self.recorded}


@dataclass
class Rehearsal:
    """The rehearsal a turn runs in: the tools' recorded answers (tool → its result) and the calls made so far."""

    tool_answers: Mapping[str, Any] = field(default_factory=dict)
    calls: list[ToolCalled] = field(default_factory=list)


_current: ContextVar[Rehearsal | None] = ContextVar("rehearsal", default=None)


def rehearsal_current() -> Rehearsal | None:
    """The rehearsal the code runs in, or ``None`` for a customer's turn."""
    return _current.get()


@contextlib.contextmanager
def rehearsing(tool_answers: Mapping[str, Any] | None = None) -> Iterator[Rehearsal]:
    """Run the block as a rehearsal (see the module), with these recorded tool answers."""
    rehearsal = Rehearsal(tool_answers=dict(tool_answers or {}))
    token = _current.set(rehearsal)
    try:
        yield rehearsal
    finally:
        _current.reset(token)
