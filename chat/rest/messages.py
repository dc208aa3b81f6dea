"""A message in, its answer out: the gateway, chat and multi-agent preview routes, each as JSON or as Server-Sent
Events, one view (:class:`MessageApi`) with what tells them apart declared (:class:`MessageFace`).

Which graph a message goes through follows its route: see :class:`chat.intake.Route`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from inspect import iscoroutinefunction
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from chat.asyncapi import AsyncAPIView
from chat.idempotency import PARAMETER as IDEMPOTENCY_KEY
from chat.idempotency import idempotency_key, idempotent, refuse_on_streams
from chat.intake import MessageInputSerializer, Route, message_body_limit, message_intake, request_origin
from chat.negotiation import EventStreamNegotiation
from chat.permissions import IsPreviewClient
from chat.schema_areas import AreaSchema
from common.errors import error_responses
from common.infra import stock_paths, tracing
from common.infra.crossing import on_the_request_thread
from conversations.public import Turn, TurnInput, TurnResult, run_turn, turn_abandon, turn_begin, turn_detach

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


class MessageBody:
    """For the views whose body is a message: a body longer than any message can be is a 413 by its length,
    before it is parsed (:func:`chat.intake.message_body_limit`, read by :func:`common.parsers.body_limit`)."""

    def body_limit(self) -> int:
        return message_body_limit()


# Every status a message POST can answer besides 200 (403: a session's CSRF or tenant right, or the preview).
MESSAGE_ERRORS = error_responses(400, 401, 403, 413, 415, 429, 503)
# The routes that take an Idempotency-Key (chat/idempotency.py) also answer 409 and 422.
JSON_RESPONSES = {200: ANSWER_RESPONSE, **MESSAGE_ERRORS, **error_responses(409, 422)}
SSE_RESPONSES = {200: OpenApiResponse(description="text/event-stream"), **MESSAGE_ERRORS}
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


@dataclass(frozen=True)
class MessageFace:
    """What tells one message route from another: the graph its message goes through (:class:`chat.intake.Route`),
    whether it answers with the turn's events as Server-Sent Events (then an Idempotency-Key is refused: a stream is
    not replayed) or with JSON (then it takes one), whether only a client allowed to preview may send, and its
    operation's summary and description in the schema."""

    route: Route
    streams: bool
    summary: str
    description: str
    preview: bool = False


# The message routes (chat/urls.py gives each its path and name).
GATEWAY = MessageFace(
    Route.PROFILE,
    streams=False,
    summary="Send one user message through the routing graph, in the profile's mode",
    description=PROFILE_DESCRIPTION,
)
GATEWAY_STREAM = MessageFace(
    Route.PROFILE,
    streams=True,
    summary="Send one user message in the profile's mode and receive the turn's events as Server-Sent Events",
    description=f"Same body as POST /api/gateway/message. {PROFILE_DESCRIPTION} {SSE_DESCRIPTION}",
)
CHAT = MessageFace(
    Route.ROLLOUT,
    streams=False,
    summary="One user message, on the path the multi_agent rollout flag gives this user",
    description=f"Same body and answer as POST /api/gateway/message. {FLAG_DESCRIPTION}",
)
CHAT_STREAM = MessageFace(
    Route.ROLLOUT,
    streams=True,
    summary="One user message on the rollout flag's path, as Server-Sent Events",
    description=f"Same body as POST /api/chat/message. {FLAG_DESCRIPTION} {SSE_DESCRIPTION}",
)
PREVIEW = MessageFace(
    Route.PREVIEW,
    streams=False,
    preview=True,
    summary="One user message, always through the multi-agent graph (preview)",
    description=PREVIEW_DESCRIPTION,
)
PREVIEW_STREAM = MessageFace(
    Route.PREVIEW,
    streams=True,
    preview=True,
    summary="One user message through the multi-agent graph (preview), as Server-Sent Events",
    description=f"{PREVIEW_DESCRIPTION} {SSE_DESCRIPTION}",
)


class MessageSchema(AreaSchema):
    """A message route's operation in the schema, from its view's :class:`MessageFace`: the gateway's body and
    example, the JSON answer (with the Idempotency-Key parameter) or the event stream."""

    def face(self) -> MessageFace:
        return self.view.face  # type: ignore[attr-defined]  # a MessageApi's

    def get_override_parameters(self) -> list[Any]:
        parameters = super().get_override_parameters()
        return parameters if self.face().streams else [*parameters, IDEMPOTENCY_KEY]

    def get_examples(self) -> list[Any]:
        return [*super().get_examples(), GATEWAY_EXAMPLE]

    def get_request_serializer(self) -> Any:
        return MessageInputSerializer

    def get_response_serializers(self) -> Any:
        return SSE_RESPONSES if self.face().streams else JSON_RESPONSES

    def get_description(self) -> str:  # type: ignore[override]  # drf-spectacular's takes no path and method
        return self.face().description

    def get_summary(self) -> str:
        return self.face().summary


class MessageApi(MessageBody, AsyncAPIView):
    """``POST`` a message through the graph its :attr:`face` gives, answered as JSON or as Server-Sent Events
    (``MessageApi.as_view(face=...)``: one view per route of :data:`GATEWAY`, :data:`CHAT`, :data:`PREVIEW` and
    their streams)."""

    face: MessageFace = GATEWAY
    schema = MessageSchema()
    throttle_scope = "messages"  # tenants/throttles.py: the rate of the routes that run a turn
    turn_input: TurnInput
    begun: Turn | None = None  # the turn started with the checks (its ticket taken), for run_turn

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.face.preview:
            self.permission_classes = [IsPreviewClient]
        if self.face.streams:
            self.content_negotiation_class = EventStreamNegotiation

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """DRF's checks (authentication, permissions, throttles), the message read into the engine's input, and
        the turn started (its ticket taken, its conversation read): one trip to the request's thread for all,
        since adrf runs ``initial`` there and each reads the database. Only a POST carries a message. A request
        with an ``Idempotency-Key`` starts its turn later, if its key has no stored answer."""
        super().initial(request, *args, **kwargs)
        if request.method == "POST":
            if self.face.streams:
                refuse_on_streams(request)
            self.turn_input = message_intake(
                principal=request.user,
                data=request.data,
                route=self.face.route,
                headers=request.headers,
                origin=request_origin(request),
            )
            if not self.face.streams and idempotency_key(request) is None:
                self.begun = turn_begin(self.turn_input)

    async def async_dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        """adrf's dispatch, with the trip for :meth:`initial` shielded from a client that goes away: a turn it
        started holds the conversation's ticket, which is then handed on (:func:`turn_abandon`)."""
        self.args, self.kwargs = args, kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = self.default_response_headers
        try:
            # The class's function, not the bound method: its wrapper is made once (common.infra.crossing).
            initial = on_the_request_thread(type(self).initial)
            checked = asyncio.ensure_future(initial(self, request, *args, **kwargs))
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
                yield sse(*item)

        response = StreamingHttpResponse(events(), content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # proxies must not hold the stream back
        return response

    async def post(self, request: Request) -> Response | StreamingHttpResponse:
        return await (self.stream(request) if self.face.streams else self.answer(request))


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


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()
