"""The hop to a remote backend (the Agent Gateway, docs/gateway.md): one call of another deployment's gateway API.

A gateway profile routes to its remote backends as to specialists (:mod:`routing.documents`); when one is chosen,
the graph's specialist node calls :func:`backend_call` instead of a local specialist. The call is
``POST {base_url}/api/gateway/message/stream`` with the backend's key, the remote profile and a session id stable
per local conversation; the remote's ``token`` events are relayed to the turn's emitter as they arrive, and its
``done`` event gives the answer and the remote agent. Whatever happens, the outcome is a :class:`BackendReply`
(stored as a ``BackendCall`` row): never an exception, never a 5xx for the user.

A backend of kind A2A is any Agent2Agent agent, called with the protocol's official client (``a2a-sdk``,
:func:`_a2a_exchange`): its card read from its address, the message sent in the context stable per local
conversation, its artifact's text relayed as tokens, its task's final state the outcome. A task that ends
``input-required`` asks the customer something (its status message, added to the answer): the conversation keeps
the task's id, and the customer's next message goes to that agent as the task's continuation (``taskId``, the same
``contextId``). Every hop, of either kind, sends the W3C trace context (``traceparent``, ``tracestate``) of its
``gateway.hop`` span, so that the remote's spans join the turn's trace.

Loop safety across deployments: each hop sends ``X-Gateway-Hops`` one higher than it received; at
``GATEWAY_MAX_HOPS`` no backend is called. Faults open a circuit per (profile, backend), process-local
(:class:`common.infra.circuit.Circuit`): after ``failures_to_open`` failures in a row the backend is not called for
``open_seconds``, then one call tries it. docs/gateway.md says all of it for operators.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    A2AClientTimeoutError,
    AgentCardResolutionError,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
)
from a2a.helpers import get_artifact_text, get_message_text, new_text_part
from a2a.types import AgentCard, Message, Role, SendMessageRequest, TaskState
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a.utils.errors import A2AError, InternalError
from django.conf import settings

from common.endpoints import endpoints_masked_in
from common.events import Emit, emit_safely
from common.infra import tracing
from common.infra.bus import publish_event
from common.infra.circuit import TRIAL, Circuit
from common.outbound import outbound_async_client
from conversations.models import BackendCall, BackendCallStatus
from handoffs.public import Move
from routing.public import BackendSpec

logger = logging.getLogger(__name__)

GATEWAY_PATH = "/api/gateway/message/stream"
A2A_KIND = "a2a"  # agents.BackendKind.A2A
A2A_CARD_SECONDS = 300.0  # how long a process keeps an A2A agent's card before reading it again
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
    task_id: str = ""  # an A2A agent's task that waits for this message (input-required): the message continues it

    def gateway_context(self) -> dict[str, Any]:
        """The client's context with what the receiving side needs of the gateway (``context.gateway``)."""
        gateway = {
            "from_profile": self.from_profile,
            "conversation_key": self.conversation_key,
            "handoff_summary": self.handoff_summary,
            "reason": self.reason,
        }
        return {**self.context, "gateway": gateway}

    def body(self, backend: BackendSpec) -> dict[str, Any]:
        payload = {
            "text": self.text,
            "session_id": remote_session_id(self.conversation_key),
            "user_id": self.user_id,
            "context": self.gateway_context(),
        }
        return {"channel": GATEWAY_CHANNEL, "agent_id": backend.remote_agent_id, "payload": payload}

    def a2a_request(self) -> SendMessageRequest:
        """The A2A message: the text, in the context stable per local conversation; the user and the gateway
        context in its metadata (``user_id``, ``context``: what this platform's A2A face reads there)."""
        metadata: dict[str, Any] = {"context": self.gateway_context()}
        if self.user_id:
            metadata["user_id"] = self.user_id
        message = Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            context_id=remote_session_id(self.conversation_key),
            task_id=self.task_id,
            parts=[new_text_part(self.text)],
            metadata=metadata,
        )
        return SendMessageRequest(message=message)


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
    waiting_task: str = ""  # the A2A agent's task that asked the customer something (input-required)

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


@dataclass
class TurnBackend:
    """The gateway's part of one turn (``turn.backend``): the move to, from or between remote backends (in place of
    the routing handoff), the hop's reply, and the active backend's task waiting for this message
    (``Conversation.backend_task``)."""

    move: Move | None = None
    reply: BackendReply | None = None
    task: str = ""


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
            pause=lambda: self.backend.open_seconds,
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

# One HTTP client per event loop (connections belong to the loop that opened them; see agents/llm.py), under the
# outbound policy (common/outbound.py): a backend's address is the operator's, never an internal one unless allowed.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


def _client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    with _clients_lock:
        client = _clients.get(loop)
        if client is None:
            client = _clients[loop] = outbound_async_client(follow_redirects=False)
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
            exchange = _a2a_exchange if backend.kind == A2A_KIND else _stream
            # The A2A SDK's client spans its calls with the OpenTelemetry API: under this hop, not traces of their own.
            async with asyncio.timeout(backend.timeout):
                with tracing.library_spans_nested():
                    done, http_status = await exchange(backend, message, hops=hops, emit=emit)
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
        waiting_task=done.get("waiting_task") or "",
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


# --- a hop to an A2A agent --------------------------------------------------------------------------------

# The A2A client's own HTTP clients, one per event loop: the SDK's client factory sets its protocol version header on
# the client it is given, which the gateway API's hops must not send.
_a2a_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()
_cards: dict[tuple[str, str], tuple[float, AgentCard]] = {}  # (card URL, key digest) → (read at, card)

# The task states that end a hop, and what each makes of it.
_ANSWERED = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_INPUT_REQUIRED}
_REFUSED = {TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_AUTH_REQUIRED, TaskState.TASK_STATE_CANCELED}


def _a2a_client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    with _clients_lock:
        client = _a2a_clients.get(loop)
        if client is None:
            client = _a2a_clients[loop] = outbound_async_client(follow_redirects=False)
        return client


def a2a_card_location(base_url: str) -> tuple[str, str]:
    """Where an A2A agent's card is: ``(base, path)`` for the SDK's card resolver. An address ending in ``.json`` is
    the card's own URL; any other is the agent's, its card at ``.well-known/agent-card.json`` under it."""
    parts = urlsplit(base_url)
    if parts.path.endswith(".json"):
        folder, _, name = parts.path.rpartition("/")
        return parts._replace(path=folder, query="", fragment="").geturl(), name
    return base_url.rstrip("/"), AGENT_CARD_WELL_KNOWN_PATH


def _same_origin(url: str, other: str) -> bool:
    first, second = urlsplit(url), urlsplit(other)
    return (first.scheme, first.netloc) == (second.scheme, second.netloc)


async def _a2a_card(backend: BackendSpec, headers: dict[str, str]) -> AgentCard:
    """The agent's card (kept ``A2A_CARD_SECONDS`` in this process), with only the JSON-RPC interfaces on the card's
    own host: the key is sent to no other. Raises :class:`_Fault`."""
    base, path = a2a_card_location(backend.base_url)
    cached_key = (backend.base_url, hashlib.sha256(backend.api_key.encode()).hexdigest())
    cached = _cards.get(cached_key)
    if cached is not None and time.monotonic() - cached[0] < A2A_CARD_SECONDS:
        return cached[1]
    resolver = A2ACardResolver(_a2a_client(), base, path)
    card = await resolver.get_agent_card(http_kwargs={"headers": headers, "timeout": backend.timeout})
    mine = [
        interface
        for interface in card.supported_interfaces
        if interface.protocol_binding == TransportProtocol.JSONRPC and _same_origin(interface.url, base)
    ]
    if not mine:
        error = "the agent card offers no JSON-RPC interface on its own host (the key goes to no other)"
        raise _Fault(BackendCallStatus.BAD_ANSWER, error)
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(mine)
    _cards[cached_key] = (time.monotonic(), card)
    return card


def _a2a_fault(exc: A2AError) -> _Fault:
    """What an A2A client error means for the hop's row: the HTTP status or the transport's failure under it."""
    cause = exc.__cause__
    status = getattr(exc, "status_code", None)
    if status is None and isinstance(cause, httpx.HTTPStatusError):
        status = cause.response.status_code
    error = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, A2AClientTimeoutError) or isinstance(cause, httpx.TimeoutException):
        return _Fault(BackendCallStatus.TIMEOUT, error, status)
    if status is not None:
        return _Fault(BackendCallStatus.SERVER_ERROR if status >= 500 else BackendCallStatus.REFUSED, error, status)
    if isinstance(cause, httpx.TransportError):
        return _Fault(BackendCallStatus.UNREACHABLE, error)
    if isinstance(exc, AgentCardResolutionError | A2AClientError):
        return _Fault(BackendCallStatus.BAD_ANSWER, error)
    # A JSON-RPC error the agent answered with: its fault (internal) or the message's (the rest).
    return _Fault(
        BackendCallStatus.SERVER_ERROR if isinstance(exc, InternalError) else BackendCallStatus.REFUSED, error
    )


async def _a2a_exchange(
    backend: BackendSpec, message: GatewayMessage, *, hops: int, emit: Emit | None
) -> tuple[dict[str, Any], int]:
    """Send the message to an A2A agent with the SDK's client (streaming when its card says it streams) and read
    its events: the artifacts' text relayed to ``emit`` under the backend's name as it comes (a chunk that replaces
    an artifact discards what was relayed), the task's last state the outcome. Returns the gateway API's ``done``
    data (answer, agent, conversation key) and the HTTP status; raises :class:`_Fault` (and ``TimeoutError``)."""
    headers = {HOPS_HEADER: str(hops + 1), **tracing.trace_context_out()}
    if backend.api_key:
        headers["Authorization"] = f"Bearer {backend.api_key}"
    try:
        card = await _a2a_card(backend, headers)
        config = ClientConfig(streaming=card.capabilities.streaming, httpx_client=_a2a_client())
        client = ClientFactory(config).create(card)
        texts: dict[str, str] = {}
        said, state, context_id, task_id = "", TaskState.TASK_STATE_UNSPECIFIED, "", ""
        context = ClientCallContext(service_parameters=headers, timeout=backend.timeout)
        async for event in client.send_message(message.a2a_request(), context=context):
            kind = event.WhichOneof("payload")
            if kind == "message":  # a plain answer, no task
                said, state, context_id = (
                    get_message_text(event.message),
                    TaskState.TASK_STATE_COMPLETED,
                    event.message.context_id,
                )
            elif kind == "task":
                texts = {item.artifact_id: get_artifact_text(item) for item in event.task.artifacts}
                state, context_id, task_id = event.task.status.state, event.task.context_id, event.task.id
                said = get_message_text(event.task.status.message) or said
            elif kind == "status_update":
                state, context_id = event.status_update.status.state, event.status_update.context_id
                task_id = event.status_update.task_id or task_id
                said = get_message_text(event.status_update.status.message) or said
            elif kind == "artifact_update":
                await _a2a_chunk(backend, event.artifact_update, texts, emit)
    except A2AError as exc:
        raise _a2a_fault(exc) from None
    if state in _REFUSED or state == TaskState.TASK_STATE_FAILED:
        status = BackendCallStatus.SERVER_ERROR if state == TaskState.TASK_STATE_FAILED else BackendCallStatus.REFUSED
        raise _Fault(status, f"the task ended {TaskState.Name(state)}: {said[:ERROR_CHARS]}", 200)
    answer = "".join(texts.values()) or said
    waiting = state == TaskState.TASK_STATE_INPUT_REQUIRED
    if waiting and said and said not in answer:
        # The agent's question is its status message, not an artifact: the customer must read it.
        question = f"\n\n{said}" if answer else said
        answer += question
        await emit_safely(emit, "token", {"agent": backend.name, "text": question})
    if state not in _ANSWERED or not answer:
        raise _Fault(BackendCallStatus.BAD_ANSWER, f"no answer: the task is {TaskState.Name(state)}", 200)
    done = {"answer": answer, "agent": card.name, "conversation_key": context_id}
    return {**done, "waiting_task": task_id if waiting else ""}, 200


async def _a2a_chunk(backend: BackendSpec, update: Any, texts: dict[str, str], emit: Emit | None) -> None:
    """One artifact update: appended to its artifact's text, or replacing it (what was relayed is discarded)."""
    text = get_artifact_text(update.artifact)
    name = update.artifact.artifact_id
    if update.append:
        texts[name] = texts.get(name, "") + text
    else:
        if texts.get(name):
            await emit_safely(emit, "discard", {"agent": backend.name})
        texts[name] = text
    if text:
        await emit_safely(emit, "token", {"agent": backend.name, "text": text})


# --- both ends of a hop -----------------------------------------------------------------------------------


def handoff_summary(history: Any) -> str:
    """A short summary of the conversation for the side that takes it over: its last messages, each cut short.
    ``history``: :class:`conversations.history.HistoryEntry` values, oldest first."""
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
