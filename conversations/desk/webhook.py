"""External desks' webhook: every change of an escalation whose profile names an external desk, posted to the desk
signed, off the request path, in order per escalation (docs/external-desk.md).

:func:`escalation_posted` listens to :data:`conversations.signals.escalation_changed` (sent once a change is
committed) and, for an escalation of an enabled external desk, stores the event (:mod:`conversations.desk.contract`)
in the outbox (:class:`~conversations.models.ExternalDeskEvent`) and asks for its escalation's outbox to be drained:
by the Celery task ``conversations.desk_webhook_deliver`` when there is a broker (``DESK_WEBHOOK_EXECUTOR`` ``auto``
with ``REDIS_URL``, or ``celery``), else by this process's courier thread. Escalations of the platform's own desk
cost nothing here.

:func:`desk_outbox_drain` posts an escalation's events oldest first, one at a time: ``POST <url>`` with the JSON body
and ``X-Platform-Event`` (its type), ``X-Platform-Event-Id``, ``X-Platform-Timestamp`` and ``X-Platform-Signature:
sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`` with the desk's secret (:func:`common.infra.bus.signed_headers`, as
the operational events and rollout plans' posts are signed, each with a secret of its own),
``X-Platform-Delivery-Attempt``. A 2xx delivers it; anything else waits ``DESK_WEBHOOK_RETRY_SECONDS`` × 2ⁿ (at most
:data:`MAX_PAUSE_SECONDS`) and is tried again, the events after it waiting behind it, until ``DESK_WEBHOOK_RETRIES``
retries have failed: then one WARNING names the desk, the event and the last failure — never the URL nor the secret —
and the next event goes. The desk's URL is never an internal address unless the operator allows it
(:mod:`common.outbound`, checked on each post): a refused post fails as any other does, its failure saying so.

Ordering: one drainer at a time per escalation, by a lease on its oldest event (a conditional update, no lock held
across the post); a drainer that finds it leased, or not due yet, leaves it to the one that holds it or will retry
it. Posts whose retry was lost (a stopped worker, a restarted process) are taken up by :func:`desk_outbox_sweep`
(Celery beat every minute; the courier thread between its jobs). Delivery is at least once: a receiver dedupes by
the event id.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from agents.models import ExternalDesk
from agents.public import SecretUnavailable, external_desk_get, signing_secret
from common.infra.bus import signed_headers
from common.infra.circuit import Circuit
from common.outbound import OutboundRefused, outbound_client
from conversations.desk.contract import EVENT_TYPES, desk_event, where_of
from conversations.models import Escalation, ExternalDeskEvent
from platform.celery import app

logger = logging.getLogger(__name__)

ATTEMPT_HEADER = "X-Platform-Delivery-Attempt"
MAX_PAUSE_SECONDS = 300.0
LEASE_MARGIN_SECONDS = 30.0  # a lease outlives its post's timeout by this much
SWEEP_SECONDS = 60.0
STORE_RETRY_SECONDS = 1.0  # after a drain the database refused (SQLite busy, an outage)
DELIVER_TASK = "conversations.desk_webhook_deliver"  # conversations/tasks.py

# While the broker cannot take a task, the drains run in this process for a while without waiting on it.
broker_circuit = Circuit("Redis (desk webhook broker)", pause=settings.REDIS_OUTAGE_PAUSE_SECONDS, logger=logger)

# Desks whose events were dropped because they are off or gone: said once per process until they take events again.
_warned_desks: set[str] = set()


# -- what goes out ---------------------------------------------------------------------------------------------------


def escalation_posted(
    sender: Any = None, *, escalation: Escalation, kind: str, message: dict[str, Any] | None = None, **_: Any
) -> ExternalDeskEvent | None:
    """``escalation_changed``'s receiver: the change stored as an event for the escalation's external desk and its
    delivery asked for; ``None`` (and nothing written) for the platform's desk, an unknown kind, or a desk that is
    off or gone (said once)."""
    if not escalation.desk or kind not in EVENT_TYPES:
        return None
    try:
        return _stored(escalation, kind, message)
    except Exception:  # sent after the change committed: a failure here must not fail the desk's action
        logger.exception("escalation %s: its %s event for the external desk was not stored", escalation.pk, kind)
        return None


def _stored(escalation: Escalation, kind: str, message: dict[str, Any] | None) -> ExternalDeskEvent | None:
    desk = external_desk_get(name=escalation.desk)
    if desk is None:
        if escalation.desk not in _warned_desks:
            _warned_desks.add(escalation.desk)
            logger.warning(
                "escalation events for the external desk %s are not posted: no enabled desk of that name",
                escalation.desk,
            )
        return None
    _warned_desks.discard(desk.name)
    event = desk_event(escalation, kind=kind, where=where_of(escalation), message=message)
    row = ExternalDeskEvent.objects.create(
        event_id=event["id"],
        escalation_id=escalation.pk,
        desk=desk.name,
        type=event["type"],
        body=event_body(event),
    )
    transaction.on_commit(lambda: drain_later(str(escalation.pk)))
    return row


def event_body(event: dict[str, Any]) -> str:
    """The JSON text posted: compact, UTF-8, keys in the contract's order."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)


def event_headers(
    *, event: ExternalDeskEvent, secret: str, attempt: int, timestamp: str | None = None
) -> dict[str, str]:
    """The headers of one attempt at posting ``event``, signed with ``secret`` over ``"<timestamp>.<body>"``."""
    signed = signed_headers(
        secret, event.body.encode(), event=event.type, event_id=event.event_id.hex, timestamp=timestamp
    )
    return {**signed, ATTEMPT_HEADER: str(attempt)}


def retry_pause(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed ones: ``DESK_WEBHOOK_RETRY_SECONDS`` doubling."""
    return min(settings.DESK_WEBHOOK_RETRY_SECONDS * 2 ** max(attempts - 1, 0), MAX_PAUSE_SECONDS)


# -- posting an escalation's events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drained:
    """What one drain did: events ``delivered`` and ``dropped`` (given up), and ``retry_in`` seconds when it met a
    failure it must come back for (``None``: nothing left for it to do, or another drainer's turn)."""

    delivered: int = 0
    dropped: int = 0
    retry_in: float | None = None


def desk_outbox_drain(*, escalation_id: str) -> Drained:
    """Post the escalation's due events, oldest first, until none is left, one fails (:attr:`Drained.retry_in` says
    when to come back) or another drainer holds the oldest. Holds no transaction or lock across a post."""
    delivered = dropped = 0
    client = outbound_client()  # the desk's URL is the operator's: never an internal address (common/outbound.py)
    try:
        while True:
            now = timezone.now()
            head = ExternalDeskEvent.objects.filter(escalation_id=escalation_id).order_by("id").first()
            if head is None or head.due_at > now:
                return Drained(delivered, dropped)
            desk = external_desk_get(name=head.desk)
            lease = dt.timedelta(seconds=(desk.timeout if desk else 0) + LEASE_MARGIN_SECONDS)
            taken = (
                ExternalDeskEvent.objects.filter(pk=head.pk)
                .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
                .update(leased_until=now + lease, attempts=F("attempts") + 1)
            )
            if not taken:
                return Drained(delivered, dropped)  # another drainer posts it, and goes on after it
            attempt = head.attempts + 1
            outcome = _post(client, head, desk, attempt)
            if outcome is None:
                ExternalDeskEvent.objects.filter(pk=head.pk).delete()
                delivered += 1
                continue
            if attempt > settings.DESK_WEBHOOK_RETRIES:
                logger.warning(
                    "external desk %s: gave up on %s %s of escalation %s after %s attempts: %s",
                    head.desk,
                    head.type,
                    head.event_id.hex,
                    escalation_id,
                    attempt,
                    outcome,
                )
                ExternalDeskEvent.objects.filter(pk=head.pk).delete()
                dropped += 1
                continue
            pause = retry_pause(attempt)
            ExternalDeskEvent.objects.filter(pk=head.pk).update(
                leased_until=None, due_at=timezone.now() + dt.timedelta(seconds=pause), last_error=outcome[:200]
            )
            return Drained(delivered, dropped, pause)
    finally:
        client.close()


def _post(client: httpx.Client, event: ExternalDeskEvent, desk: ExternalDesk | None, attempt: int) -> str | None:
    """Post ``event`` once; ``None`` when the desk took it, else the failure in words (no address, no secret)."""
    if desk is None:
        return "the desk is switched off or gone"
    try:
        secret = signing_secret(secret=desk.secret, secret_env=desk.secret_env)
    except SecretUnavailable as exc:
        return str(exc)
    headers = event_headers(event=event, secret=secret, attempt=attempt)
    try:
        answer = client.post(desk.url, content=event.body.encode(), headers=headers, timeout=desk.timeout)
    except OutboundRefused as exc:
        return str(exc)  # which host, and why: no address, no credentials
    except httpx.HTTPError as exc:
        return f"failed: {type(exc).__name__}"
    return None if answer.is_success else f"HTTP {answer.status_code}"


def desk_outbox_due() -> list[str]:
    """The escalations with an event due and not being posted (what a sweep drains)."""
    now = timezone.now()
    rows = (
        ExternalDeskEvent.objects.filter(due_at__lte=now)
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
        .values_list("escalation_id", flat=True)
        .distinct()
    )
    return [str(pk) for pk in rows]


def desk_outbox_sweep() -> int:
    """Ask for the drain of every escalation with an event due and not being posted; how many."""
    due = desk_outbox_due()
    for escalation_id in due:
        drain_later(escalation_id)
    return len(due)


# -- where the drains run ----------------------------------------------------------------------------------------------


def executor_name() -> str:
    """``celery`` when a broker is configured (or ``DESK_WEBHOOK_EXECUTOR`` forces it), otherwise ``inprocess``."""
    choice = settings.DESK_WEBHOOK_EXECUTOR
    if choice == "auto":
        choice = "celery" if settings.REDIS_URL else "inprocess"
    return choice


def drain_later(escalation_id: str, delay: float = 0.0) -> None:
    """Drain the escalation's outbox in ``delay`` seconds, off this thread: a Celery task, or the courier thread (also
    when the broker cannot take the task: the events are stored, and a sweep would find them anyway)."""
    if executor_name() == "celery" and broker_circuit.allows():
        try:
            app.send_task(DELIVER_TASK, args=(escalation_id,), countdown=delay or None)
        except Exception as exc:  # noqa: BLE001 — the broker is down (said once by the circuit): this process posts
            broker_circuit.failed(exc)
        else:
            broker_circuit.succeeded()
            return
    courier().schedule(escalation_id, delay)


class Courier:
    """This process's drains without a broker: a thread that waits for the next due drain (or a minute, then sweeps)
    and hands it to a few workers; the lease keeps one escalation's events in order whichever worker posts them."""

    WORKERS = 4

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.cond = threading.Condition()
        self.due: list[tuple[float, str]] = []  # (monotonic time, escalation id), a heap
        self.running = 0
        self.pool = ThreadPoolExecutor(max_workers=self.WORKERS, thread_name_prefix="desk-webhook")
        self.thread = threading.Thread(target=self._run, name="desk-webhook-courier", daemon=True)
        self.thread.start()

    def schedule(self, escalation_id: str, delay: float = 0.0) -> None:
        with self.cond:
            heapq.heappush(self.due, (time.monotonic() + delay, escalation_id))
            self.cond.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is scheduled or running (tests, shutdown); ``False`` on timeout."""
        with self.cond:
            return self.cond.wait_for(lambda: not self.due and not self.running, timeout)

    def _run(self) -> None:
        next_sweep = time.monotonic() + SWEEP_SECONDS
        while True:
            with self.cond:
                now = time.monotonic()
                wake = min(self.due[0][0] if self.due else next_sweep, next_sweep)
                if wake > now:
                    self.cond.wait(wake - now)
                    continue
                ready = []
                while self.due and self.due[0][0] <= now:
                    ready.append(heapq.heappop(self.due)[1])
                self.running += len(ready)
            for escalation_id in dict.fromkeys(ready):
                self.pool.submit(self._drain, escalation_id)
            for _ in range(len(ready) - len(dict.fromkeys(ready))):
                self._done()
            if now >= next_sweep:
                next_sweep = now + SWEEP_SECONDS
                self.pool.submit(self._sweep)

    def _drain(self, escalation_id: str) -> None:
        try:
            drained = desk_outbox_drain(escalation_id=escalation_id)
            if drained.retry_in is not None:
                self.schedule(escalation_id, drained.retry_in)
        except DatabaseError as exc:  # busy or unreachable: its events wait in the outbox, tried again shortly
            logger.warning(
                "desk webhook drain of escalation %s: %s: %s; again in %gs",
                escalation_id,
                type(exc).__name__,
                exc,
                STORE_RETRY_SECONDS,
            )
            self.schedule(escalation_id, STORE_RETRY_SECONDS)
        except Exception:  # a drain is never worth the courier
            logger.exception("desk webhook drain of escalation %s failed", escalation_id)
            self.schedule(escalation_id, STORE_RETRY_SECONDS)
        finally:
            connections.close_all()  # this worker thread's connections only
            self._done()

    def _sweep(self) -> None:
        try:
            for escalation_id in desk_outbox_due():
                self.schedule(escalation_id)
        except Exception:
            logger.warning("desk webhook sweep failed", exc_info=True)
        finally:
            connections.close_all()

    def _done(self) -> None:
        with self.cond:
            self.running -= 1
            self.cond.notify_all()


_courier_lock = threading.Lock()
_courier: Courier | None = None


def courier() -> Courier:
    """This process's courier, started on first use (and again in a forked child, which has no thread)."""
    global _courier
    with _courier_lock:
        if _courier is None or _courier.pid != os.getpid():
            _courier = Courier()
        return _courier


def desk_webhooks_flush(timeout: float = 10.0) -> bool:
    """Wait until this process's courier has nothing scheduled or running (tests); ``False`` on timeout."""
    return courier().idle(timeout)
