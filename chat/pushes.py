"""Pushes as the faces receive them (docs/desk.md): what people do — a reply, the escalation taken, transferred,
handed back — is pushed to the conversation's group, and every change of a tenant's queues to its desks' group
(:mod:`conversations.delivery`). :func:`group_listen` receives a socket's or stream's groups on one channel of this
process's layer and survives a layer that fails (the customer's WebSocket chat and events stream through
:func:`conversation_listen`, the desk socket with its tenants' groups); :func:`pushed_event` says how a customer's
face shows a conversation's push."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from channels.layers import get_channel_layer

from conversations.public import layer_circuit

logger = logging.getLogger(__name__)

# What a socket or stream of a conversation is told of what people do (conversations.delivery's events): a person's
# message, and the escalation's changes.
PUSHED_TYPES = {"message": "human", "escalation": "escalation"}
LISTEN_READY_SECONDS = 2.0  # how long a socket's opening waits for its group before it reads frames anyway
LISTEN_RETRY_SECONDS = (0.5, 10.0)  # the pause after a layer failure: doubling, up to the second
LISTEN_LEAVE_SECONDS = 2.0  # how long a closing socket waits for its listener to leave its groups
GROUP_RENEW_SECONDS = 3600.0  # a group membership expires (channels_redis: a day): renewed while the socket lives


def pushed_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """A conversation's push (:mod:`conversations.delivery`) as its sockets and streams send it, or ``None`` for a
    kind they do not show."""
    kind = PUSHED_TYPES.get(str(event.get("kind")))
    if kind is None:
        return None
    return {"type": kind, **{key: value for key, value in event.items() if key != "kind"}}


async def group_listen(
    groups: Sequence[str], deliver: Any, *, ready: asyncio.Event | None = None, gone: Any = lambda: False
) -> None:
    """Receive the pushes of ``groups`` on one channel of this process's layer and hand each push's event to
    ``deliver``, until cancelled (or ``gone()``). A layer that fails (Redis down) is retried with a growing pause, the
    groups joined again; ``ready`` is set once every group is joined (or the first try failed). The consumers' own
    layer handling is not used: a Channels consumer whose layer fails closes, and a chat or a desk must not die with
    Redis. Memberships are renewed while the listener lives (they expire)."""
    layer = get_channel_layer()
    if layer is None or not groups:
        if ready is not None:
            ready.set()
        return
    pause = LISTEN_RETRY_SECONDS[0]
    while not gone():
        channel = None
        try:
            channel = await layer.new_channel()
            for group in groups:
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
                    for group in groups:
                        await layer.group_add(group, channel)
                    renew = asyncio.get_running_loop().time() + GROUP_RENEW_SECONDS
                if message is not None:
                    await deliver(message.get("event") or {})
        except asyncio.CancelledError:
            if channel is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(_discard(layer, groups, channel), timeout=1.0)
            raise
        except Exception as exc:  # noqa: BLE001 — the socket goes on without pushes; retried
            layer_circuit.failed(exc)  # logged once per outage
            if ready is not None:
                ready.set()
            await asyncio.sleep(pause)
            pause = min(pause * 2, LISTEN_RETRY_SECONDS[1])


async def listen_stop(listener: asyncio.Task | None) -> None:
    """Stop a listener (:func:`group_listen`'s task) and wait for it to leave its groups (at most
    :data:`LISTEN_LEAVE_SECONDS`): the socket that started it ends after it, not while it talks to the layer."""
    if listener is None:
        return
    listener.cancel()
    await asyncio.wait([listener], timeout=LISTEN_LEAVE_SECONDS)


async def _discard(layer: Any, groups: Sequence[str], channel: str) -> None:
    for group in groups:
        await layer.group_discard(group, channel)


async def conversation_listen(
    group: str, deliver: Any, *, ready: asyncio.Event | None = None, gone: Any = lambda: False
) -> None:
    """A conversation's pushes (its one group) for its chat socket or event stream: :func:`group_listen`."""
    await group_listen((group,), deliver, ready=ready, gone=gone)
