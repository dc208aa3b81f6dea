"""An OpenAI-compatible face of the platform: existing clients and chat UIs use it as if it were a model.

* ``GET /v1/models`` — the enabled agent profiles, one "model" each (``id`` = ``agent_id``);
* ``POST /v1/chat/completions`` — the LAST user message of ``messages`` goes through the routing graph of the
  profile named in ``model``, streaming (``stream: true``) or not.

Same Bearer API key as the rest of the API; the tenant comes from the key. The conversation is the one of the
``X-Session-Id`` header if sent, else of the request's ``user`` field; with neither, every request starts a new
session. Earlier messages in ``messages`` are ignored: the platform keeps the conversation's history itself.
The message goes through the same front door as the chat routes (:mod:`chat.intake`): the ``multi_agent``
rollout flag decides its graph, unless the ``X-Agent-Route`` header names another route (``profile``, or
``multi_agent`` for keys allowed to preview).

Every answer carries the extension field ``x_agent_routing`` (on the final chunk when streaming): which agent
answered, the route, intent and routing method, the rollout cohort and flags, the conversation key and the
turn's handoffs. Streamed text is
the model's text as it is written; when the graph changed it afterwards (a specialist that handed the turn on,
output guardrails, judges), ``x_agent_routing.revised_answer`` holds the answer the platform stored.

Errors use OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from chat.asyncapi import AsyncAPIView
from chat.idempotency import ERROR_NOT_ON_STREAMS, idempotency_key, idempotent
from chat.idempotency import HEADER as IDEMPOTENCY_HEADER
from chat.idempotency import PARAMETER as IDEMPOTENCY_KEY
from chat.intake import (
    MessageIn,
    PreviewForbidden,
    Route,
    TextTooLong,
    UnknownProfile,
    route_check,
    route_parse,
    turn_input_build,
)
from chat.negotiation import EventStreamNegotiation
from common.errors import (
    DATABASE_UNAVAILABLE,
    ERROR_DESCRIPTIONS,
    ERROR_INVALID_KEY,
    ERROR_MALFORMED_JSON,
    ERROR_NOT_AUTHENTICATED,
    DomainError,
    database_unavailable_body,
    database_unavailable_response,
)
from common.parsers import ERROR_NUL_CHARACTER, BodyTooLarge, JsonTooDeep, NulCharacter
from conversations.graph import TurnInput, TurnResult, new_session_id, run_turn, turn_detach
from conversations.guardrails import identifier_pseudonym
from routing import snapshot
from tenants.auth import ApiClient

logger = logging.getLogger(__name__)

CHANNEL = "openai"
SESSION_HEADER = "X-Session-Id"
ROUTE_HEADER = "X-Agent-Route"
SESSION_MAX_CHARS = 200
# Unix time this process started: the "created" of every model (profiles carry no creation time).
_STARTED = int(time.time())


class OpenAIError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        type_: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message, self.status, self.param, self.code, self.type = message, status, param, code, type_

    def as_dict(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def _invalid(param: str, message: str, code: str | None = "invalid_value") -> OpenAIError:
    return OpenAIError(message, param=param, code=code)


def openai_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's errors (auth, parse, throttling) and ours, in OpenAI's error shape."""
    if isinstance(exc, OpenAIError):
        return Response(exc.as_dict(), status=exc.status)
    if isinstance(exc, exceptions.NotAuthenticated):
        error = OpenAIError(ERROR_NOT_AUTHENTICATED, status=401, code="invalid_api_key", type_="authentication_error")
    elif isinstance(exc, exceptions.AuthenticationFailed):
        error = OpenAIError(ERROR_INVALID_KEY, status=401, code="invalid_api_key", type_="authentication_error")
    elif isinstance(exc, NulCharacter):
        error = _invalid(exc.field, ERROR_NUL_CHARACTER)
    elif isinstance(exc, JsonTooDeep | BodyTooLarge):
        error = OpenAIError(str(exc.detail), status=exc.status_code, param="body", code=exc.default_code)
    elif isinstance(exc, RequestDataTooBig):
        return openai_exception_handler(BodyTooLarge(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0), context)
    elif isinstance(exc, DATABASE_UNAVAILABLE):
        request = context.get("request")
        body = database_unavailable_body(exc, f"{request.method} {request.path}" if request else "a completion")
        error = OpenAIError(body["error"]["message"], status=503, code="service_unavailable", type_="server_error")
        return database_unavailable_response(error.as_dict())
    elif isinstance(exc, exceptions.ParseError):
        error = OpenAIError(ERROR_MALFORMED_JSON, code="invalid_json")
    elif isinstance(exc, exceptions.APIException):
        error = OpenAIError(
            str(exc.detail), status=exc.status_code, code=exc.default_code, type_=_error_type(exc.status_code)
        )
    else:
        return None
    response = Response(error.as_dict(), status=error.status)
    if error.status == 401:
        response["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, exceptions.Throttled) and (wait := getattr(exc, "wait", None)):  # the stubs omit .wait
        response["Retry-After"] = str(wait)  # tenants/throttles.py; OpenAI's clients wait this long
    return response


def _error_type(status: int) -> str:
    return {
        401: "authentication_error",
        403: "permission_error",
        404: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "invalid_request_error" if status < 500 else "server_error")


# --- the schema ----------------------------------------------------------------------------------------------

OPENAI_ERROR_RESPONSE = inline_serializer(
    "OpenAIError",
    {
        "error": inline_serializer(
            "OpenAIErrorBody",
            {
                "message": serializers.CharField(),
                "type": serializers.CharField(),
                "param": serializers.CharField(allow_null=True),
                "code": serializers.CharField(allow_null=True),
            },
        )
    },
)


def _openai_errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The schema's error answers for ``codes``, in OpenAI's shape."""
    return {code: OpenApiResponse(OPENAI_ERROR_RESPONSE, description=ERROR_DESCRIPTIONS[code]) for code in codes}


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "description": "The message's text."},
            {
                "type": "array",
                "description": "Content parts; the text parts' `text` is the message.",
                "items": {
                    "type": "object",
                    "properties": {"type": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["type"],
                },
            },
        ]
    }
)
class _ContentField(serializers.JSONField):
    """A message's content: a string or a list of content parts (schema only)."""


COMPLETION_REQUEST = inline_serializer(
    "ChatCompletionRequest",
    {
        "model": serializers.CharField(help_text="An agent profile's agent_id (GET /v1/models)."),
        "messages": inline_serializer(
            "ChatCompletionMessage",
            {
                "role": serializers.CharField(help_text="system, user, assistant, …; the last user message is sent."),
                "content": _ContentField(),
            },
            many=True,
            help_text="The conversation as the client sees it; only the last message with role `user` is sent.",
        ),
        "stream": serializers.BooleanField(required=False, default=False),
        "stream_options": inline_serializer(
            "ChatCompletionStreamOptions", {"include_usage": serializers.BooleanField(required=False)}, required=False
        ),
        "user": serializers.CharField(
            required=False, max_length=SESSION_MAX_CHARS, help_text="The conversation, unless X-Session-Id is sent."
        ),
    },
)


class OpenAIView(AsyncAPIView):
    def get_exception_handler(self):
        return openai_exception_handler


# --- models ------------------------------------------------------------------------------------------------


def _tenant_slug(request) -> str:
    user = request.user
    return user.tenant.slug if isinstance(user, ApiClient) else "platform"


class ModelsApi(OpenAIView):
    @extend_schema(
        summary="OpenAI-compatible: the agent profiles as models",
        responses={
            200: OpenApiResponse(description='{"object": "list", "data": [{"id", "object", ...}]}'),
            **_openai_errors(401, 429, 503),
        },
    )
    async def get(self, request):
        current = await sync_to_async(snapshot.current)()
        owner = _tenant_slug(request)
        return Response(
            {
                "object": "list",
                "data": [
                    {"id": agent_id, "object": "model", "created": _STARTED, "owned_by": owner}
                    for agent_id in sorted(current.profiles)
                ],
            }
        )


# --- chat completions --------------------------------------------------------------------------------------


def _text_of(content: Any, param: str) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise _invalid(f"{param}.{index}", "Each content part must be an object with a 'type'.")
            if part["type"] == "text":
                if not isinstance(part.get("text"), str):
                    raise _invalid(f"{param}.{index}.text", "A text part's 'text' must be a string.")
                texts.append(part["text"])
        return "\n".join(texts)
    raise _invalid(param, "The user message's content must be a string or a list of text parts.")


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise _invalid(
            "messages", "'messages' must be a non-empty array of messages.", code="missing_required_parameter"
        )
    last = None
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _invalid(f"messages.{index}", "Each message must be an object with a string 'role'.")
        if message["role"] == "user":
            last = index
    if last is None:
        raise _invalid("messages", "'messages' must contain a message with role 'user'.")
    text = _text_of(messages[last].get("content"), f"messages.{last}.content").strip()
    if not text:
        raise _invalid(f"messages.{last}.content", "The last user message has no text.")
    return text


def _session_for(request, body: dict[str, Any]) -> tuple[str, str]:
    """(session_id, user_id): the X-Session-Id header, else ``user``, else a new session."""
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise _invalid("user", "'user' must be a string.")
    user = (user or "").strip()
    header = (request.headers.get(SESSION_HEADER) or "").strip()
    session = header or user
    if len(session) > SESSION_MAX_CHARS:
        param = SESSION_HEADER if header else "user"
        raise _invalid(param, f"The session identifier is longer than {SESSION_MAX_CHARS} characters.")
    if not header and user:
        # ``user`` names the conversation too: an e-mail or phone there becomes its keyed pseudonym in the key.
        session = identifier_pseudonym(user, key=settings.SECRET_KEY)
    return session or new_session_id(), user[:SESSION_MAX_CHARS]


def _completion_request(request) -> tuple[TurnInput, bool, bool]:
    """Validate the body and build the turn; raises :class:`OpenAIError` before anything is stored."""
    body = request.data
    if not isinstance(body, dict):
        raise _invalid("body", "The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model", "'model' must be the agent_id of a profile.", code="missing_required_parameter")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _invalid("stream", "'stream' must be a boolean.")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise _invalid("stream_options", "'stream_options' must be an object.")
    text = _last_user_text(body.get("messages"))
    session_id, user_id = _session_for(request, body)
    client = request.user
    if not isinstance(client, ApiClient):
        # A staff session has no tenant; this face of the API is for API keys.
        raise OpenAIError(ERROR_INVALID_KEY, status=401, code="invalid_api_key", type_="authentication_error")
    message = MessageIn(agent_id=model, text=text, session_id=session_id, user_id=user_id, channel=CHANNEL)
    try:
        route = route_parse(request.headers.get(ROUTE_HEADER), default=Route.ROLLOUT, field_name=ROUTE_HEADER)
        route_check(principal=client, route=route)
        turn_input = turn_input_build(tenant=client.tenant, message=message, route=route)
    except DomainError as exc:
        raise _openai_error(exc, model=model) from None
    return turn_input, stream, bool(options.get("include_usage"))


def _openai_error(exc: DomainError, *, model: str) -> OpenAIError:
    """The front door's refusal in OpenAI's words: its parameter names and codes."""
    if isinstance(exc, UnknownProfile):
        return OpenAIError(f"The model {model!r} does not exist.", status=404, param="model", code="model_not_found")
    if isinstance(exc, TextTooLong):
        message = f"The last user message is longer than {exc.limit} characters."
        return _invalid("messages", message, code="context_length_exceeded")
    if isinstance(exc, PreviewForbidden):
        return OpenAIError(
            exc.message, status=403, param=ROUTE_HEADER, code="permission_denied", type_="permission_error"
        )
    return _invalid(next(iter(exc.fields), "body"), exc.message)


def _usage(result: TurnResult) -> dict[str, int]:
    """The turn's tokens as its models reported them, every model call added up (``metadata.usage``)."""
    usage = result.metadata.get("usage") or {}
    return {key: usage.get(key, 0) for key in ("prompt_tokens", "completion_tokens", "total_tokens")}


def routing_extension(result: TurnResult) -> dict[str, Any]:
    """The documented ``x_agent_routing`` field: who answered and how the turn was routed, and the escalation when the
    conversation is with people (``metadata.escalation``, else ``None``)."""
    metadata = result.metadata
    decision = metadata.get("route_decision") or {}
    return {
        "agent": result.agent,
        "route": metadata.get("route", ""),
        "intent": metadata.get("intent", ""),
        "method": decision.get("method", ""),
        "mode": metadata.get("mode", ""),
        "cohort": metadata.get("cohort", ""),
        "flags": metadata.get("flags", {}),
        "conversation_key": result.conversation_key,
        "handoffs": [
            {key: move.get(key) for key in ("from_agent", "to_agent", "kind", "status", "reason") if key in move}
            for move in metadata.get("handoffs") or []
        ],
        # The conversation is with people (docs/desk.md): queued with its place in line, or a person answers (the
        # answer is then empty: the person's reply is in GET /api/sessions/{conversation_key}/messages).
        "escalation": metadata.get("escalation"),
    }


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


@extend_schema(parameters=[IDEMPOTENCY_KEY])
class ChatCompletionsApi(OpenAIView):
    throttle_scope = "messages"  # tenants/throttles.py: the rate of the routes that run a turn
    content_negotiation_class = EventStreamNegotiation  # ``stream: true`` answers Server-Sent Events

    @extend_schema(
        summary="OpenAI-compatible chat completion through an agent profile's routing graph",
        description=(
            "`model` is the profile's agent_id. Only the last user message is sent: the platform keeps the "
            "conversation's history, identified by the `X-Session-Id` header or the `user` field (neither: a new "
            "session). `stream: true` answers Server-Sent Events of `chat.completion.chunk`. The extension field "
            "`x_agent_routing` (agent, route, intent, method, mode, cohort, flags, conversation_key, handoffs, "
            "escalation) says who answered, and whether a person has the conversation. The `multi_agent` rollout "
            "flag decides the graph unless the `X-Agent-Route` header names `profile` or `multi_agent` (keys "
            "allowed to preview)."
        ),
        request=COMPLETION_REQUEST,
        responses={
            200: OpenApiResponse(description="chat.completion or a stream of chat.completion.chunk"),
            **_openai_errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
        },
    )
    async def post(self, request):
        turn_input, stream, include_usage = await sync_to_async(_completion_request)(request)
        if stream:
            if idempotency_key(request) is not None:
                raise OpenAIError(ERROR_NOT_ON_STREAMS, param=IDEMPOTENCY_HEADER, code="idempotency_not_on_streams")
            response = StreamingHttpResponse(
                _stream(turn_input, include_usage), content_type="text/event-stream; charset=utf-8"
            )
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"  # proxies must not hold the stream back
            return response

        async def completion() -> dict[str, Any]:
            result = await run_turn(turn_input)
            return {
                "id": _completion_id(),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": turn_input.profile.agent_id,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": result.answer},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": _usage(result),
                "x_agent_routing": routing_extension(result),
            }

        try:  # an Idempotency-Key makes a retry get the stored completion instead of a second turn
            return await idempotent(request, tenant_pk=turn_input.tenant_pk, answer=completion)
        except DomainError as exc:  # the key's refusals (409, 422, 400), in OpenAI's shape
            raise OpenAIError(exc.message, status=exc.status_code, param=IDEMPOTENCY_HEADER, code=exc.code) from exc


def _sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    return f"data: {payload}\n\n".encode()


async def _stream(turn_input: TurnInput, include_usage: bool) -> AsyncIterator[bytes]:
    """The turn as ``chat.completion.chunk`` events; the turn starts when the client starts reading.

    The turn runs as a task in the loop that iterates this generator (ASGI's, or the one Django's WSGI
    handler uses to consume an async iterator), so a client that goes away never stops it.
    """
    completion_id, created, model = _completion_id(), int(time.time()), turn_input.profile.agent_id
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

    async def emit(event: str, data: dict[str, Any]) -> None:
        if event in ("token", "discard"):
            queue.put_nowait((event, data))

    async def turn() -> TurnResult:
        try:
            return await run_turn(replace(turn_input, emit=emit))
        finally:
            queue.put_nowait(None)

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
            **extra,
        }
        return _sse(body)

    task = turn_detach(turn())
    yield chunk({"role": "assistant", "content": ""})
    sent: list[str] = []
    while (item := await queue.get()) is not None:
        event, data = item
        if event == "token" and data.get("text"):
            sent.append(data["text"])
            yield chunk({"content": data["text"]})
    try:
        result = await task
    except Exception:
        logger.exception("Streaming OpenAI-compatible turn failed")
        error = OpenAIError("The turn failed.", status=500, code="server_error", type_="server_error")
        yield _sse(error.as_dict())
        yield _sse("[DONE]")
        return
    streamed = "".join(sent)
    extension = routing_extension(result)
    if result.answer.startswith(streamed):
        rest = result.answer[len(streamed) :]
        if rest:  # text the model did not stream (a refusal, a consolidated plan, a guardrail's note)
            yield chunk({"content": rest})
    else:
        extension["revised_answer"] = result.answer
    yield chunk({}, "stop", x_agent_routing=extension)
    if include_usage:
        usage = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(result),
        }
        yield _sse(usage)
    yield _sse("[DONE]")
