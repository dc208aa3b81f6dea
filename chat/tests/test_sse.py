"""``POST /api/gateway/message/stream``: the turn's events as Server-Sent Events, then the JSON answer."""

from __future__ import annotations

import json

import pytest
from django.test import AsyncClient

from conversations.models import Conversation, Message
from tenants.models import ApiKey
from tests.streaming import run
from tests.streaming import sse_events as parse

pytestmark = pytest.mark.django_db(transaction=True)


async def stream(key, text, **payload):
    # Per request: AsyncClient(headers=...) would put them in the scope, not in its headers.
    response = await AsyncClient().post(
        "/api/gateway/message/stream",
        {"agent_id": "telecom_contas", "payload": {"text": text, **payload}},
        content_type="application/json",
        headers={"Authorization": f"Bearer {key.raw}"},
    )
    return response


async def read(response) -> bytes:
    return b"".join([chunk async for chunk in response.streaming_content])


def test_the_stream_sends_the_turns_events_then_the_answer(tenant_key, telecom):
    response, body = run(_stream_and_read(tenant_key, "Minha fatura veio alta", session_id="sse-1"))

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    events = parse(body)
    names = [name for name, _ in events]
    assert names[:2] == ["route", "agent"] and names[-1] == "done"
    assert "token" in names
    done = events[-1][1]
    assert done["agent"] == "billing_agent"
    assert "".join(data["text"] for name, data in events if name == "token") == done["answer"]
    assert Message.objects.filter(conversation__conversation_key=done["conversation_key"]).count() == 2


async def _stream_and_read(key, text, **payload):
    response = await stream(key, text, **payload)
    return response, await read(response)


def test_bad_input_is_refused_before_the_stream_starts(tenant_key, telecom):
    response = run(stream(tenant_key, ""))

    assert response.status_code == 400
    assert "payload.text" in json.loads(response.content)["error"]["fields"]
    assert Conversation.objects.count() == 0


def test_the_stream_needs_a_key(telecom):
    response = run(
        AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": "oi"}},
            content_type="application/json",
        )
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    "path", ["/api/gateway/message/stream", "/api/chat/message/stream", "/api/chat/multi-agent/message/stream"]
)
def test_a_client_accepting_only_event_streams_gets_the_stream(tenant_key, telecom, path):
    ApiKey.objects.filter(pk=tenant_key.pk).update(can_preview=True)  # the multi-agent route's preview right

    async def streamed():
        response = await AsyncClient().post(
            path,
            {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "session_id": "sse-accept"}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}", "Accept": "text/event-stream"},
        )
        return response, await read(response)

    response, body = run(streamed())

    assert response.status_code == 200, response
    assert response["Content-Type"].startswith("text/event-stream")
    assert parse(body)[-1][0] == "done"


def gateway_stream(key, text: str, accept: str):
    """A message to the gateway's stream route from a client that accepts ``accept``."""
    return run(
        AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": text}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {key.raw}", "Accept": accept},
        )
    )


def test_bad_input_from_a_client_accepting_only_event_streams_is_still_a_json_error(tenant_key, telecom):
    response = gateway_stream(tenant_key, "", accept="text/event-stream")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "payload.text" in json.loads(response.content)["error"]["fields"]


def test_a_client_accepting_neither_json_nor_event_streams_is_told_so(tenant_key, telecom):
    response = gateway_stream(tenant_key, "oi", accept="image/png")

    assert response.status_code == 406
    assert response["Content-Type"] == "application/json"
