"""A caller's W3C trace context on every inbound face: ``traceparent`` and ``tracestate`` sent to the REST routes,
their Server-Sent Events twins, the OpenAI-compatible endpoints (plain and streamed) and a WebSocket's handshake make
the message's ``turn`` span a child of the caller's span, in the caller's trace (A2A's face: chat/tests/test_a2a.py;
across two deployments: conversations/tests/test_gateway_traces.py). ``platform.asgi.application`` is served by
uvicorn, its spans caught by the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

pytestmark = pytest.mark.django_db(transaction=True)

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
W3C = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01", "tracestate": "caller=1"}
TEXT = "Minha fatura veio alta"
MESSAGE = {"agent_id": "telecom_contas", "payload": {"text": TEXT, "session_id": "traced"}}
OPENAI_CHAT = {"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "user": "traced"}
OPENAI_RESPONSE = {"model": "telecom_contas", "input": TEXT, "user": "traced"}

# (path, body): a face that answers JSON, or streams its answer while the turn runs.
FACES = {
    "gateway": ("/api/gateway/message", MESSAGE),
    "gateway stream": ("/api/gateway/message/stream", MESSAGE),
    "chat": ("/api/chat/message", MESSAGE),
    "chat stream": ("/api/chat/message/stream", MESSAGE),
    "openai chat": ("/v1/chat/completions", OPENAI_CHAT),
    "openai chat stream": ("/v1/chat/completions", {**OPENAI_CHAT, "stream": True}),
    "openai responses": ("/v1/responses", OPENAI_RESPONSE),
    "openai responses stream": ("/v1/responses", {**OPENAI_RESPONSE, "stream": True}),
}


def the_turn(spans: InMemorySpanExporter) -> ReadableSpan:
    (turn,) = [span for span in spans.get_finished_spans() if span.name == "turn"]
    return turn


def assert_child_of_the_caller(span: ReadableSpan) -> None:
    assert span.parent is not None and span.parent.is_remote
    assert format(span.parent.span_id, "016x") == CALLER_SPAN
    assert format(span.context.trace_id, "032x") == CALLER_TRACE
    assert span.context.trace_state.get("caller") == "1"  # W3C: a child carries its parent's tracestate


@pytest.mark.parametrize("face", list(FACES))
def test_a_callers_traceparent_makes_the_turn_its_child_on_every_http_face(
    asgi_server, tenant_key, telecom, spans, face
):
    path, body = FACES[face]
    headers = {"Authorization": f"Bearer {tenant_key.raw}", **W3C}

    with httpx.stream("POST", f"{asgi_server}{path}", json=body, headers=headers, timeout=60) as response:
        assert response.status_code == 200, response.read()
        response.read()  # a stream ends once the turn is over (its answer stored, its span ended)

    assert_child_of_the_caller(the_turn(spans))


def test_the_handshakes_traceparent_makes_each_turn_of_the_socket_its_child(asgi_server, tenant_key, telecom, spans):
    from websockets.asyncio.client import connect

    async def two_turns() -> None:
        url = f"{asgi_server.replace('http', 'ws', 1)}/ws/chat/telecom_contas/traced/"
        async with connect(url, additional_headers={"Authorization": f"Bearer {tenant_key.raw}", **W3C}) as socket:
            for _ in range(2):
                await socket.send(json.dumps({"text": TEXT}))
                while json.loads(await asyncio.wait_for(socket.recv(), timeout=60))["type"] != "done":
                    pass

    asyncio.run(two_turns())

    turns = [span for span in spans.get_finished_spans() if span.name == "turn"]
    assert len(turns) == 2
    for turn in turns:
        assert_child_of_the_caller(turn)


def test_a_request_without_a_traceparent_or_with_a_malformed_one_starts_a_trace_of_its_own(
    asgi_server, tenant_key, telecom, spans
):
    path, body = FACES["gateway stream"]
    for extra in ({}, {"traceparent": "00-not-a-trace-01"}):
        headers = {"Authorization": f"Bearer {tenant_key.raw}", **extra}
        with httpx.stream("POST", f"{asgi_server}{path}", json=body, headers=headers, timeout=60) as response:
            response.read()
        turn = the_turn(spans)
        assert turn.parent is None and format(turn.context.trace_id, "032x") != CALLER_TRACE
        spans.clear()
