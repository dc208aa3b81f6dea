"""The hop to a remote backend (seed 000's Agent Gateway): one call of another deployment's gateway API.

A gateway profile routes to its remote backends as to specialists (:mod:`routing.documents`); when one is chosen,
the graph's specialist node calls :func:`backend_call` instead of a local specialist. The call is
``POST {base_url}/api/gateway/message/stream`` with the backend's key, the remote profile and a session id stable
per local conversation; the remote's ``token`` events are relayed to the turn's emitter as they arrive, and its
``done`` event gives the answer and the remote agent. Whatever happens, the outcome is a :class:`BackendReply`
(stored as a ``BackendCall`` row): never an exception, never a 5xx for the user.

Loop safety across deployments: each hop sends ``X-Gateway-Hops`` one higher than it received; at
``GATEWAY_MAX_HOPS`` no backend is called. Faults open a circuit per (profile, backend), process-local
(:class:`common.outages.Circuit`): after ``failures_to_open`` failures in a row the backend is not called for
``open_seconds``, then one call tries it. docs/gateway.md says all of it for operators.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from common import tracing
from common.bus import publish_event
from common.endpoints import endpoints_masked_in
from common.events import Emit, emit_safely
from common.outages import TRIAL, Circuit
from conversations.models import BackendCall, BackendCallStatus
from routing.snapshot import BackendSpec

logger = logging.getLogger(__name__)

GATEWAY_PATH = "/api/gateway/message/stream"
HOPS_HEADER = "X-Gateway-Hops"
GATEWAY_CHANNEL = "gateway"
SUMMARY_TURNS = 4  # the recent messages a handoff summary quotes
SUMMARY_CHARS = 600
ERROR_CHARS = 500


@dataclass(frozen=True)
class GatewayMessage:
    """What a hop sends: the user's text, the local conversation's identity and the gateway context."""

    text: str
    conversation_key: str  # the local conversation: the remote session id is derived from it
    from_profile: str
    user_id: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)
    handoff_summary: str = ""
    reason: str = ""

    def body(self, backend: BackendSpec) -> dict[str, Any]:
        gateway = {
            "from_profile": self.from_profile,
            "conversation_key": self.conversation_key,
            "handoff_summary": self.handoff_summary,
            "reason": self.reason,
        }
        payload = {
            "text": self.text,
            "session_id": remote_session_id(self.conversation_key),
            "user_id": self.user_id,
            "context": {**self.context, "gateway": gateway},
        }
        return {"channel": GATEWAY_CHANNEL, "agent_id": backend.remote_agent_id, "payload": payload}


def remote_session_id(conversation_key: str) -> str:
    """The session id a local conversation has on every backend: stable, and telling nothing of the local one."""
    return "gw-" + hashlib.sha256(conversation_key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class BackendReply:
    """The outcome of one hop (or of a hop not made: the circuit open, too many hops)."""

    backend: str
    status: str  # BackendCallStatus
    answer: str = ""
    remote_agent: str = ""
    remote_conversation_key: str = ""
    http_status: int | None = None
    latency_ms: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == BackendCallStatus.OK

    def metadata(self) -> dict[str, Any]:
        """The turn's ``metadata["backend"]``."""
        return {
            "name": self.backend,
            "remote_agent": self.remote_agent,
            "status": self.status,
            "latency_ms": self.latency_ms,
            "remote_conversation_key": self.remote_conversation_key,
        }

    def row(self, *, conversation_id: int, tenant_id: int, profile_id: int) -> BackendCall:
        """The ``BackendCall`` row, unsaved (its message is set when the turn's answer has an id)."""
        return BackendCall(
            conversation_id=conversation_id,
            tenant_id=tenant_id,
            profile_id=profile_id,
            backend=self.backend,
            remote_agent=self.remote_agent[:64],
            status=self.status,
            http_status=self.http_status,
            latency_ms=self.latency_ms,
            error=self.error[:ERROR_CHARS],
        )


class _Fault(Exception):
    """A hop that failed, with what the row records."""

    def __init__(self, status: str, error: str, http_status: int | None = None) -> None:
        super().__init__(error)
        self.status, self.error, self.http_status = status, error, http_status


# --- the circuit per (profile, backend) ------------------------------------------------------------------


class BackendHealth:
    """A backend's circuit for one profile in this process, and its failures in a row."""

    def __init__(self, key: tuple[str, str], backend: BackendSpec) -> None:
        self.profile = key[0]
        self.backend = backend  # the latest spec: its open_seconds and failures_to_open are read at each use
        self.failures = 0
        self.last_fault = ""  # the status and error of the failure that opened the circuit
        self.circuit = Circuit(
            f"remote backend {key[0]}/{key[1]}",
            lambda: self.backend.open_seconds,
            on_open=self._down,
            on_close=self._up,
            refusal="the fallback answers without calling it",
        )

    def _down(self) -> None:
        """The circuit opened: operators hear of it (docs/events.md, ``backend.down``)."""
        data = {
            "backend": self.backend.name,
            "reason": self.last_fault,
            "failures": self.failures,
            "open_seconds": self.backend.open_seconds,
        }
        publish_event("backend.down", data, tenant="", profile=self.profile)

    def _up(self) -> None:
        publish_event("backend.up", {"backend": self.backend.name}, tenant="", profile=self.profile)


_health: dict[tuple[str, str], BackendHealth] = {}
_health_lock = threading.Lock()


def backend_health(profile: str, backend: BackendSpec) -> BackendHealth:
    key = (profile, backend.name)
    health = _health.get(key)
    if health is None:
        with _health_lock:
            health = _health.setdefault(key, BackendHealth(key, backend))
    health.backend = backend
    return health


def backend_circuits_reset() -> None:
    """Every circuit closed and every count at zero, as at start (tests)."""
    with _health_lock:
        _health.clear()


def backend_outcome(*, profile: str, health: BackendHealth, reply: BackendReply, admission: int) -> None:
    """What a hop's outcome does to its backend's circuit, and what is said about it: the one place for the
    reactions to a backend that failed or whose circuit opened (a log line; the circuit's opening and closing
    publish ``backend.down`` and ``backend.up``, :class:`BackendHealth`)."""
    circuit = health.circuit
    if reply.ok:
        health.failures = 0
        if admission == TRIAL:
            circuit.trial_done()
        return
    health.failures += 1
    health.last_fault = f"{reply.status}: {reply.error}"[:300]
    logger.warning(
        "Remote backend %s of %s failed (%s, %s in a row): %s",
        reply.backend,
        profile,
        reply.status,
        health.failures,
        reply.error,
    )
    if admission == TRIAL or health.failures >= health.backend.failures_to_open:
        circuit.trip()
        logger.warning(
            "Remote backend %s of %s: circuit open, not called for %gs",
            reply.backend,
            profile,
            health.backend.open_seconds,
        )


# --- the call -------------------------------------------------------------------------------------------

# One HTTP client per event loop (connections belong to the loop that opened them; see agents/llm.py).
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


def _client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    with _clients_lock:
        client = _clients.get(loop)
        if client is None:
            client = _clients[loop] = httpx.AsyncClient(follow_redirects=False)
        return client


async def backend_call(
    *, backend: BackendSpec, profile: str, message: GatewayMessage, hops: int, emit: Emit | None = None
) -> BackendReply:
    """Call ``backend`` for ``message`` (the profile ``profile``'s turn, which came ``hops`` hops from its user),
    relaying its tokens to ``emit``; the outcome as a :class:`BackendReply`, whatever happened."""
    if hops >= settings.GATEWAY_MAX_HOPS:
        error = f"{hops} gateway hops already (GATEWAY_MAX_HOPS {settings.GATEWAY_MAX_HOPS}): not called"
        return BackendReply(backend=backend.name, status=BackendCallStatus.LOOP, error=error)
    health = backend_health(profile, backend)
    admission = health.circuit.admit()
    if admission is None:
        error = f"circuit open for {health.circuit.seconds_left():.1f}s more"
        return BackendReply(backend=backend.name, status=BackendCallStatus.CIRCUIT_OPEN, error=error)
    started = time.perf_counter()
    with tracing.span("gateway.hop", backend=backend.name, remote_agent_id=backend.remote_agent_id) as hop:
        try:
            async with asyncio.timeout(backend.timeout):
                done, http_status = await _stream(backend, message, hops=hops, emit=emit)
            reply = _answered(backend, done, http_status, started)
        except _Fault as fault:
            reply = _failed(backend, fault.status, fault.error, started, fault.http_status)
        except TimeoutError:
            reply = _failed(backend, BackendCallStatus.TIMEOUT, f"no answer within {backend.timeout:g}s", started)
        except httpx.TimeoutException as exc:
            reply = _failed(backend, BackendCallStatus.TIMEOUT, f"{type(exc).__name__}: {exc}", started)
        except httpx.TransportError as exc:
            reply = _failed(backend, BackendCallStatus.UNREACHABLE, f"{type(exc).__name__}: {exc}", started)
        except asyncio.CancelledError:
            if admission == TRIAL:
                health.circuit.trial_abandoned()
            raise
        tracing.annotate(
            hop, status=reply.status, http_status=reply.http_status, remote_agent=reply.remote_agent or None
        )
        if not reply.ok:
            tracing.failed(hop, f"{reply.status}: {reply.error}")
    backend_outcome(profile=profile, health=health, reply=reply, admission=admission)
    return reply


def _elapsed(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _failed(backend: BackendSpec, status: str, error: str, started: float, http: int | None = None) -> BackendReply:
    # The error is stored and shown (the backend call's row, the turn's metadata): an HTTP client's error may quote
    # the URL it was given, credentials and all.
    error = endpoints_masked_in(error)
    return BackendReply(
        backend=backend.name, status=status, http_status=http, latency_ms=_elapsed(started), error=error
    )


def _answered(backend: BackendSpec, done: dict[str, Any], http_status: int, started: float) -> BackendReply:
    answer, agent = done.get("answer"), done.get("agent")
    if not isinstance(answer, str) or not isinstance(agent, str):
        error = "the done event has no answer and agent strings"
        return _failed(backend, BackendCallStatus.BAD_ANSWER, error, started, http_status)
    key = done.get("conversation_key")
    return BackendReply(
        backend=backend.name,
        status=BackendCallStatus.OK,
        answer=answer,
        remote_agent=agent,
        remote_conversation_key=key if isinstance(key, str) else "",
        http_status=http_status,
        latency_ms=_elapsed(started),
    )


def gateway_url(base_url: str) -> str:
    """Where a hop goes: the gateway API's path after ``base_url``'s own path, its query kept after it
    (``https://h/tenants/a/?region=eu`` → ``https://h/tenants/a/api/gateway/message/stream?region=eu``)."""
    parts = urlsplit(base_url)
    return parts._replace(path=parts.path.rstrip("/") + GATEWAY_PATH).geturl()


async def _stream(
    backend: BackendSpec, message: GatewayMessage, *, hops: int, emit: Emit | None
) -> tuple[dict[str, Any], int]:
    """Send the hop and read its Server-Sent Events: tokens (and the remote's agent changes and discards) relayed
    to ``emit`` under the backend's name; returns the ``done`` event's data and the HTTP status. Raises
    :class:`_Fault` for an answer that is not the gateway API's, httpx's errors for the rest."""
    # application/json too: errors come as JSON, and DRF refuses (406) an Accept it has no renderer for.
    headers = {"Accept": "text/event-stream, application/json", HOPS_HEADER: str(hops + 1)}
    headers.update(tracing.trace_context_out())  # the remote's spans join this trace, under the gateway.hop span
    if backend.api_key:
        headers["Authorization"] = f"Bearer {backend.api_key}"
    request = _client().build_request(
        "POST",
        gateway_url(backend.base_url),
        json=message.body(backend),
        headers=headers,
        timeout=httpx.Timeout(backend.timeout),
    )
    response = await _client().send(request, stream=True)
    try:
        if response.status_code >= 400:
            body = (await response.aread()).decode(errors="replace")
            status = BackendCallStatus.SERVER_ERROR if response.status_code >= 500 else BackendCallStatus.REFUSED
            raise _Fault(status, f"HTTP {response.status_code}: {body[:ERROR_CHARS]}", response.status_code)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            error = f"HTTP {response.status_code} {response.headers.get('content-type', '(no content type)')}"
            raise _Fault(BackendCallStatus.BAD_ANSWER, f"not an event stream: {error}", response.status_code)
        event, data = "", ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif not line and event:
                done = await _event(backend, event, data, emit, response.status_code)
                if done is not None:
                    return done, response.status_code
                event, data = "", ""
        raise _Fault(BackendCallStatus.BAD_ANSWER, "the stream ended without a done event", response.status_code)
    finally:
        await response.aclose()


async def _event(
    backend: BackendSpec, event: str, data: str, emit: Emit | None, http_status: int
) -> dict[str, Any] | None:
    """Handle one remote event: ``done`` returns its data; an ``error`` event is the remote's 5xx."""
    try:
        value = json.loads(data) if data else {}
    except ValueError:
        raise _Fault(BackendCallStatus.BAD_ANSWER, f"{event} event data is not JSON", http_status) from None
    if not isinstance(value, dict):
        raise _Fault(BackendCallStatus.BAD_ANSWER, f"{event} event data is not an object", http_status)
    if event == "done":
        return value
    if event == "error":
        raise _Fault(BackendCallStatus.SERVER_ERROR, f"error event: {data[:ERROR_CHARS]}", http_status)
    if event == "token" and isinstance(value.get("text"), str):
        await emit_safely(emit, "token", {"agent": backend.name, "text": value["text"]})
    elif event == "discard":
        await emit_safely(emit, "discard", {"agent": backend.name})
    return None


# --- both ends of a hop -----------------------------------------------------------------------------------


def handoff_summary(history: Any) -> str:
    """A short summary of the conversation for the side that takes it over: its last messages, each cut short.
    ``history``: :class:`conversations.records.HistoryEntry` values, oldest first."""
    lines = []
    for entry in list(history)[-SUMMARY_TURNS:]:
        content = " ".join(str(entry.content).split())
        lines.append(f"{entry.role}: {content[:160]}")
    return " | ".join(lines)[:SUMMARY_CHARS]


def gateway_note(context: Mapping[str, Any]) -> str:
    """The system note a specialist gets when a gateway handed this conversation here (``context.gateway`` with a
    handoff summary), else ``""``."""
    gateway = context.get("gateway")
    if not isinstance(gateway, Mapping) or not gateway.get("handoff_summary"):
        return ""
    return (
        f"[SYSTEM_NOTE: the gateway {str(gateway.get('from_profile', ''))[:64]} handed this conversation to you. "
        f"Reason: {str(gateway.get('reason', ''))[:300]} "
        f"Summary: {str(gateway['handoff_summary'])[:SUMMARY_CHARS]}]"
    )
