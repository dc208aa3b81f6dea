"""The chat API: gateway, chat and multi-agent preview (as JSON or Server-Sent Events), routing debug, the effective
configuration (:mod:`chat.environment`), agents, sessions and their live state (health: :mod:`chat.health`).

Views stay thin: the front door (:mod:`chat.intake`) reads the message and finds its tenant, profile and route;
the engine runs the turn; selectors and services do the rest. Errors are mapped to JSON in one place
(:mod:`common.errors`). Which route follows the ``multi_agent`` rollout flag: see :class:`chat.intake.Route`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from inspect import iscoroutinefunction
from typing import Any, ClassVar
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from django.utils.cache import patch_vary_headers
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions, permissions, serializers
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import UsagePurpose
from agents.selectors import ERROR_UNKNOWN_PROFILE, profile_pk
from agents.services import model_usage_record
from agents.usage import TurnUsage, usage_counting
from chat.asyncapi import AsyncAPIView
from chat.drafts import draft_apply
from chat.environment import effective_configuration
from chat.idempotency import PARAMETER as IDEMPOTENCY_KEY
from chat.idempotency import idempotency_key, idempotent, refuse_on_streams
from chat.intake import (
    KnownFieldsSerializer,
    KnownParametersSerializer,
    MessageInputSerializer,
    Route,
    StrictCharField,
    StrictSlugField,
    message_body_limit,
    message_intake,
    principal_is_staff,
    request_origin,
    tenant_resolve,
)
from chat.negotiation import EventStreamNegotiation
from chat.openai.turns import TURN_ID_PATTERN, TurnRef, turn_ref_read
from chat.permissions import IsDebugClient, IsPreviewClient
from chat.pushes import conversation_listen, pushed_event
from common.cursors import ERROR_CURSOR, cursor_time
from common.errors import ERROR_CONVERSATION_NOT_FOUND, DomainError, NotFound, error_responses
from common.infra import stock_paths, tracing
from conversations.delivery import conversation_group
from conversations.desk.escalations import escalation_public
from conversations.feedback import ERROR_INVALID_MESSAGE, ERROR_NOT_AN_ANSWER, NotAnAnswer, feedback_give
from conversations.graph import run_turn, turn_abandon, turn_begin, turn_detach
from conversations.language import language_asked
from conversations.models import CONVERSATION_OUTCOMES, FEEDBACK_COMMENT_MAX_LENGTH, Conversation, FeedbackRating
from conversations.selectors import (
    CONVERSATION_STATUSES,
    answer_of_turn,
    conversation_escalation,
    conversation_get,
    conversation_get_for_tenant,
    conversation_goal_state,
    conversation_list,
    conversation_messages,
    conversation_route_state,
    conversation_status,
    message_after,
    message_cursor,
)
from conversations.services import session_clear, session_end
from conversations.turn import Turn, TurnInput, TurnResult
from handoffs.selectors import handoff_list_for_conversation
from routing import snapshot
from routing.decide import route_decide
from routing.goals.decide import goal_decide
from tenants import schema as _schema  # noqa: F401  (registers the bearer scheme)
from tenants.auth import ApiClient
from tenants.models import Tenant, TenantRight
from tenants.selectors import tenant_right_held

logger = logging.getLogger(__name__)


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
        "message_id": serializers.IntegerField(
            allow_null=True, help_text="The stored answer: what POST /api/sessions/{conversation_key}/feedback rates."
        ),
        "metadata": serializers.DictField(),
    },
)


# -- a message in, its answer out ---------------------------------------------------------------------------


class MessageBody:
    """For the views whose body is a message: a body longer than any message can be is a 413 by its length,
    before it is parsed (:func:`chat.intake.message_body_limit`, read by :func:`common.parsers.body_limit`)."""

    def body_limit(self) -> int:
        return message_body_limit()


class MessageApi(MessageBody, AsyncAPIView):
    """A message through the graph its :attr:`route` gives (the subclasses differ only in that and the schema)."""

    route: ClassVar[Route] = Route.PROFILE
    streams: ClassVar[bool] = False  # Server-Sent Events: an Idempotency-Key is refused (a stream is not replayed)
    throttle_scope = "messages"  # tenants/throttles.py: the rate of the routes that run a turn
    turn_input: TurnInput
    begun: Turn | None = None  # the turn started with the checks (its ticket taken), for run_turn

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """DRF's checks (authentication, permissions, throttles), the message read into the engine's input, and
        the turn started (its ticket taken, its conversation read): one trip to the request's thread for all,
        since adrf runs ``initial`` there and each reads the database. Only a POST carries a message. A request
        with an ``Idempotency-Key`` starts its turn later, if its key has no stored answer."""
        super().initial(request, *args, **kwargs)
        if request.method == "POST":
            if self.streams:
                refuse_on_streams(request)
            self.turn_input = message_intake(
                principal=request.user,
                data=request.data,
                route=self.route,
                headers=request.headers,
                origin=request_origin(request),
            )
            if not self.streams and idempotency_key(request) is None:
                self.begun = turn_begin(self.turn_input)

    async def async_dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        """adrf's dispatch, with the trip for :meth:`initial` shielded from a client that goes away: a turn it
        started holds the conversation's ticket, which is then handed on (:func:`turn_abandon`)."""
        self.args, self.kwargs = args, kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = self.default_response_headers
        try:
            checked = asyncio.ensure_future(sync_to_async(self.initial)(request, *args, **kwargs))
            try:
                await asyncio.shield(checked)
            except asyncio.CancelledError:
                checked.add_done_callback(self._begun_abandon)
                raise
            method = (request.method or "").lower()
            handler: Any = getattr(self, method, self.http_method_not_allowed)
            if method not in self.http_method_names:
                handler = self.http_method_not_allowed
            if iscoroutinefunction(handler):
                response = await handler(request, *args, **kwargs)
            else:
                response = await sync_to_async(handler)(request, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 — DRF's own handling, as adrf's dispatch
            response = self.handle_exception(exc)
        self.response = self.finalize_response(request, response, *args, **kwargs)
        return self.response

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response) and isinstance(request._request, ASGIRequest):
            rendered_in_loop(response)
        return response

    def _begun_abandon(self, _checked: asyncio.Future[Any]) -> None:
        if self.begun is not None:
            turn_abandon(self.begun)

    if stock_paths():  # chosen when the class is made (at start-up): adrf's dispatch, Django's rendering
        del async_dispatch, finalize_response

    async def answer(self, request: Request) -> Response:
        begun = self.begun

        async def answered(data: TurnInput) -> TurnResult:
            return await run_turn(data, begun=begun)

        # An Idempotency-Key makes a retry get the stored answer instead of a second turn (chat/idempotency.py).
        return await idempotent(request, data=self.turn_input, run=answered, body=TurnResult.as_dict)

    async def stream(self, request: Request) -> StreamingHttpResponse:
        """The turn's events as Server-Sent Events while it happens, then ``done`` with the JSON answer.

        Bad input is refused before the stream starts. The turn runs in a context of its own: the request's
        thread-sensitive executor ends with the request (a client that disconnects), and the turn must still
        reach the database to finish and persist. Only the trace is carried into it (a caller's ``traceparent``).
        """
        turn_input = self.turn_input
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

        turn_detach(turn(), context=tracing.detached_context())

        async def events() -> AsyncIterator[bytes]:
            while (item := await queue.get()) is not None:
                yield _sse(*item)

        response = StreamingHttpResponse(events(), content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # proxies must not hold the stream back
        return response


def rendered_in_loop(response: Response) -> None:
    """Render ``response`` now, in the event loop, and hand it to Django's async handler as rendered.

    Django's async handler renders a response in a thread unless its ``render`` is a coroutine function, which it
    awaits; encoding JSON does no I/O, so the trip to the thread is saved (one of a message's seven). Only for a
    request of the async handler (an ``ASGIRequest``): the sync one (WSGI, Django's test client) calls ``render()``
    and keeps the method."""
    response.render()

    async def rendered() -> Response:
        return response

    response.render = rendered  # type: ignore[method-assign]  # this response's own, once rendered


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()


# Every status a message POST can answer besides 200 (403: a session's CSRF or tenant right, or the preview).
MESSAGE_ERRORS = error_responses(400, 401, 403, 413, 415, 429, 503)
# The routes that take an Idempotency-Key (chat/idempotency.py) also answer 409 and 422.
JSON_RESPONSES = {200: ANSWER_RESPONSE, **MESSAGE_ERRORS, **error_responses(409, 422)}
SSE_RESPONSES = {200: OpenApiResponse(description="text/event-stream"), **MESSAGE_ERRORS}
PREVIEW_JSON_RESPONSES = JSON_RESPONSES
PREVIEW_SSE_RESPONSES = SSE_RESPONSES
SSE_DESCRIPTION = (
    "Answers `text/event-stream`: `route`, `agent`, `handoff`, `tool_call`, `token`, `discard`, `partial` events as "
    "they happen (see common/events.py), then `done` with exactly the JSON the non-streaming route answers. Bad "
    "input is refused before the stream starts, with the usual JSON error. A client that disconnects does not "
    "stop the turn."
)
FLAG_DESCRIPTION = (
    "Users in the `multi_agent` rollout flag's cohort go through the multi-agent graph (the profile's mode: "
    "supervisor plans, handoffs, delegation); everyone else through the single-agent path (the profile's fallback "
    "specialist answers everything). `metadata.flags.multi_agent` says the result and why (kill_switch, "
    "user_override, tenant_override, bucket, no_stickiness_value), with the bucket."
)
PROFILE_DESCRIPTION = (
    "The profile's configured routing mode, whatever the `multi_agent` rollout flag says; "
    "`metadata.flags.multi_agent` tells what the flag would have given (`flag_result`)."
)
PREVIEW_DESCRIPTION = (
    "For keys allowed to preview (`can_preview`) and staff sessions: always the multi-agent graph, bypassing the "
    "rollout flag; `metadata.flags.multi_agent.flag_result` tells what the flag would have given."
)


@extend_schema(parameters=[IDEMPOTENCY_KEY])
class GatewayMessageApi(MessageApi):
    """``POST /api/gateway/message``: the profile's own mode."""

    @extend_schema(
        summary="Send one user message through the routing graph, in the profile's mode",
        description=PROFILE_DESCRIPTION,
        request=MessageInputSerializer,
        responses=JSON_RESPONSES,
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> Response:
        return await self.answer(request)


class GatewayMessageStreamApi(MessageApi):
    """``POST /api/gateway/message/stream``: the gateway's turn, as Server-Sent Events while it happens."""

    streams = True
    content_negotiation_class = EventStreamNegotiation

    @extend_schema(
        summary="Send one user message in the profile's mode and receive the turn's events as Server-Sent Events",
        description=f"Same body as POST /api/gateway/message. {PROFILE_DESCRIPTION} {SSE_DESCRIPTION}",
        request=MessageInputSerializer,
        responses=SSE_RESPONSES,
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> StreamingHttpResponse:
        return await self.stream(request)


@extend_schema(parameters=[IDEMPOTENCY_KEY])
class ChatMessageApi(MessageApi):
    """``POST /api/chat/message``: the ``multi_agent`` flag decides per user."""

    route = Route.ROLLOUT

    @extend_schema(
        summary="One user message, on the path the multi_agent rollout flag gives this user",
        description=f"Same body and answer as POST /api/gateway/message. {FLAG_DESCRIPTION}",
        request=MessageInputSerializer,
        responses=JSON_RESPONSES,
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> Response:
        return await self.answer(request)


class ChatMessageStreamApi(MessageApi):
    """``POST /api/chat/message/stream``: the chat route's turn, as Server-Sent Events."""

    route = Route.ROLLOUT
    streams = True
    content_negotiation_class = EventStreamNegotiation

    @extend_schema(
        summary="One user message on the rollout flag's path, as Server-Sent Events",
        description=f"Same body as POST /api/chat/message. {FLAG_DESCRIPTION} {SSE_DESCRIPTION}",
        request=MessageInputSerializer,
        responses=SSE_RESPONSES,
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> StreamingHttpResponse:
        return await self.stream(request)


@extend_schema(parameters=[IDEMPOTENCY_KEY])
class MultiAgentChatMessageApi(MessageApi):
    """``POST /api/chat/multi-agent/message``: the multi-agent graph, whatever the flag says (preview)."""

    route = Route.PREVIEW
    permission_classes = [IsPreviewClient]

    @extend_schema(
        summary="One user message, always through the multi-agent graph (preview)",
        description=PREVIEW_DESCRIPTION,
        request=MessageInputSerializer,
        responses=PREVIEW_JSON_RESPONSES,
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> Response:
        return await self.answer(request)


class MultiAgentChatMessageStreamApi(MessageApi):
    """``POST /api/chat/multi-agent/message/stream``: the preview, as Server-Sent Events."""

    route = Route.PREVIEW
    permission_classes = [IsPreviewClient]
    streams = True
    content_negotiation_class = EventStreamNegotiation

    @extend_schema(
        summary="One user message through the multi-agent graph (preview), as Server-Sent Events",
        description=f"{PREVIEW_DESCRIPTION} {SSE_DESCRIPTION}",
        request=MessageInputSerializer,
        responses=PREVIEW_SSE_RESPONSES,
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> StreamingHttpResponse:
        return await self.stream(request)


VERSIONS = ("live", "draft")


class DebugInputSerializer(MessageInputSerializer):
    """The gateway body, and which version of the profile to try: the live one customers get, or the draft."""

    version = serializers.ChoiceField(
        choices=VERSIONS,
        required=False,
        default="live",
        help_text="live: the released version customers are served; draft: what the profile's editors are changing.",
    )


def debug_intake(request: Request) -> TurnInput:
    """A debug request's engine input, with the profile's draft when the body asks for ``"version": "draft"``."""
    data = request.data
    version = "live"
    if isinstance(data, dict) and "version" in data:
        data = dict(data)
        version = data.pop("version")
        if version not in VERSIONS:
            raise serializers.ValidationError({"version": [f"Must be one of: {', '.join(VERSIONS)}."]})
    turn_input = message_intake(
        principal=request.user, data=data, route=Route.PROFILE, right=TenantRight.DEBUG, counted=False
    )
    if version == "draft":
        turn_input = draft_apply(turn_input)  # 400 naming version when the draft is disabled
    return turn_input


async def _debug_usage_record(usage: TurnUsage, turn_input: TurnInput) -> None:
    """The debug call's model calls, in the asking tenant's usage."""
    if usage.calls:
        await sync_to_async(model_usage_record)(
            usage=usage,
            purpose=UsagePurpose.DEBUG,
            profile_id=turn_input.profile.pk,
            tenant_id=turn_input.tenant_pk,
        )


class DebugRouteApi(MessageBody, AsyncAPIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="The routing decision alone (nothing executed or stored)",
        request=DebugInputSerializer,
        responses={200: OpenApiResponse(description="The decision with its mode"), **MESSAGE_ERRORS},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> Response:
        turn_input = await sync_to_async(debug_intake)(request)
        state, active_agent = await sync_to_async(conversation_route_state)(
            conversation_key=turn_input.conversation_key
        )
        profile = turn_input.profile
        usage = TurnUsage()
        with usage_counting(usage):  # a classifier or the supervisor's planner may call a model
            decision = await route_decide(
                profile=profile, text=turn_input.text, state=state or None, active_agent=active_agent
            )
        await _debug_usage_record(usage, turn_input)
        return Response(
            {
                "mode": profile.effective_mode,
                "agent_id": profile.agent_id,
                "version": profile.version if profile.version is not None else "draft",
                "conversation_key": turn_input.conversation_key,
                **decision.as_dict(),
            }
        )


class DebugPlanApi(MessageBody, AsyncAPIView):
    """``POST /api/debug/plan``: what goal mode would do with a message, executing nothing."""

    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="Goal mode's reading and plan for a message (nothing executed or stored)",
        description=(
            "The same body as /api/debug/route. Returns the goal and entities read from the message "
            "(intent_output), the capabilities they resolve to (execution_intents), the execution plan (a DAG of "
            "steps over the domains' MCP capabilities), or the clarification the confidence gate would ask — for "
            "the profile's goals whatever its routing mode, and with the conversation's pending goal when the "
            "session has one."
        ),
        request=DebugInputSerializer,
        responses={200: OpenApiResponse(description="The goal decision and its plan"), **MESSAGE_ERRORS},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> Response:
        turn_input = await sync_to_async(debug_intake)(request)
        goal_state = await sync_to_async(conversation_goal_state)(conversation_key=turn_input.conversation_key)
        profile = turn_input.profile
        usage = TurnUsage()
        with usage_counting(usage):  # goal mode's reading may call a model
            decision = await goal_decide(profile=profile, text=turn_input.text, goal_state=goal_state)
        await _debug_usage_record(usage, turn_input)
        shown = decision.as_dict()
        return Response(
            {
                "mode": profile.effective_mode,
                "agent_id": profile.agent_id,
                "version": profile.version if profile.version is not None else "draft",
                "conversation_key": turn_input.conversation_key,
                "status": shown["status"],
                "intent_output": shown["intent_output"],
                "reading": shown["reading"],
                "execution_intent": shown["execution_intents"][0] if shown["execution_intents"] else None,
                "execution_intents": shown["execution_intents"],
                "plan": shown["plan"],
                "clarification": shown["clarification"],
                "reason": shown["reason"],
            }
        )


class DebugEnvApi(APIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="The effective configuration of this process, secrets masked",
        description=(
            "Routing mode override, the model endpoints, models and timeouts, router LLM and embeddings, MCP servers, "
            "database, Redis and broker, supervisor executor, observability and webhook settings, limits and "
            "throttles, the code version, and each profile's model settings (endpoint, model, the name of its key's "
            "variable and whether it is set). Every secret is `***` (or empty when unset); URLs lose their "
            "credentials and query values."
        ),
        responses={200: OpenApiResponse(description="The configuration"), **error_responses(401, 403, 429, 503)},
    )
    def get(self, request):
        return Response(effective_configuration())


class AgentsApi(APIView):
    @extend_schema(
        summary="Agent profiles with their specialists and intents",
        responses={
            200: OpenApiResponse(description="Profiles, specialists and intents"),
            **error_responses(401, 429, 503),
        },
    )
    def get(self, request):
        current = snapshot.current()
        # Display names and descriptions in the client's language (Accept-Language), else each profile's own.
        asked = language_asked(request.headers.get("Accept-Language"))
        response = Response(
            {
                "agents": [
                    {
                        "agent_id": profile.agent_id,
                        "name": profile.name_in(asked),
                        "language": asked or profile.language,
                        "domain": profile.domain,
                        "routing_mode": profile.effective_mode,
                        "fallback_agent": profile.fallback_agent,
                        "llm_router_enabled": profile.llm_router_enabled,
                        "specialists": [
                            {
                                "name": spec.name,
                                "display_name": profile.display_name_in(spec, asked),
                                "description": profile.description_in(spec, asked),
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
        patch_vary_headers(response, ["Accept-Language"])
        return response


def _conversation_not_found() -> NotFound:
    return NotFound(ERROR_CONVERSATION_NOT_FOUND, fields={"conversation_key": [ERROR_CONVERSATION_NOT_FOUND]})


def _conversation_for(request, conversation_key: str, right: TenantRight | None = None) -> Conversation:
    """The conversation this request may act on: its key's tenant's, or, for a staff session, one of a tenant over
    which it holds ``right``; by default the right to read (``GET``) or to end and clear (the other methods)
    conversations.

    Raises :class:`NotFound` otherwise: another tenant's conversation is indistinguishable from an unknown key.
    """
    user = request.user
    if right is None:
        right = TenantRight.READ if request.method in permissions.SAFE_METHODS else TenantRight.MANAGE
    if isinstance(user, ApiClient):
        conversation = conversation_get_for_tenant(tenant=user.tenant, conversation_key=conversation_key)
    elif principal_is_staff(user):
        conversation = conversation_get(conversation_key=conversation_key)
        if conversation is not None and not tenant_right_held(user=user, tenant_id=conversation.tenant_id, right=right):
            conversation = None
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
        "outcome": serializers.ChoiceField(
            choices=[choice for choice, _ in CONVERSATION_OUTCOMES],
            help_text="How the conversation ended: resolved, abandoned, or escalated when a person had it "
            "(docs/analytics.md, Outcomes).",
        ),
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
            "calls and handoffs stay. The next message with the same session_id starts fresh on the same conversation. "
            "An open conversation's outcome is decided now (`outcome`): resolved when the customer's last message "
            "closed it (thanks, goodbye, the profile's closing words) or its latest rating is up, else abandoned; a "
            "conversation a person held stays escalated, and its escalation is closed."
        ),
        request=None,
        responses={200: SESSION_ENDED_RESPONSE, **error_responses(401, 403, 404, 429, 503)},
    )
    def delete(self, request, conversation_key: str):
        conversation = _conversation_for(request, conversation_key)
        try:
            conversation = session_end(conversation=conversation)
        except Conversation.DoesNotExist:
            raise _conversation_not_found() from None
        return Response(
            {
                "conversation_key": conversation.conversation_key,
                "ended": True,
                "ended_at": conversation.ended_at,
                "outcome": conversation.outcome,
            }
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
        responses={200: SESSION_CLEARED_RESPONSE, **error_responses(401, 403, 404, 429, 503)},
    )
    def post(self, request, conversation_key: str):
        conversation = _conversation_for(request, conversation_key)
        try:
            cleared = session_clear(conversation=conversation)
        except Conversation.DoesNotExist:
            raise _conversation_not_found() from None
        return Response({"conversation_key": conversation.conversation_key, "cleared": cleared})


LIST_LIMIT = 50  # the lists' page: the sessions, a conversation's messages when paged
LIST_LIMIT_MAX = 200


class MessagesQuerySerializer(KnownParametersSerializer):
    """A page of a conversation's messages: none of these, the whole conversation."""

    limit = serializers.IntegerField(
        min_value=1,
        max_value=LIST_LIMIT_MAX,
        required=False,
        help_text=f"Messages per page (1–{LIST_LIMIT_MAX}); with a `cursor` and without, {LIST_LIMIT} by default.",
    )
    cursor = StrictCharField(max_length=400, required=False, help_text="The `next` of the page before, as given.")


SESSION_MESSAGES_RESPONSE = inline_serializer(
    "SessionMessages",
    {
        "conversation_key": serializers.CharField(),
        "state": serializers.CharField(),
        "active_specialist": serializers.CharField(),
        "granted_permissions": serializers.ListField(child=serializers.CharField()),
        "sub_conversation": serializers.DictField(allow_null=True),
        "pending_result": serializers.DictField(allow_null=True),
        "pending_permission": serializers.DictField(allow_null=True),
        "ended_at": serializers.DateTimeField(allow_null=True),
        "escalation": serializers.DictField(allow_null=True, help_text="A person holds it: where, who; else null."),
        "messages": serializers.ListField(
            child=serializers.DictField(), help_text="Oldest first, each with its `id` and `author`."
        ),
        "route_decisions": serializers.ListField(child=serializers.DictField()),
        "handoffs": serializers.ListField(child=serializers.DictField()),
        "next": serializers.CharField(
            allow_null=True, help_text="The path of the next page of messages; null on the last, or when not paged."
        ),
    },
)


class SessionMessagesApi(APIView):
    @extend_schema(
        summary="A conversation's messages, route decisions and handoffs, whole or in pages",
        description=(
            "The conversation's live state and its messages oldest first, with its route decisions and handoffs. "
            "Without `limit` or `cursor` the whole conversation, `next` null. With them, a page of `limit` messages "
            f"(default {LIST_LIMIT}) after `cursor` (the `next` of the page before): the page carries the route "
            "decisions and handoffs made after the page before's last message and up to its own last (the last page: "
            "to the end), so the pages add up to the whole conversation; `next` is the path of the next page (null on "
            "the last). Another tenant's conversation is a 404."
        ),
        parameters=[MessagesQuerySerializer],
        responses={200: SESSION_MESSAGES_RESPONSE, **error_responses(400, 401, 403, 404, 429, 503)},
    )
    def get(self, request, conversation_key: str):
        conversation = _conversation_for(request, conversation_key)
        query = MessagesQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        paged = bool(query.validated_data)
        cursor = query.validated_data.get("cursor")
        page = conversation_messages(
            conversation=conversation,
            after=message_after(cursor) if cursor else None,
            limit=query.validated_data.get("limit", LIST_LIMIT) if paged else None,
        )
        next_page = None
        if page.after is not None:
            following = request.query_params.copy()
            following["cursor"] = message_cursor(page.after)
            next_page = f"{request.path}?{following.urlencode()}"
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
                "escalation": conversation_escalation(conversation=conversation),
                "messages": page.messages,
                "route_decisions": page.route_decisions,
                "handoffs": handoff_list_for_conversation(
                    conversation_id=conversation.pk, since=page.since, until=page.until
                ),
                "next": next_page,
            }
        )


# -- a tenant's conversations -----------------------------------------------------------------------------------

ERROR_KEY_LISTS_ITS_TENANT = "An API key lists its own tenant's conversations: leave tenant out."
ERROR_NOT_A_READER = "Only an API key or a staff session may list conversations."


class SessionsQuerySerializer(KnownParametersSerializer):
    agent_id = StrictCharField(max_length=64, required=False, help_text="Only this profile's conversations.")
    status = serializers.ChoiceField(
        choices=CONVERSATION_STATUSES,
        required=False,
        help_text="Only conversations of this status: open (no outcome yet), or their outcome — resolved, escalated "
        "(a person had it), abandoned; unmeasured: ended before outcomes were recorded.",
    )
    with_person = serializers.BooleanField(
        required=False, help_text="true: only conversations a person holds now (waiting for one, or answered by one)."
    )
    updated_after = serializers.DateTimeField(
        required=False, help_text="Last active at or after this time (ISO 8601 date, or date and time; UTC if no zone)."
    )
    updated_before = serializers.DateTimeField(required=False, help_text="Last active before this time.")
    limit = serializers.IntegerField(
        min_value=1, max_value=LIST_LIMIT_MAX, required=False, help_text=f"Per page (default {LIST_LIMIT})."
    )
    cursor = StrictCharField(max_length=400, required=False, help_text="The `next` of the page before, as given.")
    tenant = StrictSlugField(
        max_length=64, required=False, help_text="A staff session: the tenant to list (one it may read); a key: none."
    )


SESSION_CURSOR_FIELDS = frozenset({"o", "r", "p"})  # what DRF's cursor holds: offset, reverse, position


class SessionCursor(CursorPagination):
    """The sessions list's pages (DRF's cursor pagination): newest first by last activity (``updated_at``, then
    ``id``), ``limit`` per page; a cursor that is not one is a 400 naming it."""

    ordering = ("-updated_at", "-id")
    page_size = LIST_LIMIT
    page_size_query_param = "limit"
    max_page_size = LIST_LIMIT_MAX

    def decode_cursor(self, request: Request) -> Any:
        """DRF's cursor, its position checked too (DRF hands it to the query as sent): only the fields DRF writes,
        strict base64, a position that is a time every database stores (:func:`common.cursors.cursor_time`)."""
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is None:
            return None
        try:
            query = base64.b64decode(encoded.encode("ascii"), validate=True).decode("ascii")
            tokens = parse_qs(query, keep_blank_values=True, strict_parsing=True)
            if not tokens.keys() <= SESSION_CURSOR_FIELDS or any(len(values) != 1 for values in tokens.values()):
                raise ValueError(query)
            cursor = super().decode_cursor(request)
            assert cursor is not None  # a cursor was sent
            position: Any = cursor.position  # the text of the ordering's first field (DRF's stubs say int)
            if position is not None:
                position = cursor_time(position).isoformat()
        except (ValueError, exceptions.NotFound):
            raise DomainError(ERROR_CURSOR, fields={"cursor": [ERROR_CURSOR]}) from None
        return cursor._replace(position=position)


SESSION_ROW = inline_serializer(
    "Session",
    {
        "conversation_key": serializers.CharField(),
        "agent_id": serializers.CharField(),
        "session_id": serializers.CharField(),
        "user_id": serializers.CharField(),
        "channel": serializers.CharField(),
        "status": serializers.ChoiceField(choices=CONVERSATION_STATUSES),
        "with_person": serializers.BooleanField(help_text="A person holds it now (waiting for one, or answering)."),
        "state": serializers.CharField(),
        "active_specialist": serializers.CharField(),
        "cohort": serializers.CharField(),
        "message_count": serializers.IntegerField(),
        "created_at": serializers.DateTimeField(),
        "updated_at": serializers.DateTimeField(help_text="Its last activity: the list's order, newest first."),
        "ended_at": serializers.DateTimeField(allow_null=True),
    },
)
SESSION_LIST = inline_serializer(
    "SessionList",
    {
        "sessions": serializers.ListField(child=SESSION_ROW),
        "next": serializers.URLField(allow_null=True, help_text="The next page's URL; null on the last page."),
    },
)


class SessionsApi(APIView):
    """``GET /api/sessions``: a tenant's conversations, newest first."""

    @extend_schema(
        summary="A tenant's conversations, newest first, filtered, in pages",
        description=(
            "An API key lists its tenant's conversations; a staff session those of the `tenant` it names and may "
            "read. Newest first by last activity (`updated_at`). Filters: `agent_id`, `status`, `with_person`, "
            f"`updated_after`/`updated_before`. Pages of `limit` (default {LIST_LIMIT}, at most {LIST_LIMIT_MAX}); "
            "`next` is the URL of the next page with the same filters (null on the last). A conversation active while "
            "you page moves to the top of the list: start again from the first page to see it. A parameter the list "
            "does not take, or a bad value, is a 400 naming it."
        ),
        parameters=[SessionsQuerySerializer],
        responses={200: SESSION_LIST, **error_responses(400, 401, 403, 429, 503)},
    )
    def get(self, request: Request) -> Response:
        query = SessionsQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = query.validated_data
        tenant = _tenant_listed(request, data.get("tenant", ""))
        profile_id = None
        if "agent_id" in data:
            profile_id = profile_pk(data["agent_id"])
            if profile_id is None:
                message = ERROR_UNKNOWN_PROFILE.format(profile=data["agent_id"])
                raise DomainError(message, fields={"agent_id": [message]})
        rows = conversation_list(
            tenant_id=tenant.pk,
            profile_id=profile_id,
            status=data.get("status"),
            with_person=data.get("with_person"),
            updated_after=data.get("updated_after"),
            updated_before=data.get("updated_before"),
        )
        paginator = SessionCursor()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        return Response({"sessions": [_session_row(row) for row in page], "next": paginator.get_next_link()})


def _tenant_listed(request: Request, slug: str) -> Tenant:
    """The tenant whose conversations the request lists: a key's own, or the one a staff session names and may read."""
    user = request.user
    if isinstance(user, ApiClient):
        if slug:
            raise DomainError(ERROR_KEY_LISTS_ITS_TENANT, fields={"tenant": [ERROR_KEY_LISTS_ITS_TENANT]})
        return user.tenant
    if not principal_is_staff(user):
        raise exceptions.PermissionDenied(ERROR_NOT_A_READER)
    return tenant_resolve(principal=user, tenant_slug=slug, field_name="tenant", right=TenantRight.READ)


def _session_row(conversation: Conversation) -> dict[str, Any]:
    return {
        "conversation_key": conversation.conversation_key,
        "agent_id": conversation.profile.agent_id,
        "session_id": conversation.session_id,
        "user_id": conversation.user_id,
        "channel": conversation.channel,
        "status": conversation_status(conversation),
        "with_person": conversation.escalation_id is not None,
        "state": conversation.state,
        "active_specialist": conversation.active_specialist,
        "cohort": conversation.cohort,
        "message_count": conversation.message_count,
        "created_at": conversation.created_at,
        "updated_at": conversation.updated_at,
        "ended_at": conversation.ended_at,
    }


EVENTS_KEEPALIVE_SECONDS = 15.0  # a comment line this often keeps proxies from closing a quiet stream


class SessionEventsApi(AsyncAPIView):
    """``GET /api/sessions/{conversation_key}/events``: what people do with the conversation, as Server-Sent Events
    while the client stays (the SSE face's side of the desk; a WebSocket client gets the same on its socket)."""

    content_negotiation_class = EventStreamNegotiation

    @extend_schema(
        summary="Follow a conversation: a person's replies and the escalation's changes, as Server-Sent Events",
        description=(
            "Answers `text/event-stream` and stays open: `human` (a person's reply: `message` with `id`, `role` "
            "`human`, `content`, `author` {kind `human`, name, id}, `created_at`) and `escalation` (taken, "
            "transferred or handed back: `escalation`, `notice` in the customer's language) events as they happen, "
            "and a comment line every 15 s. A reply missed while disconnected is in `GET "
            "/api/sessions/{conversation_key}/messages`. An API key follows its tenant's conversations; a staff "
            "session those of a tenant it may read. Another tenant's conversation is a 404."
        ),
        responses={200: OpenApiResponse(description="text/event-stream"), **error_responses(401, 403, 404, 429, 503)},
    )
    async def get(self, request: Request, conversation_key: str) -> StreamingHttpResponse:
        conversation = await sync_to_async(_conversation_for)(request, conversation_key)
        group = conversation_group(conversation.conversation_key)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def deliver(event: dict[str, Any]) -> None:
            shown = pushed_event(event)
            if shown is not None:
                queue.put_nowait(shown)

        async def events() -> AsyncIterator[bytes]:
            ready = asyncio.Event()
            listener = asyncio.create_task(conversation_listen(group, deliver, ready=ready))
            try:
                await ready.wait()
                yield b": following\n\n"
                while True:
                    try:
                        shown = await asyncio.wait_for(queue.get(), timeout=EVENTS_KEEPALIVE_SECONDS)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    yield _sse(shown.pop("type"), shown)
            finally:
                listener.cancel()

        response = StreamingHttpResponse(events(), content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


CHECKPOINT_FIELDS = (
    "state",
    "active_specialist",
    "active_intent",
    "active_backend",
    "sub_conversation",
    "pending_result",
    "pending_permission",
    "granted_permissions",
    "goal_state",
    "cohort",
    "message_count",
    "turn_tickets_issued",
    "turn_tickets_done",
    "ended_at",
    "updated_at",
)


class SessionCheckpointApi(APIView):
    @extend_schema(
        summary="A conversation's live state: what its next message starts from",
        description=(
            "The state, active specialist, intent and backend, the open sub-conversation, the result waiting for the "
            "coordinator, the pending permission question and the permissions granted, goal mode's state, the "
            "rollout cohort, the message count and the turn tickets issued and done (a turn running or waiting when "
            "they differ). Another tenant's conversation is not found."
        ),
        responses={200: OpenApiResponse(description="The live state"), **error_responses(401, 403, 404, 429, 503)},
    )
    def get(self, request, conversation_key: str):
        conversation = _conversation_for(request, conversation_key)
        return Response(
            {
                "conversation_key": conversation.conversation_key,
                **{name: getattr(conversation, name) for name in CHECKPOINT_FIELDS},
            }
        )


# -- feedback on an answer ------------------------------------------------------------------------------------


ERROR_ANSWER_ID = "Must be an answer's message_id, or a completion's or response's id (chatcmpl-…, resp_…)."


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
            {"type": "string", "pattern": TURN_ID_PATTERN},
        ]
    }
)
class AnswerIdField(serializers.Field):
    """An answer: its ``message_id``, or the id an OpenAI-compatible face gave it (``chatcmpl-…``, ``resp_…``,
    ``msg_…``: :mod:`chat.openai.turns`), read as the turn it names."""

    default_error_messages = {"invalid": ERROR_ANSWER_ID}

    def to_internal_value(self, data: Any) -> int | TurnRef:
        # A whole number written 43.0 is an integer as JSON Schema reads one: the A2A face's metadata is a protobuf
        # Struct, whose numbers are all doubles, so its message_id reaches a client so.
        if isinstance(data, float) and data.is_integer() and 1 <= data <= 2**63 - 1:
            data = int(data)
        if isinstance(data, int) and not isinstance(data, bool) and 1 <= data <= 2**63 - 1:
            return data
        ref = turn_ref_read(data) if isinstance(data, str) else None
        if ref is None:
            self.fail("invalid")
        return ref

    def to_representation(self, value: Any) -> Any:
        return value


class FeedbackInputSerializer(KnownFieldsSerializer):
    """``{message_id, rating: "up"|"down", comment?}``: one answer of the conversation, rated."""

    message_id = AnswerIdField(
        help_text="The answer rated: `message_id` of the message POST's answer (or of the stream's `done` event), or "
        "the `id` of an OpenAI-compatible completion or response (`chatcmpl-…`, `resp_…`).",
    )
    rating = serializers.ChoiceField(choices=FeedbackRating.values, help_text="up: helpful; down: not helpful.")
    comment = StrictCharField(
        max_length=FEEDBACK_COMMENT_MAX_LENGTH,
        required=False,
        allow_blank=True,
        default="",
        help_text="Optional: what was wrong or right.",
    )


FEEDBACK_RESPONSE = inline_serializer(
    "Feedback",
    {
        "conversation_key": serializers.CharField(),
        "message_id": serializers.IntegerField(),
        "rating": serializers.ChoiceField(choices=FeedbackRating.values),
        "comment": serializers.CharField(allow_blank=True),
        "replaced": serializers.BooleanField(help_text="True: this answer had a rating, which this one replaced."),
        "cohort": serializers.CharField(allow_blank=True),
        "routing_version": serializers.IntegerField(allow_null=True),
        "created_at": serializers.DateTimeField(),
        "updated_at": serializers.DateTimeField(),
        "escalation": inline_serializer(
            "FeedbackEscalation",
            {
                "id": serializers.UUIDField(),
                "status": serializers.CharField(),
                "queue": serializers.CharField(),
                "position": serializers.IntegerField(allow_null=True),
                "reason": serializers.CharField(),
                "priority": serializers.CharField(),
                "desk": serializers.CharField(),
                "person": serializers.CharField(allow_null=True),
            },
            allow_null=True,
            help_text="The rating handed the conversation to a person (the profile's escalation.on_thumbs_down): "
            "its escalation as the conversation's metadata.escalation shows it; null otherwise.",
        ),
    },
)


def _answer_pk(conversation: Conversation, answer: int | TurnRef) -> int:
    """The number of the answer a feedback names; a turn of another conversation, or one that stored no answer, is
    refused as any id that names no answer of the conversation."""
    if isinstance(answer, int):
        return answer
    same = answer.conversation_pk == conversation.pk
    message = answer_of_turn(conversation_pk=conversation.pk, turn=answer.turn) if same else None
    if message is None:
        raise NotAnAnswer(ERROR_INVALID_MESSAGE, fields={"message_id": [ERROR_NOT_AN_ANSWER]})
    return message.pk


class SessionFeedbackApi(APIView):
    """``POST /api/sessions/{conversation_key}/feedback``: a user's rating of one answer of the conversation."""

    @extend_schema(
        summary="Rate an answer of the conversation: up or down, with an optional comment",
        description=(
            "`message_id` names an answer of this conversation (the message routes answer it as `message_id`, "
            "the streams in their `done` event). One rating per answer: rating it again replaces the rating and "
            "the comment (200; the first rating answers 201). The rating keeps the answer's cohort and routing "
            "version, which `GET /api/analytics/feedback` counts. An API key rates its own tenant's conversations; "
            "a staff session those of a tenant it may chat as (tenants.act_for_tenant). Another tenant's "
            "conversation is a 404, as an unknown key; a `message_id` that is no answer of this conversation is a "
            "400 naming it. A rating down hands the conversation to a person when its profile says so "
            "(`escalation.on_thumbs_down`) and nobody holds it yet: `escalation` is then its place in the queue "
            "(null otherwise)."
        ),
        request=FeedbackInputSerializer,
        responses={
            201: FEEDBACK_RESPONSE,
            200: FEEDBACK_RESPONSE,
            **error_responses(400, 401, 403, 404, 413, 415, 429, 503),
        },
        examples=[
            OpenApiExample(
                "Not helpful",
                value={"message_id": 42, "rating": "down", "comment": "It did not answer my question."},
                request_only=True,
            )
        ],
    )
    def post(self, request, conversation_key: str):
        conversation = _conversation_for(request, conversation_key, right=TenantRight.ACT)
        serializer = FeedbackInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = request.user
        given = feedback_give(
            conversation=conversation,
            message_id=_answer_pk(conversation, data["message_id"]),
            rating=data["rating"],
            comment=data["comment"],
            user_id=conversation.user_id,
            staff_user_id=None if isinstance(user, ApiClient) else user.pk,
        )
        feedback = given.feedback
        return Response(
            {
                "conversation_key": conversation.conversation_key,
                "message_id": feedback.message_id,
                "rating": feedback.rating,
                "comment": feedback.comment,
                "replaced": not given.created,
                "cohort": feedback.cohort,
                "routing_version": feedback.routing_version,
                "created_at": feedback.created_at,
                "updated_at": feedback.updated_at,
                "escalation": (
                    escalation_public(given.escalation, position=given.position) if given.escalation else None
                ),
            },
            status=201 if given.created else 200,
        )
