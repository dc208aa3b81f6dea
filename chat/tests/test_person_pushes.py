"""What people do reaches the customer on the face they use: the chat socket and the events stream receive a
person's reply and the escalation's changes through the channel layer (Redis here), and a REST client reads them
in the session's messages."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from conversations.desk.escalations import Person, desk_reply, escalation_hand_back, escalation_take
from platform.asgi import application
from tests.streaming import run

pytestmark = pytest.mark.django_db(transaction=True)

ANA = Person(name="Ana", ref="ana")


async def opened(url: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, url)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


async def done(socket: WebsocketCommunicator) -> dict:
    while (event := await socket.receive_json_from(timeout=20))["type"] != "done":
        pass
    return event


def test_the_customer_socket_receives_the_persons_reply_and_the_hand_back(tenant_key, telecom):
    async def go() -> tuple[dict, dict, dict, dict, dict]:
        socket = await opened(f"/ws/chat/telecom_contas/push-1/?key={tenant_key.raw}&route=profile")
        await socket.send_json_to({"text": "quero falar com um atendente"})
        queued = await done(socket)
        escalation_id = queued["metadata"]["escalation"]["id"]
        await sync_to_async(escalation_take)(escalation_id=escalation_id, person=ANA)
        taken = await socket.receive_json_from(timeout=5)
        await sync_to_async(desk_reply)(escalation_id=escalation_id, person=ANA, text="Oi, sou a Ana!")
        reply = await socket.receive_json_from(timeout=5)
        await sync_to_async(escalation_hand_back)(escalation_id=escalation_id, person=ANA)
        back = await socket.receive_json_from(timeout=5)
        await socket.send_json_to({"text": "minha fatura veio alta"})
        routed = await done(socket)
        await socket.disconnect()
        return queued, taken, reply, back, routed

    queued, taken, reply, back, routed = run(go())

    assert queued["metadata"]["escalation"]["status"] == "queued"
    assert taken["type"] == "escalation"
    assert taken["escalation"]["status"] == "assigned"
    assert taken["notice"] == "Ana está atendendo você agora."
    assert reply["type"] == "human"
    assert reply["message"]["content"] == "Oi, sou a Ana!"
    assert reply["message"]["author"] == {"kind": "human", "name": "Ana", "id": "ana"}
    assert back["type"] == "escalation" and back["escalation"]["status"] == "returned"
    assert routed["agent"] == "billing_agent"


def test_an_sse_client_follows_the_conversation_and_receives_the_persons_reply(tenant_key, telecom, api):
    opened_body = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": "quero falar com um atendente", "session_id": "sse-p"}},
        format="json",
    ).json()
    escalation_id = opened_body["metadata"]["escalation"]["id"]
    key = opened_body["conversation_key"]

    async def go() -> bytes:
        response = await AsyncClient().get(
            f"/api/sessions/{key}/events", headers={"Authorization": f"Bearer {tenant_key.raw}"}
        )
        assert response.status_code == 200
        chunks = aiter(response.streaming_content)
        assert (await anext(chunks)).startswith(b": following")
        await sync_to_async(desk_reply)(escalation_id=escalation_id, person=ANA, text="Olá pelo SSE")
        taken = await asyncio.wait_for(anext(chunks), timeout=5)
        reply = await asyncio.wait_for(anext(chunks), timeout=5)
        await response.streaming_content.aclose()
        return taken + reply

    body = run(go()).decode()

    assert "event: escalation" in body
    assert "event: human" in body and "Olá pelo SSE" in body


def test_another_tenants_key_cannot_follow_the_conversation(outsider_key, api, telecom):
    body = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": "oi", "session_id": "private"}},
        format="json",
    ).json()

    async def go() -> int:
        response = await AsyncClient().get(
            f"/api/sessions/{body['conversation_key']}/events", headers={"Authorization": f"Bearer {outsider_key.raw}"}
        )
        return response.status_code

    assert run(go()) == 404
