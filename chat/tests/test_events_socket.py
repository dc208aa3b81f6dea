"""The events socket (``/ws/events``, chat/consumers.py): a tenant's debug clients watch its operational events
through the Redis channel layer; other keys are refused."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator

from chat.consumers import CLOSE_FORBIDDEN
from common.errors import ERROR_DEBUG_FORBIDDEN
from common.infra.bus import events_flush
from platform.asgi import application
from tests.streaming import run

pytestmark = pytest.mark.django_db(transaction=True)


async def opened(url: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, url)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


def test_a_debug_client_watches_its_tenants_agent_completed_events(debug_key, tenant_key, telecom, settings):
    assert settings.EVENTS_CHANNEL_LAYER

    async def go() -> tuple[dict, dict]:
        events = await opened(f"/ws/events?key={debug_key.raw}")
        subscribed = await events.receive_json_from(timeout=5)
        chat = await opened(f"/ws/chat/telecom_contas/ev-ws/?key={tenant_key.raw}&route=profile")
        await chat.send_json_to({"text": "Minha fatura veio alta"})
        while (await chat.receive_json_from(timeout=20))["type"] != "done":
            pass
        await asyncio.to_thread(events_flush)
        received = await events.receive_json_from(timeout=5)
        await chat.disconnect()
        await events.disconnect()
        return subscribed, received

    subscribed, received = run(go())

    assert subscribed == {"type": "subscribed", "tenant": "tenant_a"}
    assert received["type"] == "event"
    event = received["event"]
    assert (event["type"], event["tenant"], event["conversation_key"]) == (
        "agent.completed",
        "tenant_a",
        "tenant_a:telecom_contas:ev-ws",
    )


def test_a_key_without_the_debug_right_is_refused(tenant_key, telecom):
    async def go() -> tuple[dict, int]:
        events = await opened(f"/ws/events?key={tenant_key.raw}")
        error = await events.receive_json_from(timeout=5)
        closing = await events.receive_output(timeout=5)
        return error, closing["code"]

    error, code = run(go())

    assert (error["error"]["message"], code) == (ERROR_DEBUG_FORBIDDEN, CLOSE_FORBIDDEN)
