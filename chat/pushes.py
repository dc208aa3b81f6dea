"""A conversation's pushes as its customer-side faces receive them: the WebSocket chat and the events stream
(docs/desk.md). What people do — a reply, the escalation taken, transferred, handed back — is pushed to the
conversation's group (:mod:`conversations.delivery`); :func:`conversation_listen` receives it on a channel of this
process's layer, and :func:`pushed_event` says how a face shows it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.layers import get_channel_layer

from conversations.delivery import layer_circuit

logger = logging.getLogger(__name__)

# What a socket or stream of a conversation is told of what people do (conversations.delivery's events): a person's
# message, and the escalation's changes.
PUSHED_TYPES = {"message": "human", "escalation": "escalation"}
LISTEN_READY_SECONDS = 2.0  # how long a socket's opening waits for its group before it reads frames anyway
LISTEN_RETRY_SECONDS = (0.5, 10.0)  # the pause after a layer failure: doubling, up to the second
GROUP_RENEW_SECONDS = 3600.0  # a group membership expires (channels_redis: a day): renewed while the socket lives


def pushed_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """A conversation's push (:mod:`conversations.delivery`) as its sockets and streams send it, or ``None`` for a
    kind they do not show."""
    kind = PUSHED_TYPES.get(str(event.get("kind")))
    if kind is None:
        return None
    return {"type": kind, **{key: value for key, value in event.items() if key != "kind"}}


async def conversation_listen(
    group: str, deliver: Any, *, ready: asyncio.Event | None = None, gone: Any = lambda: False
) -> None:
    """Receive a conversation's pushes on a channel of this process's layer and hand each to ``deliver``, until
    cancelled (or ``gone()``). A layer that fails (Redis down) is retried with a growing pause; ``ready`` is set
    once the group is joined (or the first try failed). The ChatConsumer's own layer handling is not used: a
    Channels consumer whose layer fails closes, and a chat must not die with Redis."""
    layer = get_channel_layer()
    if layer is None:
        if ready is not None:
            ready.set()
        return
    pause = LISTEN_RETRY_SECONDS[0]
    while not gone():
        channel = None
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
            if ready is not None:
                ready.set()
            layer_circuit.succeeded()
            pause = LISTEN_RETRY_SECONDS[0]
            renew = asyncio.get_running_loop().time() + GROUP_RENEW_SECONDS
            while not gone():
                try:
                    message = await asyncio.wait_for(layer.receive(channel), timeout=GROUP_RENEW_SECONDS)
                except TimeoutError:
                    message = None
                if asyncio.get_running_loop().time() >= renew:
                    await layer.group_add(group, channel)
                    renew = asyncio.get_running_loop().time() + GROUP_RENEW_SECONDS
                if message is not None:
                    await deliver(message.get("event") or {})
        except asyncio.CancelledError:
            if channel is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(layer.group_discard(group, channel), timeout=1.0)
            raise
        except Exception as exc:  # noqa: BLE001 — the chat goes on without pushes; retried
            layer_circuit.failed(exc)  # logged once per outage
            if ready is not None:
                ready.set()
            await asyncio.sleep(pause)
            pause = min(pause * 2, LISTEN_RETRY_SECONDS[1])
