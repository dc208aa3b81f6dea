"""OpenAI's Responses API on the platform: ``POST /v1/responses`` and ``GET /v1/responses/{id}``.

A response is one turn, as a chat completion is (:mod:`chat.openai.api`): ``model`` names the profile, the last user
message of ``input`` (a string, or message items) goes through its routing graph, and the system and developer
messages with ``instructions`` reach the specialists as the client's instructions for this answer.
``previous_response_id`` continues the conversation that response belongs to (after its latest message: the
platform's conversations do not branch); else the ``X-Session-Id`` header or ``user`` names it, and with neither a
response starts a new one. ``stream: true`` answers the Responses API's events (``response.created`` …
``response.output_text.delta`` … ``response.completed``, or ``response.incomplete`` when ``max_output_tokens`` cut
the answer). Parameters are honoured or refused by name as on the chat face (:mod:`chat.openai.params`); ids and
headers are :mod:`chat.openai.turns`'s. ``GET /v1/responses/{id}`` reads a stored response back (its output, usage
and routing; the request's ``instructions`` and sampling are not kept).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from asgiref.sync import sync_to_async
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

from agents.public import FORMAT_JSON_SCHEMA, Generation
from chat.idempotency import ERROR_NOT_ON_STREAMS, idempotency_key, idempotent
from chat.idempotency import HEADER as IDEMPOTENCY_HEADER
from chat.idempotency import PARAMETER as IDEMPOTENCY_KEY
from chat.openai.api import (
    INSTRUCTION_ROLES,
    Asked,
    asgi,
    extension_headers,
    sampling_fields,
    sse,
    stream_response,
    text_of,
    turn_input_read,
)
from chat.openai.errors import OpenAIError, OpenAIView, invalid, key_required, not_found, openai_errors
from chat.openai.params import (
    RESPONSES_HONOURED,
    RESPONSES_REFUSED,
    boolean_read,
    parameters_check,
    refusal,
    responses_generation,
    stream_options_read,
)
from chat.openai.turns import (
    OUTPUT_PREFIX,
    RESPONSE_PREFIX,
    SESSION_HEADER,
    SESSION_MAX_CHARS,
    StreamedText,
    TurnEvents,
    TurnRef,
    finish_reason,
    result_ref,
    routing_extension,
    session_for,
    stream_headers,
    turn_answered,
    turn_ref_read,
    usage_of,
)
from common.errors import DomainError
from conversations.public import TurnResult, answer_of_turn, conversation_get_by_pk, question_of_answer
from tenants.public import ApiClient

ERROR_PREVIOUS_NOT_FOUND = "Previous response with id {id!r} not found."
ERROR_RESPONSE_NOT_FOUND = "Response with id {id!r} not found."
ERROR_OTHER_MODEL = "The previous response belongs to the model {model!r}; send that model to continue it."
ERROR_OTHER_SESSION = "The previous response's conversation is not the one {param} names; send one of them."
ERROR_AFTER_LAST_USER = (
    "The platform answers the last user message: items after it (an assistant's prefill, tool outputs) are not taken."
)
ITEM_ROLES = ("user", *INSTRUCTION_ROLES, "assistant")


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "minLength": 1, "description": "The user's message."},
            {
                "type": "array",
                "minItems": 1,
                "description": "Message items (`role`: user, system, developer, assistant; `content`: a string or "
                "`input_text` parts). The last user message is answered; system and developer messages are "
                "instructions; earlier messages are the conversation as the client saw it (the platform keeps it).",
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": ["message"]},
                        "role": {"type": "string", "enum": list(ITEM_ROLES)},
                        "content": {
                            "oneOf": [
                                {"type": "string"},
                                {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {"type": {"type": "string"}, "text": {"type": "string"}},
                                        "required": ["type", "text"],
                                    },
                                },
                            ]
                        },
                    },
                    "required": ["role", "content"],
                },
            },
        ]
    }
)
class _InputField(serializers.JSONField):
    """``input`` (schema only)."""


@extend_schema_field(
    {
        "type": "object",
        "properties": {
            "format": {
                "type": "object",
                "description": '`{"type": "text"}`, `{"type": "json_object"}` or `{"type": "json_schema", "name", '
                '"schema", "strict"}`: the output is JSON (valid against the schema), within ANSWER_MAX_CHARS. A '
                "schema the platform cannot fill, or over its bounds (docs/openai.md), is a 400 naming it.",
                "properties": {
                    "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
                    "name": {"type": "string", "minLength": 1},
                    "schema": {"type": "object"},
                    "strict": {"type": "boolean"},
                    "description": {"type": "string"},
                },
                "required": ["type"],
            }
        },
    }
)
class _TextField(serializers.JSONField):
    """``text`` (schema only)."""


RESPONSE_REQUEST = inline_serializer(
    "ResponseCreateRequest",
    {
        "model": serializers.CharField(help_text="An agent profile's agent_id (GET /v1/models)."),
        "input": _InputField(),
        "instructions": serializers.CharField(
            required=False, allow_null=True, help_text="Instructions to the specialists for this answer."
        ),
        "previous_response_id": serializers.CharField(
            required=False, allow_null=True, help_text="Continue the conversation of this response (`resp_…`)."
        ),
        "stream": serializers.BooleanField(required=False, default=False),
        "user": serializers.CharField(
            required=False,
            max_length=SESSION_MAX_CHARS,
            help_text="The conversation, unless X-Session-Id or previous_response_id says it.",
        ),
        "max_output_tokens": serializers.IntegerField(
            required=False,
            min_value=1,
            allow_null=True,
            help_text="The output's most tokens (four characters a token): cut, `status: incomplete`.",
        ),
        **sampling_fields(),
        "text": _TextField(required=False),
        "parallel_tool_calls": serializers.BooleanField(required=False),
    },
)


# --- reading a request -------------------------------------------------------------------------------------


def _content_text(content: Any, param: str) -> str:
    return text_of(content, param).strip() if content is not None else ""


def _input_read(value: Any) -> tuple[str, list[str]]:
    """``(text, instructions)`` of ``input``: the last user message's, and the system and developer messages'."""
    if isinstance(value, str):
        if not value.strip():
            raise invalid("input", "'input' has no text.")
        return value.strip(), []
    if not isinstance(value, list) or not value:
        message = "'input' must be a string or a non-empty array of messages."
        raise invalid("input", message, code="missing_required_parameter")
    last = None
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise invalid(f"input.{index}", "Each input item must be an object.")
        if item.get("type", "message") != "message":
            raise refusal(f"input.{index}.type", "only messages are read (the platform runs its own tools)")
        if item.get("role") not in ITEM_ROLES:
            raise invalid(f"input.{index}.role", f"'role' must be one of {', '.join(ITEM_ROLES)}.")
        if item["role"] == "user":
            last = index
    if last is None:
        raise invalid("input", "'input' must contain a message with role 'user'.")
    for index, item in enumerate(value[last + 1 :], last + 1):
        if item["role"] not in INSTRUCTION_ROLES:
            raise invalid(f"input.{index}", ERROR_AFTER_LAST_USER)
    text = _content_text(value[last].get("content"), f"input.{last}.content")
    if not text:
        raise invalid(f"input.{last}.content", "The last user message has no text.")
    instructions = [
        _content_text(item.get("content"), f"input.{index}.content")
        for index, item in enumerate(value)
        if item["role"] in INSTRUCTION_ROLES
    ]
    return text, instructions


def _session(request: Request, body: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(session_id, user_id, previous_response_id)``: the conversation a response continues."""
    session_id, user_id = session_for(request.headers, body.get("user"))
    previous = body.get("previous_response_id")
    if previous is None:
        return session_id, user_id, ""
    if not isinstance(previous, str):
        raise invalid("previous_response_id", "'previous_response_id' must be a string.")
    client = request.user
    if not isinstance(client, ApiClient):
        raise key_required()
    ref = turn_ref_read(previous, prefixes=(RESPONSE_PREFIX,))
    conversation = (
        conversation_get_by_pk(tenant_id=client.tenant.pk, conversation_pk=ref.conversation_pk) if ref else None
    )
    if ref is None or conversation is None or answer_of_turn(conversation_pk=conversation.pk, turn=ref.turn) is None:
        message = ERROR_PREVIOUS_NOT_FOUND.format(id=previous)
        raise not_found("previous_response_id", message, code="previous_response_not_found")
    if body.get("model") != conversation.profile.agent_id:
        raise invalid("model", ERROR_OTHER_MODEL.format(model=conversation.profile.agent_id))
    if session_id and session_id != conversation.session_id:
        param = SESSION_HEADER if request.headers.get(SESSION_HEADER) else "user"
        raise invalid("previous_response_id", ERROR_OTHER_SESSION.format(param=param))
    return conversation.session_id, user_id or conversation.user_id, previous


def _response_read(request: Request) -> tuple[Asked, Echo]:
    """The request read, and what its response says back of it."""
    body = request.data
    if not isinstance(body, dict):
        raise invalid("body", "The request body must be a JSON object.")
    parameters_check(body, honoured=RESPONSES_HONOURED, refused=RESPONSES_REFUSED)
    stream = boolean_read(body, "stream")
    stream_options_read(body, usage=False, stream=stream)
    text, instructions = _input_read(body.get("input"))
    given = body.get("instructions")
    if given is not None and not isinstance(given, str):
        raise invalid("instructions", "'instructions' must be a string.")
    generation = responses_generation(body)
    session_id, user_id, previous = _session(request, body)
    turn_input = turn_input_read(
        request,
        model=body.get("model"),
        text=text,
        text_param="input",
        session_id=session_id,
        user_id=user_id,
        instructions="\n\n".join(part for part in [(given or "").strip(), *instructions] if part),
        instructions_param="instructions",
        generation=generation,
        body=body,
    )
    echo = Echo(generation, turn_input.instructions, previous, turn_input.client_metadata, body.get("user"))
    return Asked(turn_input, stream), echo


# --- the response ------------------------------------------------------------------------------------------


def _text_config(generation: Generation | None) -> dict[str, Any]:
    response_format = generation.response_format if generation is not None else None
    if response_format is None:
        return {"format": {"type": "text"}}
    if response_format["type"] == FORMAT_JSON_SCHEMA:
        return {"format": {"type": FORMAT_JSON_SCHEMA, **response_format[FORMAT_JSON_SCHEMA]}}
    return {"format": dict(response_format)}


@dataclass(frozen=True)
class Echo:
    """What a response says back of its request (OpenAI's responses repeat their parameters)."""

    generation: Generation | None = None
    instructions: str = ""
    previous_response_id: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None

    def unsaid(self) -> Echo:
        """Without the request's own words (``user``, ``metadata``: an e-mail, a phone …), for a body that is
        stored (an ``Idempotency-Key``'s); :meth:`said` puts them back in what is answered."""
        return replace(self, user=None, metadata={})

    def said(self, body: dict[str, Any]) -> None:
        body.update(user=self.user, metadata=dict(self.metadata))


def _output_item(ref: TurnRef, text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {"id": ref.id(OUTPUT_PREFIX), "type": "message", "status": status, "role": "assistant", "content": content}


def response_body(
    ref: TurnRef,
    *,
    model: str,
    created_at: float,
    result: TurnResult | None,
    echo: Echo | None = None,
) -> dict[str, Any]:
    """The Responses API's ``response`` object for the turn ``ref``: in progress (no ``result`` yet), or completed
    (incomplete when max_output_tokens cut it), with ``x_agent_routing``."""
    echo = echo or Echo()
    asked = echo.generation or Generation()
    body: dict[str, Any] = {
        "id": ref.id(RESPONSE_PREFIX),
        "object": "response",
        "created_at": created_at,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": echo.instructions or None,
        "max_output_tokens": asked.max_tokens,
        "model": model,
        "output": [],
        "parallel_tool_calls": True,
        "previous_response_id": echo.previous_response_id or None,
        "reasoning": None,
        "store": True,
        "temperature": asked.temperature,
        "text": _text_config(echo.generation),
        "tool_choice": "auto",
        "tools": [],
        "top_p": asked.top_p,
        "truncation": "auto",
        "usage": None,
        "user": echo.user,
        "metadata": dict(echo.metadata),
    }
    if result is None:
        return body
    cut = finish_reason(result.metadata) == "length"
    status = "incomplete" if cut else "completed"
    usage = usage_of(result)
    body.update(
        status=status,
        incomplete_details={"reason": "max_output_tokens"} if cut else None,
        output=[_output_item(ref, result.answer, status)],
        usage={
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        },
        x_agent_routing=routing_extension(result),
    )
    if status == "completed":
        body["completed_at"] = time.time()
    return body


@extend_schema(parameters=[IDEMPOTENCY_KEY])
class ResponsesApi(OpenAIView):
    throttle_scope = "messages"  # tenants/throttles.py: the rate of the routes that run a turn

    @extend_schema(
        summary="OpenAI-compatible Responses API: one turn through an agent profile's routing graph",
        description=(
            "`model` is the profile's agent_id; the last user message of `input` (a string or message items) is "
            "answered, system and developer messages and `instructions` are instructions for this answer. "
            "`previous_response_id` continues that response's conversation (else `X-Session-Id` or `user`; "
            "neither: a new one). `stream: true` answers the Responses API's Server-Sent Events (`response.created`, "
            "`response.output_text.delta`, …, `response.completed` or `response.incomplete`). `max_output_tokens` "
            "cuts the output (`status: incomplete`), `text.format` makes it JSON; every other parameter OpenAI "
            "defines is honoured or refused by name (docs/openai.md). The response `id` (`resp_<conversation>_"
            "<turn>`) is what `POST /api/sessions/{key}/feedback` takes as `message_id`; `x_agent_routing` and the "
            "headers `X-Agent-Route`, `X-Agent-Intent`, `X-Conversation-Key`, `X-Message-Id` say who answered."
        ),
        request=RESPONSE_REQUEST,
        responses={
            200: OpenApiResponse(description="a response object, or a stream of its events"),
            **openai_errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
        },
    )
    async def post(self, request):
        asked, echo = await sync_to_async(_response_read)(request)
        data = asked.turn_input
        model = data.profile.agent_id
        if asked.stream:
            if idempotency_key(request) is not None:
                raise OpenAIError(ERROR_NOT_ON_STREAMS, param=IDEMPOTENCY_HEADER, code="idempotency_not_on_streams")
            events = TurnEvents(data)
            ref = await events.start(until_end=not asgi(request))
            return stream_response(_events(events, ref, echo), stream_headers(events))

        created_at = time.time()

        def answered(result: TurnResult) -> dict[str, Any]:
            ref = result_ref(result)
            return response_body(ref, model=model, created_at=created_at, result=result, echo=echo.unsaid())

        try:  # an Idempotency-Key makes a retry get the stored response instead of a second turn
            response = await idempotent(request, data=data, run=turn_answered, body=answered)
        except DomainError as exc:  # the key's refusals (409, 422, 400), in OpenAI's shape
            raise OpenAIError(exc.message, status=exc.status_code, param=IDEMPOTENCY_HEADER, code=exc.code) from exc
        echo.said(response.data)  # a replay's request said the same (its body is the first's)
        for name, value in extension_headers(response.data.get("x_agent_routing") or {}).items():
            response[name] = value
        return response


async def _events(events: TurnEvents, ref: TurnRef, echo: Echo) -> AsyncIterator[bytes]:
    """The turn as the Responses API's stream of events, text within max_output_tokens."""
    model, created_at = events.data.profile.agent_id, time.time()
    sequence = iter(range(1_000_000_000))
    item_id = ref.id(OUTPUT_PREFIX)

    def event(kind: str, **payload: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(sequence), **payload}, event=kind)

    def response(result: TurnResult | None) -> dict[str, Any]:
        return response_body(ref, model=model, created_at=created_at, result=result, echo=echo)

    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    yield event("response.created", response=response(None))
    yield event("response.in_progress", response=response(None))
    yield event("response.output_item.added", output_index=0, item=_output_item(ref, None, "in_progress"))
    empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    yield event("response.content_part.added", **where, part=empty)
    sent = StreamedText(events.data.generation)
    async for kind, data in events.events():
        if kind == "token" and data.get("text") and (piece := sent.add(data["text"])):
            yield event("response.output_text.delta", **where, delta=piece, logprobs=[])
    result = events.result
    if result is None:
        failed = response(None)
        failed.update(status="failed", error={"code": "server_error", "message": "The turn failed."})
        yield event("error", code="server_error", message="The turn failed.", param=None)
        yield event("response.failed", response=failed)
        return
    final = response(result)
    rest = sent.rest(result.answer)
    if rest is None:
        final["x_agent_routing"]["revised_answer"] = result.answer
    elif rest:  # text the model did not stream (a refusal, a consolidated plan, a guardrail's note)
        yield event("response.output_text.delta", **where, delta=rest, logprobs=[])
    item = final["output"][0]
    yield event("response.output_text.done", **where, text=result.answer, logprobs=[])
    yield event("response.content_part.done", **where, part=item["content"][0])
    yield event("response.output_item.done", output_index=0, item=item)
    yield event(f"response.{final['status']}", response=final)


RESPONSE_ID = OpenApiParameter("response_id", str, OpenApiParameter.PATH, description="A response's id (`resp_…`).")


def _stored_response(request: Request, response_id: str) -> dict[str, Any]:
    client = request.user
    if not isinstance(client, ApiClient):
        raise key_required()
    ref = turn_ref_read(response_id, prefixes=(RESPONSE_PREFIX,))
    conversation = (
        conversation_get_by_pk(tenant_id=client.tenant.pk, conversation_pk=ref.conversation_pk) if ref else None
    )
    answer = answer_of_turn(conversation_pk=conversation.pk, turn=ref.turn) if ref and conversation else None
    if ref is None or conversation is None or answer is None:
        raise not_found("response_id", ERROR_RESPONSE_NOT_FOUND.format(id=response_id))
    result = TurnResult(
        answer=answer.content,
        agent=answer.agent,
        conversation_key=conversation.conversation_key,
        metadata=answer.metadata,
        message_id=answer.pk,
    )
    # The create call's user and metadata, as its turn stored them with the customer's message (personal data in
    # them masked or pseudonymised, as every store keeps it).
    question = question_of_answer(answer)
    said = question.metadata if question is not None else {}
    echo = Echo(metadata=dict(said.get("client_metadata") or {}), user=said.get("user_id") or None)
    return response_body(
        ref, model=conversation.profile.agent_id, created_at=answer.created_at.timestamp(), result=result, echo=echo
    )


class ResponseApi(OpenAIView):
    @extend_schema(
        summary="OpenAI-compatible: a stored response",
        description=(
            "The response `resp_<conversation>_<turn>` of this key's tenant: its output, usage, `x_agent_routing`, "
            "and the `metadata` and `user` its create call sent, as stored (personal data in them masked or "
            "pseudonymised; the request's instructions and sampling are not kept). Another tenant's, or one still "
            "being answered, is a 404."
        ),
        parameters=[RESPONSE_ID],
        responses={200: OpenApiResponse(description="a response object"), **openai_errors(401, 404, 429, 503)},
    )
    async def get(self, request, response_id: str):
        body = await sync_to_async(_stored_response)(request, response_id)
        return Response(body, headers=extension_headers(body["x_agent_routing"]))
