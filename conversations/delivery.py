"""Pushes to whoever watches a conversation or a desk, through the Channels layer (docs/desk.md).

Two kinds of group:

* :func:`conversation_group` — the conversation's customer sockets (``/ws/chat/…``) and event streams
  (``GET /api/sessions/{conversation_key}/events``): a person's reply, the escalation taken, handed back;
* :func:`desk_group` — the desks of one tenant (``/ws/desk/``): a conversation queued, taken, transferred, handed
  back, and the customer's messages while a person holds it.

A push is ``{"type": <handler>, "event": {...}}``: :data:`CONVERSATION_EVENT` for the customer's side,
:data:`DESK_EVENT` for the desk's. With ``REDIS_URL`` the layer is Redis (channels_redis) and a push reaches every
process; the embedded default's in-memory layer reaches the process it is sent from, which is all there is.

What a push carries is stored before it is sent (a message, an escalation's state), so a client that missed it —
a socket that was closed, a layer that was down — reads it from the sessions API; a push that fails is logged and
dropped, never raised to the person or the customer who caused it. Clients tell a repeated push by the message's id.
Sync callers push after their transaction commits (:func:`push_on_commit`).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from common.infra.circuit import Circuit
from common.rehearsal import rehearsal_current

logger = logging.getLogger(__name__)

# The layer's Redis as the pushes see it (senders here, listeners in chat.pushes): an outage logged once, pushes
# skipped while it lasts (what they carry is stored).
layer_circuit = Circuit(
    "Redis (the conversations' and desks' pushes)", pause=settings.REDIS_OUTAGE_PAUSE_SECONDS, logger=logger
)

CONVERSATION_EVENT = "conversation.event"  # a consumer's ``conversation_event`` handler
DESK_EVENT = "desk.event"  # a consumer's ``desk_event`` handler


def conversation_group(conversation_key: str) -> str:
    """The group of a conversation's watchers: a digest of its key (a group name is short ASCII; a key may hold
    anything a client sent as its session id)."""
    return "conversation." + hashlib.sha256(conversation_key.encode()).hexdigest()[:40]


def desk_group(tenant_id: int) -> str:
    """The group of one tenant's desks."""
    return f"desk.{tenant_id}"


async def push(group: str, handler: str, event: dict[str, Any]) -> None:
    """Send ``event`` to ``group``'s members (their ``handler``); a layer that fails is logged, never raised. Nothing
    of a conversation test's turn (:mod:`common.rehearsal`) is sent."""
    layer = get_channel_layer()
    if layer is None or not layer_circuit.allows() or rehearsal_current() is not None:
        return
    try:
        await layer.group_send(group, {"type": handler, "event": event})
    except Exception as exc:  # noqa: BLE001 — what was pushed is stored; the push is best effort
        layer_circuit.failed(exc)
        return
    layer_circuit.succeeded()


def push_now(group: str, handler: str, event: dict[str, Any]) -> None:
    """:func:`push` from sync code (a view, a service, a Celery task)."""
    async_to_sync(push)(group, handler, event)


def push_on_commit(group: str, handler: str, event: dict[str, Any]) -> None:
    """:func:`push_now` once the current transaction commits (at once outside one): nobody is told of what may still
    roll back."""
    transaction.on_commit(lambda: push_now(group, handler, event))
