"""The chat API: gateway, routing debug, health, agents, sessions.

Views stay thin: validate, resolve the tenant from the key, call the graph, a
selector or a service. Errors are mapped to JSON in one place (:mod:`common.errors`).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from adrf.views import APIView as AsyncAPIView
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import (
    ERROR_CONVERSATION_NOT_FOUND,
    ERROR_DEBUG_FORBIDDEN,
    ERROR_PREVIEW_FORBIDDEN,
    ERROR_RESPONSE,
    ERROR_TEXT_TOO_LONG,
    ERROR_UNKNOWN_AGENT,
    DomainError,
    NotFound,
)
from conversations.graph import TurnInput, new_session_id, run_turn
from conversations.models import Conversation
from conversations.selectors import conversation_get_for_tenant, conversation_messages
from conversations.services import session_clear, session_end
from handoffs.selectors import handoff_list_for_conversation
from routing import snapshot
from routing.decide import route_decide
from routing.rollout import flag_evaluate
from tenants import schema as _schema  # noqa: F401  (registers the bearer scheme)
from tenants.auth import ApiClient
from tenants.models import Tenant

logger = logging.getLogger(__name__)

ERROR_TENANT_REQUIRED = "Staff sessions must name the tenant_id to act for."


class IsDebugClient(permissions.BasePermission):
    """A key created with ``--debug``, or a staff user's session."""

    message = ERROR_DEBUG_FORBIDDEN

    def has_permission(self, request, view) -> bool:
        user = request.user
        if isinstance(user, ApiClient):
            return user.can_debug
        return bool(user and user.is_authenticated and user.is_staff)


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of converting them."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class PayloadSerializer(serializers.Serializer):
    text = StrictCharField(max_length=None, trim_whitespace=True)
    session_id = StrictCharField(max_length=200, required=False, allow_blank=False)
    user_id = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    channel_id = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    context = serializers.DictField(required=False, default=dict)


class MessageInputSerializer(serializers.Serializer):
    channel = StrictCharField(max_length=64, required=False, default="api")
    agent_id = serializers.SlugField(max_length=64)
    tenant_id = serializers.SlugField(
        max_length=64,
        required=False,
        help_text="Ignored for API keys (the key names the tenant); required for staff sessions.",
    )
    payload = PayloadSerializer()


GATEWAY_EXAMPLE = OpenApiExample(
    "Invoice question",
    value={
        "channel": "web",
        "agent_id": "telecom_contas",
        "payload": {
            "text": "Minha fatura veio alta",
            "session_id": "web-001",
            "user_id": "u1",
            "context": {"msisdn": "5511999999999", "invoice_id": "INV001"},
        },
    },
    request_only=True,
)

ANSWER_RESPONSE = inline_serializer(
    "Answer",
    {
        "answer": serializers.CharField(),
        "agent": serializers.CharField(),
        "conversation_key": serializers.CharField(),
        "metadata": serializers.DictField(),
    },
)


def _tenant_for(request, data: dict[str, Any]) -> Tenant:
    user = request.user
    if isinstance(user, ApiClient):
        return user.tenant
    slug = data.get("tenant_id")
    if not slug:
        raise DomainError(ERROR_TENANT_REQUIRED, fields={"tenant_id": [ERROR_TENANT_REQUIRED]})
    tenant = Tenant.objects.filter(slug=slug, is_active=True).first()
    if tenant is None:
        raise DomainError(f"Unknown tenant_id {slug!r}.", fields={"tenant_id": [f"Unknown tenant_id {slug!r}."]})
    return tenant


def _validated_message(request) -> tuple[dict[str, Any], snapshot.ProfileSpec]:
    """Validate a gateway-shaped body; raises before anything is stored."""
    serializer = MessageInputSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    data["snapshot"] = current = snapshot.current()
    profile = current.profiles.get(data["agent_id"])
    if profile is None:
        message = ERROR_UNKNOWN_AGENT.format(agent_id=data["agent_id"])
        raise DomainError(message, fields={"agent_id": [message]})
    limit = profile.guardrails.get("max_input_chars", settings.MAX_INPUT_CHARS)
    if len(data["payload"]["text"]) > limit:
        message = ERROR_TEXT_TOO_LONG.format(limit=limit)
        raise DomainError(message, fields={"payload.text": [message]})
    return data, profile


def _turn_input(request, data: dict[str, Any], profile: snapshot.ProfileSpec) -> TurnInput:
    tenant = _tenant_for(request, data)
    payload = data["payload"]
    return TurnInput(
        tenant_pk=tenant.pk,
        tenant_slug=tenant.slug,
        profile=profile,
        text=payload["text"],
        session_id=payload.get("session_id") or new_session_id(),
        user_id=payload.get("user_id", ""),
        channel=data.get("channel") or "api",
        context=payload.get("context") or {},
        snapshot=data.get("snapshot"),
    )


class GatewayMessageApi(AsyncAPIView):
    @extend_schema(
        summary="Send one user message through the routing graph",
        request=MessageInputSerializer,
        responses={200: ANSWER_RESPONSE, 400: ERROR_RESPONSE, 401: ERROR_RESPONSE},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request):
        data, profile = await sync_to_async(_validated_message)(request)
        turn_input = await sync_to_async(_turn_input)(request, data, profile)
        result = await run_turn(turn_input)
        return Response(result.as_dict())


# Turns of clients that went away keep running to the end (and persist); references keep them alive.
_RUNNING_TURNS: set[asyncio.Task] = set()


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()


class GatewayMessageStreamApi(AsyncAPIView):
    """``POST /api/gateway/message/stream``: the same turn, as Server-Sent Events while it happens."""

    @extend_schema(
        summary="Send one user message and receive the turn's events as Server-Sent Events",
        description=(
            "Same body as POST /api/gateway/message. Answers `text/event-stream`: `route`, `agent`, `handoff`, "
            "`tool_call`, `token`, `discard`, `partial` events as they happen (see common/events.py), then "
            "`done` with exactly the JSON the non-streaming route answers. Bad input is refused before the "
            "stream starts, with the usual JSON error. A client that disconnects does not stop the turn."
        ),
        request=MessageInputSerializer,
        responses={200: OpenApiResponse(description="text/event-stream"), 400: ERROR_RESPONSE, 401: ERROR_RESPONSE},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request):
        data, profile = await sync_to_async(_validated_message)(request)
        turn_input = await sync_to_async(_turn_input)(request, data, profile)
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

        async def emit(event: str, payload: dict[str, Any]) -> None:
            queue.put_nowait((event, payload))

        async def turn() -> None:
            try:
                result = await run_turn(replace(turn_input, emit=emit))
                queue.put_nowait(("done", result.as_dict()))
            except Exception:
                logger.exception("Streaming turn failed")
                queue.put_nowait(("error", {"error": {"code": "server_error", "message": "The turn failed."}}))
            finally:
                queue.put_nowait(None)

        # A context of its own: the request's thread-sensitive executor ends with the request (a client that
        # disconnects), and the turn must still reach the database to finish and persist.
        task = asyncio.create_task(turn(), context=contextvars.Context())
        _RUNNING_TURNS.add(task)
        task.add_done_callback(_RUNNING_TURNS.discard)

        async def events():
            while (item := await queue.get()) is not None:
                yield _sse(*item)

        response = StreamingHttpResponse(events(), content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # proxies must not hold the stream back
        return response


MULTI_AGENT_FLAG = "multi_agent"
COHORT_MULTI_AGENT = "multi_agent"
COHORT_SINGLE_AGENT = "single_agent"


class IsPreviewClient(permissions.BasePermission):
    """A key allowed to preview the multi-agent graph, or a staff user's session."""

    message = ERROR_PREVIEW_FORBIDDEN

    def has_permission(self, request, view) -> bool:
        user = request.user
        if isinstance(user, ApiClient):
            return user.can_preview
        return bool(user and user.is_authenticated and user.is_staff)


def _flag_routed(turn_input: TurnInput, current: snapshot.Snapshot, *, preview: bool) -> TurnInput:
    """Seed 003's feature flag: the ``multi_agent`` cohort gets the multi-agent graph, everyone else the
    single-agent path; a preview always gets the multi-agent graph (and says what the flag would have done).

    The flag comes from the compiled snapshot: no query beyond the version check every message makes.
    """
    evaluation = flag_evaluate(
        current.flags.get(MULTI_AGENT_FLAG),
        key=MULTI_AGENT_FLAG,
        user_id=turn_input.user_id,
        session_id=turn_input.session_id,
        tenant=turn_input.tenant_slug,
    ).as_dict()
    if preview:
        forced = {**evaluation, "enabled": True, "reason": "preview", "flag_result": evaluation["enabled"]}
        return replace(turn_input, flags={MULTI_AGENT_FLAG: forced})
    enabled = evaluation["enabled"]
    return replace(
        turn_input,
        single_agent=not enabled,
        flags={MULTI_AGENT_FLAG: evaluation},
        cohort=COHORT_MULTI_AGENT if enabled else COHORT_SINGLE_AGENT,
    )


class ChatMessageApi(AsyncAPIView):
    """``POST /api/chat/message``: the flag decides; :class:`MultiAgentChatMessageApi` forces the preview."""

    preview = False

    @extend_schema(
        summary="One user message, on the path the multi_agent rollout flag gives this user",
        description=(
            "Same body and answer as POST /api/gateway/message. Users in the `multi_agent` flag's cohort go "
            "through the multi-agent graph (the profile's mode: supervisor plans, handoffs, delegation); everyone "
            "else through the single-agent path (the profile's fallback specialist answers everything). "
            "`metadata.flags.multi_agent` says the result and why (kill_switch, user_override, tenant_override, "
            "bucket, no_stickiness_value), with the bucket."
        ),
        request=MessageInputSerializer,
        responses={200: ANSWER_RESPONSE, 400: ERROR_RESPONSE, 401: ERROR_RESPONSE},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request):
        data, profile = await sync_to_async(_validated_message)(request)
        turn_input = await sync_to_async(_turn_input)(request, data, profile)
        result = await run_turn(_flag_routed(turn_input, data["snapshot"], preview=self.preview))
        return Response(result.as_dict())


class MultiAgentChatMessageApi(ChatMessageApi):
    permission_classes = [IsPreviewClient]
    preview = True

    @extend_schema(
        summary="One user message, always through the multi-agent graph (preview)",
        description="For keys allowed to preview (`can_preview`) and staff sessions; bypasses the rollout flag.",
        request=MessageInputSerializer,
        responses={200: ANSWER_RESPONSE, 400: ERROR_RESPONSE, 401: ERROR_RESPONSE, 403: ERROR_RESPONSE},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request):
        return await super().post(request)


class DebugRouteApi(AsyncAPIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="The routing decision alone (nothing executed or stored)",
        request=MessageInputSerializer,
        responses={200: OpenApiResponse(description="The decision with its mode"), 400: ERROR_RESPONSE},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request):
        data, profile = await sync_to_async(_validated_message)(request)
        turn_input = await sync_to_async(_turn_input)(request, data, profile)
        conversation = await Conversation.objects.filter(conversation_key=turn_input.conversation_key).values(
            "state", "active_specialist"
        ).afirst() or {"state": "", "active_specialist": ""}
        decision = await route_decide(
            profile=profile,
            text=turn_input.text,
            state=conversation["state"] or None,
            active_agent=conversation["active_specialist"],
        )
        return Response(
            {
                "mode": profile.effective_mode,
                "agent_id": profile.agent_id,
                "conversation_key": turn_input.conversation_key,
                **decision.as_dict(),
            }
        )


async def _reachable(endpoint: str, timeout: float = 0.5) -> bool:
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), timeout)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


def _database_status() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # noqa: BLE001 — health reports, never raises
        return f"error: {type(exc).__name__}"


class HealthApi(AsyncAPIView):
    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]

    @extend_schema(
        summary="Service health: database, broker, profiles, routing modes, MCP servers",
        responses={200: OpenApiResponse(description="Health report")},
    )
    async def get(self, request):
        database = await sync_to_async(_database_status)()
        current = await sync_to_async(snapshot.current)()
        servers = [server for server in current.servers.values() if server.enabled]
        reachable = await asyncio.gather(*(_reachable(server.endpoint) for server in servers))
        from agents.llm import llm_configured

        return Response(
            {
                "status": "ok" if database == "ok" else "degraded",
                "routing_mode": settings.ROUTING_MODE or "per-profile",
                "routing_modes": {agent_id: p.effective_mode for agent_id, p in current.profiles.items()},
                "agents": sorted(current.profiles),
                "database": {"engine": connection.vendor, "status": database},
                "broker": "redis" if settings.REDIS_URL else "none (embedded, in-process)",
                "llm": "openai" if llm_configured() else "offline",
                "routing_config_version": current.version,
                "mcp_servers": [
                    {"name": server.name, "endpoint": server.endpoint, "reachable": ok}
                    for server, ok in zip(servers, reachable, strict=True)
                ],
            }
        )


class AgentsApi(APIView):
    @extend_schema(
        summary="Agent profiles with their specialists and intents",
        responses={200: OpenApiResponse(description="Profiles, specialists and intents")},
    )
    def get(self, request):
        current = snapshot.current()
        return Response(
            {
                "agents": [
                    {
                        "agent_id": profile.agent_id,
                        "name": profile.name,
                        "domain": profile.domain,
                        "routing_mode": profile.effective_mode,
                        "fallback_agent": profile.fallback_agent,
                        "llm_router_enabled": profile.llm_router_enabled,
                        "specialists": [
                            {
                                "name": spec.name,
                                "display_name": spec.display_name,
                                "description": spec.description,
                                "prompt_version": spec.prompt_version,
                                "tools": sorted(spec.allowed_tools),
                                "handoff_targets": list(spec.handoff_targets),
                            }
                            for spec in profile.specialists.values()
                        ],
                        "intents": [
                            {
                                "name": intent.name,
                                "agent": intent.agent,
                                "domain": intent.domain,
                                "priority": intent.priority,
                                "keywords": list(intent.keywords),
                                "mcp_tools": list(intent.mcp_tools),
                                "next_state": intent.next_state,
                            }
                            for intent in profile.intents
                        ],
                    }
                    for profile in current.profiles.values()
                ]
            }
        )


def _conversation_not_found() -> NotFound:
    return NotFound(ERROR_CONVERSATION_NOT_FOUND, fields={"conversation_key": [ERROR_CONVERSATION_NOT_FOUND]})


def _conversation_for(request, conversation_key: str) -> Conversation:
    """The conversation this request may act on: its key's tenant's, or any for a staff session.

    Raises :class:`NotFound` otherwise: another tenant's conversation is indistinguishable from an unknown key.
    """
    user = request.user
    if isinstance(user, ApiClient):
        conversation = conversation_get_for_tenant(tenant=user.tenant, conversation_key=conversation_key)
    elif user.is_staff:
        conversation = Conversation.objects.filter(conversation_key=conversation_key).first()
    else:
        conversation = None
    if conversation is None:
        raise _conversation_not_found()
    return conversation


SESSION_ENDED_RESPONSE = inline_serializer(
    "SessionEnded",
    {
        "conversation_key": serializers.CharField(),
        "ended": serializers.BooleanField(),
        "ended_at": serializers.DateTimeField(),
    },
)

SESSION_CLEARED_RESPONSE = inline_serializer(
    "SessionCleared",
    {
        "conversation_key": serializers.CharField(),
        "cleared": inline_serializer(
            "SessionClearedCounts",
            {
                "messages": serializers.IntegerField(),
                "route_decisions": serializers.IntegerField(),
                "tool_calls": serializers.IntegerField(),
            },
        ),
    },
)


class SessionApi(APIView):
    @extend_schema(
        summary="End a session: forget its live agent state (history is kept)",
        description=(
            "Resets the conversation's state, active specialist and intent, open sub-conversation, pending result, "
            "pending permission and granted permissions, and stamps `ended_at`. Messages, route decisions, tool "
            "calls and handoffs stay. The next message with the same session_id starts fresh on the same conversation."
        ),
        request=None,
        responses={200: SESSION_ENDED_RESPONSE, 401: ERROR_RESPONSE, 404: ERROR_RESPONSE},
    )
    def delete(self, request, conversation_key: str):
        conversation = _conversation_for(request, conversation_key)
        try:
            conversation = session_end(conversation=conversation)
        except Conversation.DoesNotExist:
            raise _conversation_not_found() from None
        return Response(
            {"conversation_key": conversation.conversation_key, "ended": True, "ended_at": conversation.ended_at}
        )


class SessionClearApi(APIView):
    @extend_schema(
        summary="Clear a session's history: messages, route decisions and tool calls",
        description=(
            "Deletes the conversation's messages, route decisions and tool calls and sets its message count to 0. "
            "Handoff rows stay (analytics count them) with their context summaries blanked. The live state is kept; "
            "`DELETE /api/sessions/{conversation_key}` ends the session."
        ),
        request=None,
        responses={200: SESSION_CLEARED_RESPONSE, 401: ERROR_RESPONSE, 404: ERROR_RESPONSE},
    )
    def post(self, request, conversation_key: str):
        conversation = _conversation_for(request, conversation_key)
        try:
            cleared = session_clear(conversation=conversation)
        except Conversation.DoesNotExist:
            raise _conversation_not_found() from None
        return Response({"conversation_key": conversation.conversation_key, "cleared": cleared})


class SessionMessagesApi(APIView):
    @extend_schema(
        summary="A conversation's messages, route decisions and handoffs",
        responses={200: OpenApiResponse(description="The conversation"), 404: ERROR_RESPONSE},
    )
    def get(self, request, conversation_key: str):
        conversation = _conversation_for(request, conversation_key)
        messages, decisions = conversation_messages(conversation=conversation)
        return Response(
            {
                "conversation_key": conversation.conversation_key,
                "state": conversation.state,
                "active_specialist": conversation.active_specialist,
                "granted_permissions": conversation.granted_permissions,
                "sub_conversation": conversation.sub_conversation,
                "pending_result": conversation.pending_result,
                "pending_permission": conversation.pending_permission,
                "ended_at": conversation.ended_at,
                "messages": messages,
                "route_decisions": decisions,
                "handoffs": handoff_list_for_conversation(conversation_id=conversation.pk),
            }
        )
