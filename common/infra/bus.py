"""Operational events (``agent.completed``, ``handoff.completed``, ``rollout.rolled_back``, ``backend.down`` …)
for other systems: one envelope, delivered off the request path (docs/events.md).

:func:`publish_event` builds the envelope ``{id, type, time, tenant, profile, conversation_key, data}`` and hands
it to one background thread per process, which runs its own event loop and delivers it

* to the Channels layer (``EVENTS_CHANNEL_LAYER``, on by default when ``REDIS_URL`` is set): groups ``events``
  and ``events.<tenant>``, in order, as messages ``{"type": "platform.events", "events": [<envelope>, …]}`` — the
  events of a 50 ms window in one message per group (the ``/ws/events`` socket sends them on one by one). While
  the layer's Redis cannot be reached its copies are dropped, Redis skipped for ``REDIS_OUTAGE_PAUSE_SECONDS``
  after each failure (a :class:`common.infra.circuit.Circuit`, which logs the outage once and its end once);
* to ``EVENTS_WEBHOOK_URL`` when set: the JSON body, signed with ``EVENTS_WEBHOOK_SECRET`` —
  ``X-Platform-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`` with ``X-Platform-Timestamp`` —
  retried ``EVENTS_WEBHOOK_RETRIES`` times with a growing pause, then logged and dropped.

Publishing costs the caller a few microseconds and never raises: a slow or failing receiver never delays or
breaks a turn. Events are at most once: a process that stops drops what it had not delivered. Data carries no
customer text. Kernel module: imports no app.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from common.infra.cache import REDIS_DOWN
from common.infra.circuit import Circuit
from common.outbound import origin_entry, outbound_async_client
from common.rehearsal import rehearsal_current

logger = logging.getLogger(__name__)

EVENTS_GROUP = "events"
CHANNEL_MESSAGE_TYPE = "platform.events"  # a consumer's ``platform_events`` handler receives ``events``
SIGNATURE_HEADER = "X-Platform-Signature"
TIMESTAMP_HEADER = "X-Platform-Timestamp"
EVENT_HEADER = "X-Platform-Event"
EVENT_ID_HEADER = "X-Platform-Event-Id"


def tenant_group(tenant: str) -> str:
    """The Channels group of one tenant's events."""
    return f"{EVENTS_GROUP}.{tenant}"


def hmac_signature(secret: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256 of body>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def event_signature(secret: str, timestamp: str, body: bytes) -> str:
    """The webhooks' signature: over ``<timestamp>.<body>``, so that a replayed body with a new time fails."""
    return hmac_signature(secret, timestamp.encode() + b"." + body)


def signed_headers(
    secret: str, body: bytes, *, event: str, event_id: str = "", timestamp: str | None = None
) -> dict[str, str]:
    """The headers of one signed post — the operational events', the external desks' and the rollout plans' alike,
    each with its own secret: ``X-Platform-Event`` (its type), ``X-Platform-Event-Id`` when it has one,
    ``X-Platform-Timestamp`` (Unix seconds, now unless given) and ``X-Platform-Signature``
    (:func:`event_signature`). A receiver checks one recipe for all three (docs/events.md)."""
    timestamp = timestamp or str(int(time.time()))
    headers = {"Content-Type": "application/json", EVENT_HEADER: event}
    if event_id:
        headers[EVENT_ID_HEADER] = event_id
    headers.update({TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: event_signature(secret, timestamp, body)})
    return headers


def event_envelope(
    event_type: str, data: Mapping[str, Any], *, tenant: str, profile: str = "", conversation_key: str = ""
) -> dict[str, Any]:
    return {
        "id": uuid.uuid4().hex,
        "type": event_type,
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
        "tenant": tenant,
        "profile": profile,
        "conversation_key": conversation_key,
        "data": dict(data),
    }


@dataclass(frozen=True)
class Webhook:
    """Where and how one event is posted; read from the settings when it is published. The URL may carry a secret
    and the signing key is one: neither is in the repr."""

    url: str = field(repr=False)
    secret: str = field(repr=False)
    retries: int
    timeout: float


def publish_event(
    event_type: str, data: Mapping[str, Any], *, tenant: str, profile: str = "", conversation_key: str = ""
) -> dict[str, Any] | None:
    """Publish one event (see the module); the envelope, or ``None`` when no destination is configured. Never
    raises, never waits for a receiver."""
    layer = settings.EVENTS_CHANNEL_LAYER
    url = settings.EVENTS_WEBHOOK_URL
    if not (layer or url) or rehearsal_current() is not None:  # a conversation test's turn tells nobody
        return None
    try:
        envelope = event_envelope(event_type, data, tenant=tenant, profile=profile, conversation_key=conversation_key)
        webhook = (
            Webhook(
                url, settings.EVENTS_WEBHOOK_SECRET, settings.EVENTS_WEBHOOK_RETRIES, settings.EVENTS_WEBHOOK_TIMEOUT
            )
            if url
            else None
        )
        _courier().send(envelope, layer=layer, webhook=webhook)
    except Exception:  # an event is never worth a caller's failure
        logger.exception("event %s could not be published", event_type)
        return None
    return envelope


def events_flush(timeout: float = 10.0) -> bool:
    """Wait until every event published so far is delivered or given up (tests, shutdown); ``False`` on timeout."""
    return _courier().flush(timeout)


# -- delivery ---------------------------------------------------------------------------------------------------


WEBHOOK_CONCURRENCY = 4  # posts in flight at once per process; the others wait their turn
LINGER_SECONDS = 0.05  # events published within it are handed over together: one wake-up, one message per group
LAYER_BATCH = 500


class _Courier:
    """The process's delivery thread: an event loop of its own, so that no caller's loop (a request's, which may
    close) owns a delivery.

    A publisher appends to the inbox and wakes the loop only for the first event of a window of
    :data:`LINGER_SECONDS` (a wake-up per event cost more CPU than the delivery); the window's events then reach
    the layer in order, as one message per group, and each goes to the webhook, a few posts at once so that one
    waiting on a retry does not hold the others back."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.idle = threading.Condition()  # guards pending, inbox and waking
        self.pending = 0
        self.inbox: list[tuple[dict[str, Any], bool, Webhook | None]] = []
        self.waking = False
        # Made in the loop, on first use: the layer's queue of batches and its sender, the webhook's client and slots.
        self.outbox: asyncio.Queue[list[dict[str, Any]]] | None = None
        self.client: Any = None
        self.slots: asyncio.Semaphore | None = None
        self.layer_circuit = Circuit(
            "Redis (events channel layer)", pause=settings.REDIS_OUTAGE_PAUSE_SECONDS, logger=logger
        )
        self.thread = threading.Thread(target=self.loop.run_forever, name="events-courier", daemon=True)
        self.thread.start()

    def send(self, envelope: dict[str, Any], *, layer: bool, webhook: Webhook | None) -> None:
        with self.idle:
            self.pending += int(layer) + int(webhook is not None)
            self.inbox.append((envelope, layer, webhook))
            wake, self.waking = not self.waking, True
        if wake:
            self.loop.call_soon_threadsafe(self.loop.call_later, LINGER_SECONDS, self._drain)

    def _done(self, count: int = 1) -> None:
        with self.idle:
            self.pending -= count
            self.idle.notify_all()

    def _drain(self) -> None:
        with self.idle:
            arrived, self.inbox, self.waking = self.inbox, [], False
        batch = [envelope for envelope, layer, _ in arrived if layer]
        if batch:
            if self.outbox is None:
                self.outbox = asyncio.Queue()
                self.loop.create_task(self._layer_sender(self.outbox))
            for start in range(0, len(batch), LAYER_BATCH):
                self.outbox.put_nowait(batch[start : start + LAYER_BATCH])
        for envelope, _, webhook in arrived:
            if webhook is not None:
                self.loop.create_task(self._to_webhook(envelope, webhook))

    async def _layer_sender(self, outbox: asyncio.Queue[list[dict[str, Any]]]) -> None:
        while True:
            batch = await outbox.get()
            try:
                await self._to_layer(batch)
            finally:
                self._done(len(batch))

    async def _to_layer(self, batch: list[dict[str, Any]]) -> None:
        """One message per group for the whole batch: each ``group_send`` is a few Redis round trips, a few hundred
        microseconds of this process's CPU, which one event per turn would add to every turn."""
        from channels.layers import get_channel_layer

        by_tenant: dict[str, list[dict[str, Any]]] = {}
        for envelope in batch:
            if envelope["tenant"]:
                by_tenant.setdefault(envelope["tenant"], []).append(envelope)
        if not self.layer_circuit.allows():
            return  # Redis was unreachable a moment ago: dropped without waiting on it (its outage is logged once)
        try:
            channel_layer = get_channel_layer()
            if channel_layer is None:
                return
            await channel_layer.group_send(EVENTS_GROUP, {"type": CHANNEL_MESSAGE_TYPE, "events": batch})
            for tenant, events in by_tenant.items():
                await channel_layer.group_send(tenant_group(tenant), {"type": CHANNEL_MESSAGE_TYPE, "events": events})
        except REDIS_DOWN as exc:
            self.layer_circuit.failed(exc)
            return
        except Exception as exc:  # noqa: BLE001 — not an outage: said for each batch, the events dropped
            logger.warning("%s events not sent to the channel layer: %s", len(batch), exc)
            return
        self.layer_circuit.succeeded()

    async def _to_webhook(self, envelope: dict[str, Any], webhook: Webhook) -> None:
        try:
            await self._post(envelope, webhook)
        finally:
            self._done()

    async def _post(self, envelope: dict[str, Any], webhook: Webhook) -> None:
        import httpx

        if self.client is None:
            # Under the outbound policy (common/outbound.py); EVENTS_WEBHOOK_URL is the operator's, set in the
            # environment: its own address is allowed.
            self.client = outbound_async_client(allowed=lambda: origin_entry(settings.EVENTS_WEBHOOK_URL))
            self.slots = asyncio.Semaphore(WEBHOOK_CONCURRENCY)
        assert self.slots is not None
        body = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False, default=str).encode()
        outcome = ""
        for attempt in range(webhook.retries + 1):
            if attempt:
                await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), 10.0))
            headers = signed_headers(webhook.secret, body, event=envelope["type"])
            try:
                async with self.slots:
                    answer = await self.client.post(webhook.url, content=body, headers=headers, timeout=webhook.timeout)
            except httpx.HTTPError as exc:
                outcome = f"failed: {type(exc).__name__}"
                continue
            if answer.is_success:
                return
            outcome = f"HTTP {answer.status_code}"
        logger.warning(
            "events webhook gave up on %s %s after %s attempts: %s",
            envelope["type"],
            envelope["id"],
            webhook.retries + 1,
            outcome,
        )

    def flush(self, timeout: float) -> bool:
        with self.idle:
            return self.idle.wait_for(lambda: self.pending == 0, timeout)


_courier_lock = threading.Lock()
_current: _Courier | None = None


def _courier() -> _Courier:
    """This process's courier, started on first use (and again in a forked child, which has no thread)."""
    global _current
    courier = _current
    if courier is not None and courier.pid == os.getpid():
        return courier
    with _courier_lock:
        if _current is None or _current.pid != os.getpid():
            _current = _Courier()
        return _current
