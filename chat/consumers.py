"""WebSocket chat: ``/ws/chat/<agent_id>/<session_id>/``, a turn's events as they happen.

Authentication (the tenant always comes from the key, or from ``?tenant=`` for staff):

* the tenant's API key as ``?key=<raw>``, an ``Authorization: Bearer <raw>`` header, or the subprotocol
  ``bearer.<raw>`` (browsers cannot set headers; offer ``["chat", "bearer.<raw>"]`` and the server
  answers ``chat``);
* or a logged-in staff session (the session cookie, through ``AuthMiddlewareStack``) with ``?tenant=<slug>``, a
  tenant it holds the right to act for (:class:`tenants.models.TenantRight`).

Refusals are sent after the handshake, so that every client (browsers too) sees why: the socket is
accepted, gets one ``{"type": "error", "error": {...}}`` event and is closed with 4401 (no or invalid
key, a session that is not staff, no tenant named), 4403 (a staff session naming a tenant it may not act for,
``?route=multi_agent`` without the right to preview, or ``?version=draft`` without the debug right), 4400 (an
unknown ``?route=`` or ``?version=``, or a disabled draft), 4404 (unknown ``agent_id``) or 4429 (``throttled``:
the client's address is locked out after too many wrong keys, or the key or user opens sockets faster than
``API_RATE_PER_KEY``). Frames are messages: they count against the key's message rate and against the socket's
session (``API_MESSAGE_RATE_PER_KEY``, ``API_MESSAGE_RATE_PER_SESSION``, or the tenant's own); one over either
gets a ``throttled`` error event naming the limit and is dropped; the socket stays open (:mod:`tenants.throttles`).

Which graph answers: the ``multi_agent`` rollout flag's verdict for the user (``?route=rollout``, the default),
the profile's own mode (``?route=profile``), or the multi-agent preview (``?route=multi_agent``: keys allowed to
preview and staff), as on the HTTP routes (:class:`chat.intake.Route`). Which version: the released one customers
get (``?version=live``, the default), or the profile's draft (``?version=draft``: debug keys, and sessions holding
the debug right over the tenant, :mod:`chat.drafts`) — every turn of the socket then runs the draft, read afresh
from the snapshot at each frame, and its answers say ``metadata.version == "draft"``.

A frame in is ``{"text", "user_id"?, "context"?}``, read by the front door (:mod:`chat.intake`) as a
gateway body whose agent and session come from the URL; a bad frame gets an ``error`` event and the socket
stays open. Out, as they happen: every event of :mod:`common.events` as ``{"type": <event>, ...data}``,
then ``{"type": "done", "answer", "agent", "conversation_key", "metadata"}``. One turn runs at a time per
socket: frames that arrive meanwhile wait their turn. A client that disconnects does not stop the running
turn: it finishes and persists (frames still waiting are dropped).

Between turns, what people do with the conversation (docs/desk.md) reaches the socket as it happens: a person's
reply as ``{"type": "human", "message": {"id", "role": "human", "content", "author": {"kind": "human", "name",
"id"}, "created_at"}}``, and the escalation taken, transferred or handed back as ``{"type": "escalation",
"escalation": {...}, "notice": <words for the customer>}``. They come through the channel layer's group of the
conversation, which the socket joins when it opens: with Redis, from whichever process the person acts in. A
layer that fails costs the socket those pushes (it keeps trying), never the chat; a reply it missed is in
``GET /api/sessions/{conversation_key}/messages``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from rest_framework.exceptions import Throttled, ValidationError

from chat.drafts import (
    DraftForbidden,
    Version,
    draft_allowed,
    draft_apply,
    draft_check,
    draft_profile,
    version_parse,
)
from chat.intake import (
    MessageIn,
    PreviewForbidden,
    Route,
    TenantForbidden,
    message_read,
    profile_get,
    route_check,
    route_parse,
    tenant_resolve,
    turn_input_build,
)
from chat.pushes import LISTEN_READY_SECONDS, conversation_listen, listen_stop, pushed_event
from common.errors import ERROR_DEBUG_FORBIDDEN, ERROR_INVALID_KEY, DomainError, error_body, error_fields
from common.infra.bus import tenant_group
from common.parsers import JsonTooDeep, json_loads_limited
from conversations.public import TurnInput, conversation_group, run_turn, turn_detach
from tenants.models import Tenant, TenantRight
from tenants.public import (
    API_SCOPE,
    MESSAGES_SCOPE,
    api_client_authenticate,
    client_address,
    principal_ident,
    request_throttle,
)

logger = logging.getLogger(__name__)

CLOSE_BAD_REQUEST = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_UNKNOWN_AGENT = 4404
CLOSE_RATE_LIMITED = 4429
SUBPROTOCOL_PREFIX = "bearer."

ERROR_WS_NOT_AUTHENTICATED = (
    "Missing or invalid API key; send ?key=<key>, 'Authorization: Bearer <key>' or the subprotocol "
    "'bearer.<key>', or log in as staff and name the tenant with ?tenant=<slug>."
)
ERROR_WS_MALFORMED_JSON = "The frame is not valid JSON."
ERROR_WS_NOT_AN_OBJECT = 'A frame must be a JSON object: {"text": "...", "user_id"?, "context"?}.'
ERROR_WS_BINARY = "Send text frames of JSON, not binary frames."


def _header(scope: Mapping[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _raw_key(scope: Mapping[str, Any], query: dict[str, list[str]]) -> str | None:
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


def _chosen_subprotocol(scope: Mapping[str, Any]) -> str | None:
    """The subprotocol to answer: the first one offered that is not the key, else the key's (a browser
    fails a handshake whose answer names none of the offered ones)."""
    offered = scope.get("subprotocols") or []
    others = [p for p in offered if not p.startswith(SUBPROTOCOL_PREFIX)]
    return (others or offered or [None])[0]


class Refused(Exception):
    """The socket is refused: the error event's code, message and fields, and the close code."""

    def __init__(self, code: str, message: str, close_code: int, fields: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.close_code, self.fields = code, message, close_code, fields


def _address(scope: Mapping[str, Any]) -> str:
    client = scope.get("client")
    return client_address(client[0] if client else None, _header(scope, b"x-forwarded-for") or None)


def _principal(scope: Mapping[str, Any], query: dict[str, list[str]]) -> tuple[Any, str | None]:
    """Who opens the socket (the key's client, else the session's user) and whom it counts against
    (:func:`tenants.throttles.principal_ident`), the socket's opening counted; raises :class:`Refused`."""
    raw = _raw_key(scope, query)
    if raw is not None:
        try:
            principal: Any = api_client_authenticate(raw_key=raw, address=_address(scope)) if raw else None
        except Throttled as exc:
            raise Refused(exc.default_code, str(exc.detail), CLOSE_RATE_LIMITED) from None
        if principal is None:
            raise Refused("not_authenticated", ERROR_INVALID_KEY, CLOSE_UNAUTHORIZED)
    else:
        principal = scope.get("user")
    ident = principal_ident(principal)
    try:
        if ident is not None:
            request_throttle(scope=API_SCOPE, ident=ident)
    except Throttled as exc:
        raise Refused(exc.default_code, str(exc.detail), CLOSE_RATE_LIMITED) from None
    return principal, ident


def _tenant(principal: Any, query: dict[str, list[str]], right: TenantRight = TenantRight.ACT) -> Tenant:
    """The tenant the socket acts for (the key's, or the one a staff session names with ``?tenant=``)."""
    try:
        return tenant_resolve(
            principal=principal, tenant_slug=(query.get("tenant") or [""])[0], field_name="tenant", right=right
        )
    except TenantForbidden as exc:
        raise Refused(exc.code, exc.message, CLOSE_FORBIDDEN, exc.fields) from None
    except DomainError as exc:
        message = exc.message if exc.fields else ERROR_WS_NOT_AUTHENTICATED
        raise Refused("not_authenticated", message, CLOSE_UNAUTHORIZED, exc.fields) from None


def _admitted(scope: Mapping[str, Any], agent_id: str) -> tuple[Tenant, Route, Version, str | None]:
    """The tenant, route and version this socket acts for, through the front door, and whom its frames count
    against (:func:`tenants.throttles.principal_ident`); raises :class:`Refused`."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    principal, ident = _principal(scope, query)
    try:
        route = route_parse((query.get("route") or [""])[0], default=Route.ROLLOUT)
        version = version_parse((query.get("version") or [""])[0])
    except DomainError as exc:
        raise Refused(exc.code, exc.message, CLOSE_BAD_REQUEST, exc.fields) from None
    tenant = _tenant(principal, query)
    try:
        route_check(principal=principal, route=route)
        draft_check(principal=principal, tenant=tenant, version=version)
    except (PreviewForbidden, DraftForbidden) as exc:
        raise Refused(exc.code, exc.message, CLOSE_FORBIDDEN, exc.fields) from None
    try:
        profile_get(agent_id)
    except DomainError as exc:
        raise Refused("not_found", exc.message, CLOSE_UNKNOWN_AGENT, exc.fields) from None
    if version is Version.DRAFT:
        try:
            draft_profile(agent_id)
        except DomainError as exc:
            raise Refused(exc.code, exc.message, CLOSE_BAD_REQUEST, exc.fields) from None
    return tenant, route, version, ident


class FrameThrottled(DomainError):
    """A frame over the sender's message rate: answered with an ``error`` event, the socket stays open."""

    code = Throttled.default_code


def _frame_turn(
    *,
    tenant: Tenant,
    route: Route,
    agent_id: str,
    session_id: str,
    frame: dict[str, Any],
    ident: str | None = None,
    version: Version = Version.LIVE,
) -> TurnInput:
    """A frame read by the front door as a gateway body whose agent and session come from the URL, counted against
    ``ident``'s message rate (raises :class:`FrameThrottled` over it), on the profile's draft for ``version`` draft
    (raises :class:`~chat.drafts.DraftDisabled` when it was disabled since the handshake)."""
    try:
        if ident is not None:
            key_tenant = tenant.pk if ident.startswith("key:") else None  # a staff user counts at the settings' rate
            request_throttle(scope=MESSAGES_SCOPE, ident=ident, tenant_pk=key_tenant)
        payload = {key: frame[key] for key in ("text", "user_id", "context", "language") if key in frame}
        message: MessageIn = message_read(
            {"channel": "websocket", "agent_id": agent_id, "payload": {**payload, "session_id": session_id}}
        )
        turn_input = turn_input_build(tenant=tenant, message=message, route=route)
    except Throttled as exc:
        raise FrameThrottled(str(exc.detail)) from None
    return draft_apply(turn_input) if version is Version.DRAFT else turn_input


def _error_event(exc: Exception) -> dict[str, Any]:
    """The HTTP API's error body for the same mistake, with the frame's own field names."""
    if isinstance(exc, ValidationError):
        fields = error_fields(exc.detail)
        code = "validation_error"
    elif isinstance(exc, DomainError):
        fields, code = exc.fields, exc.code
    else:
        raise exc
    fields = {name.removeprefix("payload."): messages for name, messages in fields.items()}
    message = exc.message if isinstance(exc, DomainError) else f"Invalid input: {next(iter(fields), 'frame')}."
    return {"type": "error", **error_body(code, message, fields)}


class ChatConsumer(AsyncJsonWebsocketConsumer):
    # The consumer's own layer handling is off: its turn's events come from the turn it runs, a plan's parts from
    # the workers through the plan's own channel (conversations.fanout), and what people do with the conversation
    # through conversation_listen, which survives a layer that fails (Channels' own closes the socket).
    channel_layer_alias = None  # type: ignore[assignment]  # None: no layer (Channels allows it; the stubs say str)

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        self.agent_id: str = kwargs["agent_id"]
        self.session_id: str = kwargs["session_id"]
        self.gone = False
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.worker: asyncio.Task | None = None
        self.listener: asyncio.Task | None = None
        await self.accept(subprotocol=_chosen_subprotocol(self.scope))
        try:
            admitted = await database_sync_to_async(_admitted)(self.scope, self.agent_id)
            self.tenant, self.route, self.version, self.ident = admitted
        except Refused as refused:
            await self._refuse(refused)
            return
        ready = asyncio.Event()
        group = conversation_group(f"{self.tenant.slug}:{self.agent_id}:{self.session_id}")
        self.listener = asyncio.create_task(
            conversation_listen(group, self._pushed, ready=ready, gone=lambda: self.gone)
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ready.wait(), timeout=LISTEN_READY_SECONDS)
        self.worker = asyncio.create_task(self._work())

    async def _pushed(self, event: dict[str, Any]) -> None:
        shown = pushed_event(event)
        if shown is not None:
            await self._send(shown)

    async def _refuse(self, refused: Refused) -> None:
        self.gone = True
        await self.send_json({"type": "error", **error_body(refused.code, refused.message, refused.fields)})
        await self.close(code=refused.close_code)

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        if self.worker is None:
            return  # refused: nothing more is read
        if text_data is None:
            await self._send_error("malformed_frame", ERROR_WS_BINARY)
            return
        try:
            frame = await self.decode_json(text_data)
        except JsonTooDeep as exc:
            await self._send_error(exc.default_code, str(exc.detail), {"frame": [str(exc.detail)]})
            return
        except ValueError as exc:
            await self._send_error("malformed_json", ERROR_WS_MALFORMED_JSON, {"frame": [str(exc)]})
            return
        if not isinstance(frame, dict):
            await self._send_error("malformed_frame", ERROR_WS_NOT_AN_OBJECT, {"frame": [ERROR_WS_NOT_AN_OBJECT]})
            return
        self.frames.put_nowait(frame)

    @classmethod
    async def decode_json(cls, text_data: str) -> Any:
        """A frame's JSON, its nesting bounded like an HTTP body's (``API_JSON_MAX_DEPTH``): raises
        :class:`~common.parsers.JsonTooDeep`, or ``ValueError`` for text that is not JSON."""
        return json_loads_limited(text_data)

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
                turn_input = await database_sync_to_async(_frame_turn)(
                    tenant=self.tenant,
                    route=self.route,
                    agent_id=self.agent_id,
                    session_id=self.session_id,
                    frame=frame,
                    ident=self.ident,
                    version=self.version,
                )
            except (ValidationError, DomainError) as exc:
                await self._send(_error_event(exc))
                continue
            except Exception:
                logger.exception("WebSocket frame not validated")
                await self._send_error("server_error", "The frame could not be read.")
                continue
            # The turn is its own task, kept referenced and shielded: a disconnect cancels this worker,
            # never the turn, which finishes and persists whatever happens to the socket.
            await asyncio.shield(turn_detach(self._turn(turn_input)))

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
        await listen_stop(self.listener)


def _events_admitted(scope: Mapping[str, Any]) -> Tenant:
    """The tenant whose events this socket may watch: a debug key's own, or the one a staff session holding the
    debug right names with ``?tenant=``; raises :class:`Refused`."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    principal, _ = _principal(scope, query)
    tenant = _tenant(principal, query, TenantRight.DEBUG)
    if not draft_allowed(principal=principal, tenant=tenant):
        raise Refused("permission_denied", ERROR_DEBUG_FORBIDDEN, CLOSE_FORBIDDEN)
    return tenant


class EventsConsumer(AsyncJsonWebsocketConsumer):
    """``/ws/events``: a tenant's operational events (:mod:`common.infra.bus`) as they are published, one
    ``{"type": "event", "event": <envelope>}`` each, for debug clients (authenticated as the chat socket, refused
    with 4403 without the debug right). Needs the Redis channel layer, which every web worker shares. Frames in
    are ignored."""

    async def connect(self) -> None:
        await self.accept(subprotocol=_chosen_subprotocol(self.scope))
        try:
            tenant = await database_sync_to_async(_events_admitted)(self.scope)
        except Refused as refused:
            await self.send_json({"type": "error", **error_body(refused.code, refused.message, refused.fields)})
            await self.close(code=refused.close_code)
            return
        self.group = tenant_group(tenant.slug)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_json({"type": "subscribed", "tenant": tenant.slug})

    async def platform_events(self, message: dict[str, Any]) -> None:
        """A ``platform.events`` message of the layer (:data:`common.infra.bus.CHANNEL_MESSAGE_TYPE`): a batch, in
        order."""
        for event in message["events"]:
            await self.send_json({"type": "event", "event": event})

    async def disconnect(self, code) -> None:
        group = getattr(self, "group", None)
        if group is not None:
            await self.channel_layer.group_discard(group, self.channel_name)
