"""WebSocket chat: ``/ws/chat/<agent_id>/<session_id>/``, a turn's events as they happen.

Authentication (the tenant always comes from the key, or from ``?tenant=`` for staff):

* the tenant's API key as ``?key=<raw>``, an ``Authorization: Bearer <raw>`` header, or the subprotocol
  ``bearer.<raw>`` (browsers cannot set headers; offer ``["chat", "bearer.<raw>"]`` and the server
  answers ``chat``);
* or a logged-in staff session (the session cookie, through ``AuthMiddlewareStack``) with ``?tenant=<slug>``.

Refusals are sent after the handshake, so that every client (browsers too) sees why: the socket is
accepted, gets one ``{"type": "error", "error": {...}}`` event and is closed with 4401 (no or invalid
key, a session that is not staff, an unknown tenant) or 4404 (unknown ``agent_id``).

A frame in is ``{"text", "user_id"?, "context"?}``, validated with the rules of ``POST
/api/gateway/message``; a bad frame gets an ``error`` event and the socket stays open. Out, as they
happen: every event of :mod:`common.events` as ``{"type": <event>, ...data}``, then ``{"type": "done",
"answer", "agent", "conversation_key", "metadata"}``. One turn runs at a time per socket: frames that
arrive meanwhile wait their turn. A client that disconnects does not stop the running turn: it finishes
and persists (frames still waiting are dropped).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from rest_framework.exceptions import ValidationError

from common.errors import ERROR_INVALID_KEY, ERROR_UNKNOWN_AGENT, DomainError, _flatten, error_body
from conversations.graph import TurnInput, run_turn
from routing import snapshot
from tenants.auth import _client_for, key_hash
from tenants.models import Tenant

logger = logging.getLogger(__name__)

CLOSE_UNAUTHORIZED = 4401
CLOSE_UNKNOWN_AGENT = 4404
SUBPROTOCOL_PREFIX = "bearer."

ERROR_WS_NOT_AUTHENTICATED = (
    "Missing or invalid API key; send ?key=<key>, 'Authorization: Bearer <key>' or the subprotocol "
    "'bearer.<key>', or log in as staff and name the tenant with ?tenant=<slug>."
)
ERROR_WS_TENANT_REQUIRED = "Staff sessions must name the tenant to act for with ?tenant=<slug>."
ERROR_WS_MALFORMED_JSON = "The frame is not valid JSON."
ERROR_WS_NOT_AN_OBJECT = 'A frame must be a JSON object: {"text": "...", "user_id"?, "context"?}.'
ERROR_WS_BINARY = "Send text frames of JSON, not binary frames."

# Turns of sockets that went away keep running to the end (and persist); references keep them alive.
_RUNNING_TURNS: set[asyncio.Task] = set()


async def turns_finished() -> None:
    """Wait for every turn this process is running for a socket (tests, shutdown)."""
    while _RUNNING_TURNS:
        await asyncio.gather(*list(_RUNNING_TURNS), return_exceptions=True)


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _raw_key(scope: dict[str, Any], query: dict[str, list[str]]) -> str | None:
    """The raw API key the client offered, wherever it put it; None when it offered none."""
    if query.get("key"):
        return query["key"][0].strip()
    header = _header(scope, b"authorization")
    if header:
        scheme, _, raw = header.partition(" ")
        return raw.strip() if scheme.lower() == "bearer" else ""
    for protocol in scope.get("subprotocols") or []:
        if protocol.startswith(SUBPROTOCOL_PREFIX):
            return protocol[len(SUBPROTOCOL_PREFIX) :]
    return None


def _chosen_subprotocol(scope: dict[str, Any]) -> str | None:
    """The subprotocol to answer: the first one offered that is not the key, else the key's (a browser
    fails a handshake whose answer names none of the offered ones)."""
    offered = scope.get("subprotocols") or []
    others = [p for p in offered if not p.startswith(SUBPROTOCOL_PREFIX)]
    return (others or offered or [None])[0]


def _tenant_for(scope: dict[str, Any]) -> tuple[Tenant | None, str]:
    """The tenant this socket acts for, or None and why."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    raw = _raw_key(scope, query)
    if raw is not None:
        client = _client_for(key_hash(raw)) if raw else None
        return (client.tenant, "") if client else (None, ERROR_INVALID_KEY)
    user = scope.get("user")
    if user is None or not user.is_authenticated or not user.is_staff:
        return None, ERROR_WS_NOT_AUTHENTICATED
    slug = (query.get("tenant") or [""])[0]
    if not slug:
        return None, ERROR_WS_TENANT_REQUIRED
    tenant = Tenant.objects.filter(slug=slug, is_active=True).first()
    return (tenant, "") if tenant else (None, f"Unknown tenant {slug!r}.")


def _profile_for(agent_id: str) -> snapshot.ProfileSpec | None:
    return snapshot.current().profiles.get(agent_id)


def _validated_frame(agent_id: str, session_id: str, frame: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The frame checked as the HTTP API checks a gateway body (the URL gives agent and session)."""
    from chat.apis import _validated_message

    payload = {key: frame[key] for key in ("text", "user_id", "context") if key in frame}
    body = {"channel": "websocket", "agent_id": agent_id, "payload": {**payload, "session_id": session_id}}
    return _validated_message(SimpleNamespace(data=body))


def _error_event(exc: Exception) -> dict[str, Any]:
    """The HTTP API's error body for the same mistake, with the frame's own field names."""
    if isinstance(exc, ValidationError):
        fields = _flatten(exc.detail)
        code = "validation_error"
    elif isinstance(exc, DomainError):
        fields, code = exc.fields, exc.code
    else:
        raise exc
    fields = {name.removeprefix("payload."): messages for name, messages in fields.items()}
    message = exc.message if isinstance(exc, DomainError) else f"Invalid input: {next(iter(fields), 'frame')}."
    return {"type": "error", **error_body(code, message, fields)}


class ChatConsumer(AsyncJsonWebsocketConsumer):
    # A socket needs no channel of its own: its turn's events come from the turn it runs, and a plan's parts
    # from the workers through the plan's own channel (conversations.fanout). Without one, the consumer does not
    # wait on the layer (channels_redis allows one receiving event loop per layer instance).
    channel_layer_alias = None

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        self.agent_id: str = kwargs["agent_id"]
        self.session_id: str = kwargs["session_id"]
        self.gone = False
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.worker: asyncio.Task | None = None
        await self.accept(subprotocol=_chosen_subprotocol(self.scope))
        tenant, why = await database_sync_to_async(_tenant_for)(self.scope)
        if tenant is None:
            await self._refuse("not_authenticated", why, CLOSE_UNAUTHORIZED)
            return
        if await database_sync_to_async(_profile_for)(self.agent_id) is None:
            message = ERROR_UNKNOWN_AGENT.format(agent_id=self.agent_id)
            await self._refuse("not_found", message, CLOSE_UNKNOWN_AGENT, {"agent_id": [message]})
            return
        self.tenant = tenant
        self.worker = asyncio.create_task(self._work())

    async def _refuse(self, code: str, message: str, close_code: int, fields=None) -> None:
        self.gone = True
        await self.send_json({"type": "error", **error_body(code, message, fields)})
        await self.close(code=close_code)

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        if self.worker is None:
            return  # refused: nothing more is read
        if text_data is None:
            await self._send_error("malformed_frame", ERROR_WS_BINARY)
            return
        try:
            frame = json.loads(text_data)
        except ValueError as exc:
            await self._send_error("malformed_json", ERROR_WS_MALFORMED_JSON, {"frame": [str(exc)]})
            return
        if not isinstance(frame, dict):
            await self._send_error("malformed_frame", ERROR_WS_NOT_AN_OBJECT, {"frame": [ERROR_WS_NOT_AN_OBJECT]})
            return
        self.frames.put_nowait(frame)

    async def _send_error(self, code: str, message: str, fields=None) -> None:
        await self._send({"type": "error", **error_body(code, message, fields)})

    async def _send(self, content: dict[str, Any]) -> None:
        if self.gone:
            return
        try:
            await self.send_json(content)
        except Exception as exc:  # noqa: BLE001 — a client gone mid-turn; the turn goes on
            logger.info("WebSocket send failed: %s", exc)
            self.gone = True

    async def _work(self) -> None:
        """Run the frames' turns one after another, for as long as the socket is open."""
        while not self.gone:
            frame = await self.frames.get()
            try:
                data, profile = await database_sync_to_async(_validated_frame)(self.agent_id, self.session_id, frame)
            except (ValidationError, DomainError) as exc:
                await self._send(_error_event(exc))
                continue
            except Exception:
                logger.exception("WebSocket frame not validated")
                await self._send_error("server_error", "The frame could not be read.")
                continue
            turn_input = TurnInput(
                tenant_pk=self.tenant.pk,
                tenant_slug=self.tenant.slug,
                profile=profile,
                text=data["payload"]["text"],
                session_id=self.session_id,
                user_id=data["payload"].get("user_id", ""),
                channel="websocket",
                context=data["payload"].get("context") or {},
                snapshot=data.get("snapshot"),
            )
            # The turn is its own task, kept referenced and shielded: a disconnect cancels this worker,
            # never the turn, which finishes and persists whatever happens to the socket.
            task = asyncio.create_task(self._turn(turn_input))
            _RUNNING_TURNS.add(task)
            task.add_done_callback(_RUNNING_TURNS.discard)
            await asyncio.shield(task)

    async def _turn(self, turn_input: TurnInput) -> None:
        async def emit(event: str, data: dict[str, Any]) -> None:
            await self._send({"type": event, **data})

        try:
            result = await run_turn(replace(turn_input, emit=emit))
        except Exception:
            logger.exception("WebSocket turn failed for %s", turn_input.conversation_key)
            await self._send_error("server_error", "The turn failed.")
            return
        await self._send({"type": "done", **result.as_dict()})

    async def disconnect(self, code) -> None:
        self.gone = True
        if self.worker is not None:
            self.worker.cancel()  # waiting frames are dropped; a running turn is shielded and goes on
