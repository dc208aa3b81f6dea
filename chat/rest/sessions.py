"""A tenant's conversations: list them, read one's messages and live state, follow it, end it, clear it."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, permissions, serializers
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.public import ERROR_UNKNOWN_PROFILE, profile_pk
from chat.asyncapi import AsyncAPIView
from chat.intake import KnownParametersSerializer, StrictCharField, StrictSlugField, principal_is_staff, tenant_resolve
from chat.negotiation import EventStreamNegotiation
from chat.pushes import conversation_listen, pushed_event
from chat.rest.messages import sse
from common.cursors import ERROR_CURSOR, cursor_time
from common.errors import ERROR_CONVERSATION_NOT_FOUND, DomainError, NotFound, error_responses
from conversations.models import CONVERSATION_OUTCOMES, Conversation
from conversations.public import (
    CONVERSATION_STATUSES,
    conversation_escalation,
    conversation_get,
    conversation_get_for_tenant,
    conversation_group,
    conversation_list,
    conversation_messages,
    conversation_status,
    message_after,
    message_cursor,
    session_clear,
    session_end,
)
from handoffs.public import handoff_list_for_conversation
from tenants.models import Tenant, TenantRight
from tenants.public import ApiClient, tenant_right_held


def _conversation_not_found() -> NotFound:
    return NotFound(ERROR_CONVERSATION_NOT_FOUND, fields={"conversation_key": [ERROR_CONVERSATION_NOT_FOUND]})


def conversation_for(request, conversation_key: str, right: TenantRight | None = None) -> Conversation:
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
        conversation = conversation_for(request, conversation_key)
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
        conversation = conversation_for(request, conversation_key)
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
        conversation = conversation_for(request, conversation_key)
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
        conversation = await sync_to_async(conversation_for)(request, conversation_key)
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
                    yield sse(shown.pop("type"), shown)
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
        conversation = conversation_for(request, conversation_key)
        return Response(
            {
                "conversation_key": conversation.conversation_key,
                **{name: getattr(conversation, name) for name in CHECKPOINT_FIELDS},
            }
        )
