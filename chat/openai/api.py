"""An OpenAI-compatible face of the platform: existing clients and chat UIs use it as if it were a model.

* ``GET /v1/models`` — the enabled agent profiles, one "model" each (``id`` = ``agent_id``), and ``GET
  /v1/models/{id}`` one of them;
* ``POST /v1/chat/completions`` — the LAST user message of ``messages`` goes through the routing graph of the
  profile named in ``model``, streaming (``stream: true``) or not;
* ``POST /v1/responses`` and ``GET /v1/responses/{id}`` — OpenAI's Responses API (:mod:`chat.openai.responses`).

Same Bearer API key as the rest of the API; the tenant comes from the key. The conversation is the one of the
``X-Session-Id`` header if sent, else of the request's ``user`` field; with neither, every request starts a new
session. Earlier messages in ``messages`` are not sent: the platform keeps the conversation's history itself; its
system (and developer) messages reach the specialists as the client's instructions for this answer. The message
goes through the same front door as the chat routes (:mod:`chat.intake`): the ``multi_agent`` rollout flag decides
its graph, unless the ``X-Agent-Route`` header names another route (``profile``, or ``multi_agent`` for keys
allowed to preview).

Every parameter OpenAI defines is honoured or refused by name (:mod:`chat.openai.params`); how the answer is written
(``max_tokens``, ``stop``, ``response_format``, sampling) is :mod:`agents.generation`'s. Every answer carries the
extension field ``x_agent_routing`` (on the final chunk when streaming) and the routing headers
(:mod:`chat.openai.turns`, which also says what the ``id`` is). Streamed text is the model's text as it is written;
when the graph changed it afterwards (a specialist that handed the turn on, output guardrails, judges),
``x_agent_routing.revised_answer`` holds the answer the platform stored.

Errors use OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` (:mod:`chat.openai.errors`).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agents.public import Generation
from chat.idempotency import ERROR_NOT_ON_STREAMS, idempotency_key, idempotent
from chat.idempotency import HEADER as IDEMPOTENCY_HEADER
from chat.idempotency import PARAMETER as IDEMPOTENCY_KEY
from chat.intake import (
    ERROR_LANGUAGE,
    MessageIn,
    Route,
    request_origin,
    route_check,
    route_parse,
    turn_input_build,
)
from chat.negotiation import EventStreamNegotiation
from chat.openai.errors import (
    ERROR_UNKNOWN_MODEL,
    ROUTE_HEADER,
    OpenAIError,
    OpenAIView,
    front_door_error,
    invalid,
    key_required,
    not_found,
    openai_errors,
)
from chat.openai.params import (
    CHAT_HONOURED,
    CHAT_REFUSED,
    boolean_read,
    chat_generation,
    metadata_read,
    parameters_check,
    refusal,
    stream_options_read,
)
from chat.openai.turns import (
    COMPLETION_PREFIX,
    SESSION_MAX_CHARS,
    StreamedText,
    TurnEvents,
    TurnRef,
    finish_reason,
    result_ref,
    routing_extension,
    routing_headers,
    session_for,
    stream_headers,
    turn_answered,
    usage_of,
)
from common.errors import DomainError
from conversations.public import TurnInput, TurnResult, language_asked
from routing.public import snapshot_current
from tenants.public import ApiClient

CHANNEL = "openai"
# Unix time this process started: the "created" of every model (profiles carry no creation time).
_STARTED = int(time.time())
# Roles a chat message may have: the user's is answered, the system's and developer's are the client's instructions;
# the rest are the conversation as the client saw it, which the platform keeps itself.
INSTRUCTION_ROLES = ("system", "developer")
ROLES = ("user", *INSTRUCTION_ROLES, "assistant", "tool", "function")
ERROR_AFTER_LAST_USER = (
    "The platform answers the last user message: messages after it (an assistant's prefill, tool results) are not "
    "taken."
)
NOT_TEXT = "only text parts are read: answers are about text, and images, audio and files are not taken"


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "description": "The message's text."},
            {
                "type": "array",
                "description": "Content parts; text parts only (`type: text`, with `text`).",
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


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 4},
        ],
        "description": "The answer ends before the first of these sequences.",
    }
)
class _StopField(serializers.JSONField):
    """``stop``: a string or up to four (schema only)."""


@extend_schema_field(
    {
        "type": "object",
        "description": '`{"type": "text"}`, `{"type": "json_object"}`, or `{"type": "json_schema", '
        '"json_schema": {"name", "schema", "strict"}}`: the answer is JSON (valid against the schema), within '
        "ANSWER_MAX_CHARS. A schema the platform cannot fill, or over its bounds (its size, the least answer's "
        "length, the steps to fill or check it: docs/openai.md), is a 400 naming it.",
        "properties": {
            "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
            "json_schema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "schema": {"type": "object"},
                    "strict": {"type": "boolean"},
                    "description": {"type": "string"},
                },
                "required": ["name"],
            },
        },
        "required": ["type"],
    }
)
class _FormatField(serializers.JSONField):
    """``response_format`` (schema only)."""


def _max_tokens(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(required=False, min_value=1, allow_null=True, help_text=help_text)


def sampling_fields() -> dict[str, serializers.Field]:
    """The sampling parameters both faces honour (schema only; chat/openai/params.py reads them)."""
    return {
        "temperature": serializers.FloatField(
            required=False, min_value=0, max_value=2, allow_null=True, help_text="Passed on to the profile's model."
        ),
        "top_p": serializers.FloatField(
            required=False, min_value=0, max_value=1, allow_null=True, help_text="Passed on to the profile's model."
        ),
    }


# The honoured parameters (chat/openai/params.py refuses the others by name; docs/openai.md has the table).
COMPLETION_REQUEST = inline_serializer(
    "ChatCompletionRequest",
    {
        "model": serializers.CharField(help_text="An agent profile's agent_id (GET /v1/models)."),
        "messages": inline_serializer(
            "ChatCompletionMessage",
            {
                "role": serializers.ChoiceField(
                    choices=ROLES,
                    help_text="The last `user` message is answered; system and developer messages "
                    "are instructions for this answer.",
                ),
                "content": _ContentField(),
            },
            many=True,
            help_text="The conversation as the client sees it; only the last message with role `user` is sent, with "
            "the system and developer messages as instructions.",
        ),
        "stream": serializers.BooleanField(required=False, default=False),
        "stream_options": inline_serializer(
            "ChatCompletionStreamOptions", {"include_usage": serializers.BooleanField(required=False)}, required=False
        ),
        "user": serializers.CharField(
            required=False, max_length=SESSION_MAX_CHARS, help_text="The conversation, unless X-Session-Id is sent."
        ),
        "max_tokens": _max_tokens("The answer's most tokens (four characters a token): cut, `finish_reason: length`."),
        "max_completion_tokens": _max_tokens("As max_tokens."),
        **sampling_fields(),
        "frequency_penalty": serializers.FloatField(
            required=False, min_value=-2, max_value=2, allow_null=True, help_text="Passed on to the profile's model."
        ),
        "presence_penalty": serializers.FloatField(
            required=False, min_value=-2, max_value=2, allow_null=True, help_text="Passed on to the profile's model."
        ),
        "seed": serializers.IntegerField(
            required=False, allow_null=True, help_text="Passed on to the profile's model."
        ),
        "stop": _StopField(required=False),
        "response_format": _FormatField(required=False),
        "n": serializers.ChoiceField(choices=[1], required=False, help_text="One answer per turn: 1 only."),
        "parallel_tool_calls": serializers.BooleanField(required=False),
    },
)


# --- models ------------------------------------------------------------------------------------------------


def _tenant_slug(request) -> str:
    user = request.user
    return user.tenant.slug if isinstance(user, ApiClient) else "platform"


class ModelsApi(OpenAIView):
    @extend_schema(
        summary="OpenAI-compatible: the agent profiles as models",
        responses={
            200: OpenApiResponse(description='{"object": "list", "data": [{"id", "object", ...}]}'),
            **openai_errors(401, 429, 503),
        },
    )
    async def get(self, request):
        current = await sync_to_async(snapshot_current)()
        owner = _tenant_slug(request)
        return Response({"object": "list", "data": [_model(agent_id, owner) for agent_id in sorted(current.profiles)]})


class ModelApi(OpenAIView):
    @extend_schema(
        operation_id="v1_model_retrieve",
        summary="OpenAI-compatible: one agent profile as a model",
        description="The enabled profile `model` as `GET /v1/models` lists it; any other name is a 404 "
        "`model_not_found`.",
        parameters=[OpenApiParameter("model", str, OpenApiParameter.PATH, description="A profile's agent_id.")],
        responses={
            200: OpenApiResponse(description='{"id", "object": "model", "created", "owned_by"}'),
            **openai_errors(401, 404, 429, 503),
        },
    )
    async def get(self, request, model: str):
        current = await sync_to_async(snapshot_current)()
        if model not in current.profiles:
            raise not_found("model", ERROR_UNKNOWN_MODEL.format(model=model), code="model_not_found")
        return Response(_model(model, _tenant_slug(request)))


def _model(agent_id: str, owner: str) -> dict[str, Any]:
    return {"id": agent_id, "object": "model", "created": _STARTED, "owned_by": owner}


# --- reading a request -------------------------------------------------------------------------------------


def text_of(content: Any, param: str) -> str:
    """A message's text: a string, or the text parts of a list of content parts (any other part is refused)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise invalid(f"{param}.{index}", "Each content part must be an object with a 'type'.")
            if part["type"] not in ("text", "input_text", "output_text"):
                raise refusal(f"{param}.{index}.type", NOT_TEXT)
            if not isinstance(part.get("text"), str):
                raise invalid(f"{param}.{index}.text", "A text part's 'text' must be a string.")
            texts.append(part["text"])
        return "\n".join(texts)
    raise invalid(param, "The message's content must be a string or a list of text parts.")


def _messages_read(messages: Any) -> tuple[str, str]:
    """``(text, instructions)``: the last user message's text, and the system and developer messages' joined."""
    if not isinstance(messages, list) or not messages:
        raise invalid(
            "messages", "'messages' must be a non-empty array of messages.", code="missing_required_parameter"
        )
    last = None
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid(f"messages.{index}", "Each message must be an object with a string 'role'.")
        if message["role"] not in ROLES:
            raise invalid(f"messages.{index}.role", f"'role' must be one of {', '.join(ROLES)}.")
        if message["role"] == "user":
            last = index
    if last is None:
        raise invalid("messages", "'messages' must contain a message with role 'user'.")
    for index, message in enumerate(messages[last + 1 :], last + 1):
        if message["role"] not in INSTRUCTION_ROLES:
            raise invalid(f"messages.{index}", ERROR_AFTER_LAST_USER)
    text = text_of(messages[last].get("content"), f"messages.{last}.content").strip()
    if not text:
        raise invalid(f"messages.{last}.content", "The last user message has no text.")
    instructions = [
        text_of(message.get("content"), f"messages.{index}.content").strip()
        for index, message in enumerate(messages)
        if message["role"] in INSTRUCTION_ROLES
    ]
    return text, "\n\n".join(part for part in instructions if part)


@dataclass(frozen=True)
class Asked:
    """A request read: the engine's input (the client's generation and instructions in it) and how to answer."""

    turn_input: TurnInput
    stream: bool = False
    include_usage: bool = False


def turn_input_read(
    request: Request,
    *,
    model: Any,
    text: str,
    text_param: str,
    session_id: str,
    user_id: str,
    instructions: str,
    instructions_param: str,
    generation: Generation | None,
    body: Mapping[str, Any],
) -> TurnInput:
    """The engine's input through the front door (:mod:`chat.intake`: profile, size, the session's rate, rollout),
    its refusals in OpenAI's words; raises :class:`OpenAIError` before anything is stored. The request's
    ``metadata`` is kept with the turn's message, and its ``language`` names the conversation's
    (:mod:`conversations.language`)."""
    if not isinstance(model, str) or not model:
        raise invalid("model", "'model' must be the agent_id of a profile.", code="missing_required_parameter")
    metadata = metadata_read(body)
    language = language_asked(metadata.get("language"))
    if metadata.get("language") and not language:
        raise invalid("metadata.language", ERROR_LANGUAGE)
    client = request.user
    if not isinstance(client, ApiClient):
        raise key_required()  # a staff session has no tenant: this face is for API keys
    message = MessageIn(
        agent_id=model, text=text, session_id=session_id, user_id=user_id, channel=CHANNEL, language=language
    )
    try:
        route = route_parse(request.headers.get(ROUTE_HEADER), default=Route.ROLLOUT, field_name=ROUTE_HEADER)
        route_check(principal=client, route=route)
        turn_input = turn_input_build(
            tenant=client.tenant, message=message, route=route, origin=request_origin(request)
        )
    except DomainError as exc:
        raise front_door_error(exc, model=model, text_param=text_param) from None
    limit = turn_input.profile.max_input_chars
    if len(instructions) > limit:
        raise invalid(instructions_param, f"The instructions are longer than {limit} characters.")
    return replace(turn_input, generation=generation, instructions=instructions, client_metadata=metadata)


def _completion_read(request: Request) -> Asked:
    body = request.data
    if not isinstance(body, dict):
        raise invalid("body", "The request body must be a JSON object.")
    parameters_check(body, honoured=CHAT_HONOURED, refused=CHAT_REFUSED)
    stream = boolean_read(body, "stream")
    include_usage = stream_options_read(body, usage=True, stream=stream)
    text, instructions = _messages_read(body.get("messages"))
    generation = chat_generation(body)
    session_id, user_id = session_for(request.headers, body.get("user"))
    turn_input = turn_input_read(
        request,
        model=body.get("model"),
        text=text,
        text_param="messages",
        session_id=session_id,
        user_id=user_id,
        instructions=instructions,
        instructions_param="messages",
        generation=generation,
        body=body,
    )
    return Asked(turn_input, stream, include_usage)


# --- chat completions --------------------------------------------------------------------------------------


def completion_body(result: TurnResult, ref: TurnRef, model: str) -> dict[str, Any]:
    return {
        "id": ref.id(COMPLETION_PREFIX),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result.answer, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason(result.metadata),
            }
        ],
        "usage": usage_of(result),
        "x_agent_routing": routing_extension(result),
    }


def extension_headers(extension: Mapping[str, Any]) -> dict[str, str]:
    """The routing headers of a stored answer's ``x_agent_routing`` (a replayed completion's too)."""
    return routing_headers(
        conversation_key=str(extension.get("conversation_key", "")),
        route=str(extension.get("route", "")),
        intent=str(extension.get("intent", "")),
        message_id=extension.get("message_id"),
    )


def asgi(request: Request) -> bool:
    """A request of Django's ASGI handler (a stream is sent as it is written), not of its WSGI one."""
    return isinstance(request._request, ASGIRequest)


def sse(data: Mapping[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


def stream_response(chunks: AsyncIterator[bytes], headers: Mapping[str, str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # proxies must not hold the stream back
    for name, value in headers.items():
        response[name] = value
    return response


@extend_schema(parameters=[IDEMPOTENCY_KEY])
class ChatCompletionsApi(OpenAIView):
    throttle_scope = "messages"  # tenants/throttles.py: the rate of the routes that run a turn
    content_negotiation_class = EventStreamNegotiation  # ``stream: true`` answers Server-Sent Events

    @extend_schema(
        summary="OpenAI-compatible chat completion through an agent profile's routing graph",
        description=(
            "`model` is the profile's agent_id. Only the last user message is sent: the platform keeps the "
            "conversation's history, identified by the `X-Session-Id` header or the `user` field (neither: a new "
            "session); system and developer messages are instructions for this answer. `stream: true` answers "
            "Server-Sent Events of `chat.completion.chunk`. Every parameter OpenAI defines is honoured or refused "
            "by name (a 400 naming it, docs/openai.md): `max_tokens` cuts the answer (`finish_reason: length`), "
            "`response_format` makes it JSON, `stop` ends it, sampling reaches the profile's model; `n` above 1, "
            "client `tools` and the rest are refused. The `id` (`chatcmpl-<conversation>_<turn>`) is what "
            "`POST /api/sessions/{key}/feedback` takes as `message_id`. The extension field `x_agent_routing` "
            "(agent, route, intent, method, mode, cohort, flags, conversation_key, message_id, handoffs, "
            "escalation) and the headers `X-Agent-Route`, `X-Agent-Intent`, `X-Conversation-Key` and "
            "`X-Message-Id` say who answered. The `multi_agent` rollout flag decides the graph unless the "
            "`X-Agent-Route` request header names `profile` or `multi_agent` (keys allowed to preview)."
        ),
        request=COMPLETION_REQUEST,
        responses={
            200: OpenApiResponse(description="chat.completion or a stream of chat.completion.chunk"),
            **openai_errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
        },
    )
    async def post(self, request):
        asked = await sync_to_async(_completion_read)(request)
        if asked.stream:
            if idempotency_key(request) is not None:
                raise OpenAIError(ERROR_NOT_ON_STREAMS, param=IDEMPOTENCY_HEADER, code="idempotency_not_on_streams")
            events = TurnEvents(asked.turn_input)
            ref = await events.start(until_end=not asgi(request))
            chunks = _chunks(events, ref, asked.include_usage)
            return stream_response(chunks, stream_headers(events))
        turn_input = asked.turn_input

        def completion(result: TurnResult) -> dict[str, Any]:
            return completion_body(result, result_ref(result), turn_input.profile.agent_id)

        try:  # an Idempotency-Key makes a retry get the stored completion instead of a second turn
            response = await idempotent(request, data=turn_input, run=turn_answered, body=completion)
        except DomainError as exc:  # the key's refusals (409, 422, 400), in OpenAI's shape
            raise OpenAIError(exc.message, status=exc.status_code, param=IDEMPOTENCY_HEADER, code=exc.code) from exc
        for name, value in extension_headers(response.data.get("x_agent_routing") or {}).items():
            response[name] = value
        return response


async def _chunks(events: TurnEvents, ref: TurnRef, include_usage: bool) -> AsyncIterator[bytes]:
    """The turn as ``chat.completion.chunk`` events, text within the client's max_tokens."""
    completion_id, created = ref.id(COMPLETION_PREFIX), int(time.time())
    model = events.data.profile.agent_id

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
            **extra,
        }
        return sse(body)

    yield chunk({"role": "assistant", "content": ""})
    sent = StreamedText(events.data.generation)
    async for event, data in events.events():
        if event == "token" and data.get("text") and (piece := sent.add(data["text"])):
            yield chunk({"content": piece})
    result = events.result
    if result is None:
        error = OpenAIError("The turn failed.", status=500, code="server_error", type_="server_error")
        yield sse(error.as_dict())
        yield sse("[DONE]")
        return
    extension = routing_extension(result)
    rest = sent.rest(result.answer)
    if rest is None:
        extension["revised_answer"] = result.answer
    elif rest:  # text the model did not stream (a refusal, a consolidated plan, a guardrail's note)
        yield chunk({"content": rest})
    yield chunk({}, finish_reason(result.metadata), x_agent_routing=extension)
    if include_usage:
        usage = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage_of(result),
        }
        yield sse(usage)
    yield sse("[DONE]")
