"""WebSocket chat (chat/consumers.py) through the whole ASGI application, with the offline model."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from chat.consumers import CLOSE_UNAUTHORIZED, CLOSE_UNKNOWN_AGENT
from conversations import graph
from conversations.models import Conversation, Message
from platform.asgi import application

MSISDN = "5511999999999"
INVOICE = {"text": "Minha fatura veio alta", "user_id": "u1", "context": {"msisdn": MSISDN}}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def rolled_out(multi_agent_for_everyone):
    """These tests are about the face, on the multi-agent graph (the flag itself: chat/tests/test_front_door.py)."""


def path(key: str | None = None, *, agent_id: str = "telecom_contas", session_id: str = "ws-1", **query) -> str:
    if key is not None:
        query["key"] = key
    tail = "&".join(f"{name}={value}" for name, value in query.items())
    return f"/ws/chat/{agent_id}/{session_id}/" + (f"?{tail}" if tail else "")


async def open_socket(url: str, **kwargs) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, url, **kwargs)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


async def until_done(communicator: WebsocketCommunicator) -> list[dict]:
    events = []
    while not events or events[-1]["type"] != "done":
        events.append(await communicator.receive_json_from(timeout=20))
    return events


async def refused_with(communicator: WebsocketCommunicator) -> tuple[dict, int]:
    """A refused socket: its one error event and its close code."""
    error = await communicator.receive_json_from(timeout=5)
    closing = await communicator.receive_output(timeout=5)
    assert closing["type"] == "websocket.close"
    return error, closing["code"]


def chat(url: str, *frames: dict, **kwargs) -> list[list[dict]]:
    async def go():
        communicator = await open_socket(url, **kwargs)
        try:
            turns = []
            for frame in frames:
                await communicator.send_json_to(frame)
                turns.append(await until_done(communicator))
            return turns
        finally:
            await communicator.disconnect()

    return asyncio.run(go())


def test_a_message_streams_route_agent_tool_calls_tokens_then_done(tenant_key, live_mcp):
    (events,) = chat(path(tenant_key.raw), INVOICE)

    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["route", "agent"] and kinds[-1] == "done"
    assert events[0]["agent"] == "billing_agent"
    assert events[1]["agent"] == "billing_agent" and events[1]["via"] == "route"
    calls = [(e["tool"], e["phase"]) for e in events if e["type"] == "tool_call"]
    assert sorted(calls) == sorted(
        [(t, p) for t in ("consultar_fatura", "consultar_pagamentos") for p in ("started", "finished")]
    )
    first_token = kinds.index("token")
    assert max(i for i, kind in enumerate(kinds) if kind == "tool_call") < first_token
    assert set(kinds[first_token:-1]) == {"token"}
    done = events[-1]
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) > 10 and "".join(tokens) == done["answer"]
    assert done["agent"] == "billing_agent"
    assert done["conversation_key"] == "tenant_a:telecom_contas:ws-1"
    assert done["metadata"]["route"]
    stored = Conversation.objects.get(conversation_key="tenant_a:telecom_contas:ws-1")
    assert stored.channel == "websocket" and stored.user_id == "u1"
    assert list(stored.messages.values_list("role", "content")) == [
        ("user", INVOICE["text"]),
        ("assistant", done["answer"]),
    ]


@pytest.mark.parametrize("where", ["header", "subprotocol", "subprotocol-alone"])
def test_the_key_may_come_in_a_header_or_a_subprotocol(tenant_key, telecom, where):
    async def go():
        kwargs = {
            "header": {"headers": [(b"authorization", f"Bearer {tenant_key.raw}".encode())]},
            "subprotocol": {"subprotocols": ["chat", f"bearer.{tenant_key.raw}"]},
            "subprotocol-alone": {"subprotocols": [f"bearer.{tenant_key.raw}"]},
        }[where]
        communicator = WebsocketCommunicator(application, path(), **kwargs)
        connected, subprotocol = await communicator.connect(timeout=5)
        assert connected
        await communicator.send_json_to(INVOICE)
        events = await until_done(communicator)
        await communicator.disconnect()
        return subprotocol, events

    subprotocol, events = asyncio.run(go())
    assert events[-1]["conversation_key"] == "tenant_a:telecom_contas:ws-1"
    # A browser fails a handshake whose answer names none of the protocols it offered: the key's own one is
    # answered only when it was offered alone.
    answered = {"header": None, "subprotocol": "chat", "subprotocol-alone": f"bearer.{tenant_key.raw}"}
    assert subprotocol == answered[where]


@pytest.mark.parametrize(
    ("url", "kwargs"),
    [
        (path(), {}),
        (path("ark_wrong_key"), {}),
        (path(""), {}),
        (path(), {"headers": [(b"authorization", b"Bearer ark_wrong_key")]}),
        (path(), {"headers": [(b"authorization", b"Basic abc")]}),
        (path(), {"subprotocols": ["bearer.ark_wrong_key"]}),
    ],
    ids=["no-key", "wrong-key", "empty-key", "wrong-header", "not-bearer", "wrong-subprotocol"],
)
def test_without_a_valid_key_the_socket_is_closed_4401(tenant_key, telecom, url, kwargs):
    async def go():
        communicator = await open_socket(url, **kwargs)
        error, code = await refused_with(communicator)
        await communicator.wait()
        return error, code

    error, code = asyncio.run(go())
    assert code == CLOSE_UNAUTHORIZED
    assert error["type"] == "error" and error["error"]["code"] == "not_authenticated"
    assert not Conversation.objects.exists()


def test_an_unknown_agent_closes_4404(tenant_key, telecom):
    async def go():
        communicator = await open_socket(path(tenant_key.raw, agent_id="nobody"))
        return await refused_with(communicator)

    error, code = asyncio.run(go())
    assert code == CLOSE_UNKNOWN_AGENT
    assert error["error"]["fields"] == {"agent_id": ["Unknown agent_id 'nobody'."]}


def session_cookie(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


def test_a_staff_session_chats_for_the_tenant_it_names(staff_user, tenant, telecom):
    (events,) = chat(path(tenant="tenant_a", session_id="staff-1"), INVOICE, headers=session_cookie(staff_user))
    assert events[-1]["conversation_key"] == "tenant_a:telecom_contas:staff-1"


def test_a_staff_session_must_name_a_tenant_and_a_non_staff_session_is_refused(
    staff_user, django_user_model, tenant, telecom
):
    clerk = django_user_model.objects.create_user("clerk", "clerk@example.com", "clerk-password")

    async def go(url, headers):
        communicator = await open_socket(url, headers=headers)
        return await refused_with(communicator)

    assert asyncio.run(go(path(), session_cookie(staff_user)))[1] == CLOSE_UNAUTHORIZED
    assert asyncio.run(go(path(tenant="nowhere"), session_cookie(staff_user)))[1] == CLOSE_UNAUTHORIZED
    assert asyncio.run(go(path(tenant="tenant_a"), session_cookie(clerk)))[1] == CLOSE_UNAUTHORIZED


def test_a_browser_from_another_site_is_refused_at_the_handshake(tenant_key, telecom):
    async def go(origin):
        communicator = WebsocketCommunicator(application, path(tenant_key.raw), headers=[(b"origin", origin)])
        connected, _ = await communicator.connect(timeout=5)
        await communicator.disconnect()
        return connected

    assert asyncio.run(go(b"http://evil.example")) is False
    assert asyncio.run(go(b"http://localhost:8000")) is True


def test_malformed_frames_get_an_error_event_and_the_socket_stays_open(tenant_key, telecom, settings):
    settings.MAX_INPUT_CHARS = 50
    bad_frames = [
        ("not json at all", "malformed_json", "frame"),
        ("[1, 2]", "malformed_frame", "frame"),
        (json.dumps({"text": ""}), "validation_error", "text"),
        (json.dumps({"user_id": "u1"}), "validation_error", "text"),
        (json.dumps({"text": 5}), "validation_error", "text"),
        (json.dumps({"text": "x" * 51}), "invalid", "text"),
        (json.dumps({"text": "ok", "context": "not an object"}), "validation_error", "context"),
        (json.dumps({"text": "ok", "user_id": ["u"]}), "validation_error", "user_id"),
    ]

    async def go():
        communicator = await open_socket(path(tenant_key.raw))
        errors = []
        for frame, _, _ in bad_frames:
            await communicator.send_to(text_data=frame)
            errors.append(await communicator.receive_json_from(timeout=5))
        await communicator.send_to(bytes_data=b"\x00")
        errors.append(await communicator.receive_json_from(timeout=5))
        await communicator.send_json_to(INVOICE)
        events = await until_done(communicator)
        await communicator.disconnect()
        return errors, events

    errors, events = asyncio.run(go())
    for error, (frame, code, field) in zip(errors, bad_frames, strict=False):
        assert error["type"] == "error", frame
        assert error["error"]["code"] == code, frame
        assert field in error["error"]["fields"], (frame, error)
    assert errors[-1]["error"]["code"] == "malformed_frame"
    assert events[-1]["type"] == "done" and events[-1]["agent"] == "billing_agent"
    conversation = Conversation.objects.get()
    assert conversation.messages.count() == 2  # the bad frames stored nothing


def test_frames_sent_during_a_turn_wait_for_it(tenant_key, telecom, settings):
    settings.OFFLINE_LLM_LATENCY_MS = 100

    async def go():
        communicator = await open_socket(path(tenant_key.raw))
        await communicator.send_json_to(INVOICE)
        await communicator.send_json_to({"text": "E o vencimento da conta?"})
        first = await until_done(communicator)
        second = await until_done(communicator)
        await communicator.disconnect()
        return first, second

    first, second = asyncio.run(go())
    assert first[0]["type"] == "route" and second[0]["type"] == "route"
    roles = Conversation.objects.get().messages.order_by("created_at", "id").values_list("role", "content")
    assert list(roles) == [
        ("user", INVOICE["text"]),
        ("assistant", first[-1]["answer"]),
        ("user", "E o vencimento da conta?"),
        ("assistant", second[-1]["answer"]),
    ]


def test_a_second_tenant_with_the_same_session_id_reaches_another_conversation(tenant_key, outsider_key, telecom):
    (ours,) = chat(path(tenant_key.raw, session_id="shared"), INVOICE)
    (theirs,) = chat(path(outsider_key.raw, session_id="shared"), {"text": "Meu pedido P100 atrasou", "user_id": "u2"})

    assert ours[-1]["conversation_key"] == "tenant_a:telecom_contas:shared"
    assert theirs[-1]["conversation_key"] == "outsider:telecom_contas:shared"
    ours_stored = Conversation.objects.get(conversation_key="tenant_a:telecom_contas:shared")
    theirs_stored = Conversation.objects.get(conversation_key="outsider:telecom_contas:shared")
    assert ours_stored.tenant.slug == "tenant_a" and theirs_stored.tenant.slug == "outsider"
    assert list(ours_stored.messages.values_list("content", flat=True)) == [INVOICE["text"], ours[-1]["answer"]]
    assert list(theirs_stored.messages.values_list("content", flat=True)) == [
        "Meu pedido P100 atrasou",
        theirs[-1]["answer"],
    ]
    # The outsider's turn saw none of ours: no billing agent to hand off from, routed on its own message.
    assert [e["type"] for e in theirs if e["type"] in ("route", "agent", "handoff")] == ["route", "agent"]
    assert theirs[0]["agent"] == theirs[-1]["agent"] == "orders_agent"


def test_a_disconnect_mid_answer_lets_the_turn_finish_and_persist(tenant_key, telecom, settings, monkeypatch):
    settings.OFFLINE_LLM_LATENCY_MS = 300

    async def slow_persist(turn):  # the offline model writes fast: make sure the socket is gone before the end
        await asyncio.sleep(0.5)
        await graph.persist(turn)

    monkeypatch.setattr(graph, "NODES", (*graph.NODES[:-1], ("persist", slow_persist)))

    async def go():
        communicator = await open_socket(path(tenant_key.raw, session_id="gone"))
        await communicator.send_json_to(INVOICE)
        event = {}
        while event.get("type") != "token":
            event = await communicator.receive_json_from(timeout=10)
        await communicator.disconnect()
        unfinished = graph.turns_detached()
        stored_then = await database_sync_to_async(Message.objects.count)()
        await graph.turns_finished()
        return event, unfinished, stored_then

    first_token, unfinished, stored_then = asyncio.run(go())
    assert unfinished == 1 and stored_then == 0  # the turn outlived its socket
    conversation = Conversation.objects.get(conversation_key="tenant_a:telecom_contas:gone")
    messages = list(conversation.messages.order_by("created_at", "id").values_list("role", "agent", "content"))
    assert [role for role, _, _ in messages] == ["user", "assistant"]
    assert messages[1][1] == "billing_agent" and messages[1][2].startswith(first_token["text"])

    # The conversation goes on from where it was: a new socket's turn sees the stored history.
    settings.OFFLINE_LLM_LATENCY_MS = 0
    (events,) = chat(path(tenant_key.raw, session_id="gone"), {"text": "E o vencimento da conta?"})
    assert events[-1]["type"] == "done"
    assert conversation.messages.count() == 4


# --- a real ASGI server and a real WebSocket client ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def uvicorn_server():
    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        application, host="127.0.0.1", port=port, log_level="warning", lifespan="off", ws="websockets-sansio"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a hang guard
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"ws://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_a_real_client_chats_with_a_real_server(tenant_key, live_mcp, uvicorn_server):
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async def go():
        url = f"{uvicorn_server}/ws/chat/telecom_contas/real-1/"
        async with connect(url, additional_headers={"Authorization": f"Bearer {tenant_key.raw}"}) as ws:
            await ws.send(json.dumps(INVOICE))
            events = []
            while not events or events[-1]["type"] != "done":
                events.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=20)))
        async with connect(f"{uvicorn_server}/ws/chat/telecom_contas/real-1/?key=wrong") as ws:
            refusal = json.loads(await ws.recv())
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        return events, refusal, closed.value.rcvd.code

    events, refusal, code = asyncio.run(go())
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["route", "agent"] and "token" in kinds and kinds[-1] == "done"
    assert "".join(e["text"] for e in events if e["type"] == "token") == events[-1]["answer"]
    assert events[-1]["conversation_key"] == "tenant_a:telecom_contas:real-1"
    assert refusal["error"]["code"] == "not_authenticated" and code == CLOSE_UNAUTHORIZED
    assert Conversation.objects.get(conversation_key="tenant_a:telecom_contas:real-1").messages.count() == 2
