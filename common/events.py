"""Events of a turn as it happens, for clients that stream (WebSocket, SSE).

A turn takes an optional ``emit(event_type, data)`` coroutine function; the
graph and the specialist runtime call it at each step. Nothing else changes:
without ``emit`` a turn runs exactly as before. An emitter that fails (a
client gone) never breaks the turn: the turn still finishes and persists.

Event types, in the order a client sees them:

* ``route`` — the routing decision (``mode``, ``route``, ``agent``, ``intent``, ``method``, ``reason``);
* ``agent`` — a specialist starts answering (``agent``, ``display_name``, ``via``: ``route``, ``handoff``,
  ``delegation``, ``return`` or ``supervisor``);
* ``handoff`` — a move between agents, as stored in ``agent_handoffs``;
* ``tool_call`` — an MCP tool call ``started``, its server's ``progress`` notifications as they come (``progress``,
  ``total`` or ``None``, ``message``; at most ``agents.mcp.PROGRESS_MAX`` a call), then ``finished`` (``tool``,
  ``server``, ``status``, ``latency_ms``);
* ``token`` — answer text as the model writes it (``agent``, ``text``); provisional: output guardrails,
  judges and review may change the final answer;
* ``discard`` — the text streamed by ``agent`` since its last ``agent`` event is not part of the answer
  (it moved the conversation instead of answering);
* ``partial`` — a supervisor plan's specialist finished (``agent``, ``status``, ``answer``);
* ``goal`` — goal mode: ``phase`` ``decided`` (``status``, ``intent_output``, ``plan``, ``clarification``), then
  ``finished`` (``status``) once the plan has run;
* ``plan_step`` — goal mode: a plan step ``started``, then ``success``, ``failure``, ``skipped`` or
  ``clarification`` (``id``, ``capability``, ``domain``, ``explanation``, ``latency_ms``);
* ``escalation`` — the conversation is with people (docs/desk.md): handed to a person by this turn, or a message of a
  conversation a person holds (``id``, ``status``, ``queue``, ``position``, ``reason``, ``priority``, ``desk``,
  ``person``);
* ``done`` — the final answer with its metadata, exactly what the JSON API answers (sent by the transport).

Outside a turn, a conversation's sockets and event stream also receive what people do (the transport's
``human`` and ``escalation`` events: docs/desk.md).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

logger = logging.getLogger(__name__)

Emit = Callable[[str, dict[str, Any]], Awaitable[None]]


async def emit_safely(emit: Emit | None, event: str, data: dict[str, Any]) -> None:
    """Call ``emit`` if there is one; a failing client never breaks the turn."""
    if emit is None:
        return
    try:
        await emit(event, data)
    except Exception as exc:  # noqa: BLE001 — the turn goes on and persists whatever the client does
        logger.info("Event %s not delivered: %s", event, exc)
