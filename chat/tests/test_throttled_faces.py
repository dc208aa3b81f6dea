"""Throttling on the WebSocket and the OpenAI-compatible faces (tenants/throttles.py; HTTP: tenants/tests)."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.cache import cache

from chat.consumers import CLOSE_RATE_LIMITED, CLOSE_UNAUTHORIZED
from platform.asgi import application
from tenants.auth import _KEY_CACHE
from tenants.throttles import ERROR_RATE_SESSION

pytestmark = pytest.mark.django_db(transaction=True)

FRAME = {"text": "Qual o melhor plano de internet?"}


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()
    _KEY_CACHE.clear()
    yield
    cache.clear()


def tenant_set(tenant, **limits) -> None:
    """Limits saved as the admin saves them (a save, so every process sees the change)."""
    for name, value in limits.items():
        setattr(tenant, name, value)
    tenant.save(update_fields=list(limits))


def socket_at(url: str, address: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, url)
    communicator.scope["client"] = (address, 50000)
    return communicator


async def refusal(communicator: WebsocketCommunicator) -> tuple[dict, int]:
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    error = await communicator.receive_json_from(timeout=5)
    closing = await communicator.receive_output(timeout=5)
    return error, closing["code"]


def test_wrong_keys_over_the_websocket_lock_the_address_out_with_4429(tenant_key, telecom, settings):
    settings.AUTH_FAILURE_LIMIT = 2

    async def go():
        codes = []
        for n in range(3):
            _, code = await refusal(socket_at(f"/ws/chat/telecom_contas/s/?key=ark_wrong_{n}", "203.0.113.20"))
            codes.append(code)
        error, _ = await refusal(socket_at("/ws/chat/telecom_contas/s/?key=ark_wrong_x", "203.0.113.20"))
        other = socket_at(f"/ws/chat/telecom_contas/s/?key={tenant_key.raw}", "203.0.113.21")
        connected, _ = await other.connect(timeout=5)
        await other.disconnect()
        return codes, error, connected

    codes, error, other_connected = asyncio.run(go())
    assert codes == [CLOSE_UNAUTHORIZED, CLOSE_UNAUTHORIZED, CLOSE_RATE_LIMITED]
    assert error["error"]["code"] == "throttled"
    assert other_connected


def test_frames_over_the_message_rate_get_a_throttled_event_and_the_socket_stays_open(tenant_key, telecom, settings):
    settings.API_MESSAGE_RATE_PER_KEY = "1/day"

    async def go():
        communicator = socket_at(f"/ws/chat/telecom_contas/rate/?key={tenant_key.raw}", "203.0.113.22")
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        await communicator.send_json_to(FRAME)
        events = [await communicator.receive_json_from(timeout=20)]
        while events[-1]["type"] != "done":
            events.append(await communicator.receive_json_from(timeout=20))
        await communicator.send_json_to(FRAME)
        refused = await communicator.receive_json_from(timeout=5)
        await communicator.send_json_to({"text": ""})  # still read: the socket is open
        still_open = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return events[-1], refused, still_open

    done, refused, still_open = asyncio.run(go())
    assert done["type"] == "done"
    assert refused["type"] == "error" and refused["error"]["code"] == "throttled"
    assert still_open["type"] == "error"


def test_opening_sockets_faster_than_the_api_rate_is_refused_with_4429(tenant_key, telecom, settings):
    settings.API_RATE_PER_KEY = "1/day"

    async def go():
        first = socket_at(f"/ws/chat/telecom_contas/a/?key={tenant_key.raw}", "203.0.113.23")
        connected, _ = await first.connect(timeout=5)
        await first.disconnect()
        return connected, await refusal(socket_at(f"/ws/chat/telecom_contas/b/?key={tenant_key.raw}", "203.0.113.23"))

    connected, (error, code) = asyncio.run(go())
    assert connected and code == CLOSE_RATE_LIMITED and error["error"]["code"] == "throttled"


def test_the_openai_face_answers_429_in_openais_shape_with_retry_after(tenant_key, telecom, client, settings):
    settings.API_MESSAGE_RATE_PER_KEY = "1/day"
    body = {"model": "telecom_contas", "messages": [{"role": "user", "content": FRAME["text"]}]}
    headers = {"HTTP_AUTHORIZATION": f"Bearer {tenant_key.raw}"}
    assert client.post("/v1/chat/completions", body, content_type="application/json", **headers).status_code == 200
    refused = client.post("/v1/chat/completions", body, content_type="application/json", **headers)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert refused.json()["error"]["code"] == "throttled"
    # The Responses API runs turns too: the same rate of the key counts it.
    response = {"model": "telecom_contas", "input": FRAME["text"]}
    refused = client.post("/v1/responses", response, content_type="application/json", **headers)
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limit_error"


def test_the_openai_face_answers_a_locked_out_address_with_429(telecom, client, settings):
    settings.AUTH_FAILURE_LIMIT = 1
    body = {"model": "telecom_contas", "messages": [{"role": "user", "content": "oi"}]}
    wrong = {"HTTP_AUTHORIZATION": "Bearer ark_wrong", "REMOTE_ADDR": "203.0.113.24"}
    assert client.post("/v1/chat/completions", body, content_type="application/json", **wrong).status_code == 401
    locked = client.post("/v1/chat/completions", body, content_type="application/json", **wrong)
    assert locked.status_code == 429 and int(locked["Retry-After"]) >= 1


async def turn(communicator: WebsocketCommunicator) -> dict:
    """The frame's last event: ``done``, or the ``error`` it was refused with."""
    await communicator.send_json_to(FRAME)
    event = await communicator.receive_json_from(timeout=20)
    while event["type"] not in ("done", "error"):
        event = await communicator.receive_json_from(timeout=20)
    return event


def test_a_socket_whose_session_floods_is_throttled_while_other_sessions_are_answered(tenant_key, telecom):
    async def go():
        flood = socket_at(f"/ws/chat/telecom_contas/flood/?key={tenant_key.raw}", "203.0.113.25")
        calm = socket_at(f"/ws/chat/telecom_contas/calm/?key={tenant_key.raw}", "203.0.113.25")
        assert (await flood.connect(timeout=5))[0] and (await calm.connect(timeout=5))[0]
        first = await turn(flood)
        # Set in the admin while the socket is open: the next frame already counts against it.
        await database_sync_to_async(tenant_set)(tenant_key.tenant, message_rate_per_session="1/day")
        events = [await turn(flood), await turn(flood), await turn(calm)]
        await flood.disconnect()
        await calm.disconnect()
        return first, events

    first, (under, over, other) = asyncio.run(go())
    assert first["type"] == "done" and under["type"] == "done"  # one message under the new rate
    assert over["type"] == "error" and over["error"]["code"] == "throttled"
    assert over["error"]["message"].startswith(ERROR_RATE_SESSION.format(rate="1/day"))
    assert other["type"] == "done"


def test_the_openai_user_is_the_session_its_limit_counts(tenant_key, telecom, client):
    tenant_set(tenant_key.tenant, message_rate_per_session="1/day")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {tenant_key.raw}"}

    def completion(user: str):
        body = {"model": "telecom_contas", "messages": [{"role": "user", "content": "oi"}], "user": user}
        return client.post("/v1/chat/completions", body, content_type="application/json", **headers)

    assert completion("joao.silva@example.com").status_code == 200
    refused = completion("joao.silva@example.com")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert refused.json()["error"]["message"].startswith(ERROR_RATE_SESSION.format(rate="1/day"))
    assert completion("maria@example.com").status_code == 200
