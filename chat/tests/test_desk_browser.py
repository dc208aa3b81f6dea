"""People in the loop from end to end, with the real parts: the platform served by uvicorn (``platform.asgi``, the
Redis channel layer, PostgreSQL), a customer on the WebSocket chat (a Python ``websockets`` client with the tenant's
API key), and a person on the desk page in Chromium — staff with a tenant grant to answer as a person, not a superuser.

The customer asks for a person and is told their place in line; the person sees the conversation arrive in the queue,
takes it, reads the customer's next message as it comes, answers, writes an internal note and hands it back; the
customer receives the person's reply and the hand-back on the same socket, and the next message is routed to a
specialist again. What is stored is checked (the ``human`` moves, the outcome ``escalated``) and what a REST client
reads (the person's reply, ``author.kind == "human"``). The desk's screenshot is the one docs/desk.md shows
(``test-output/screenshots/desk.png``). The chat page's side (a person's reply and the notices in the transcript) is
checked in the browser too.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.db import connections

from chat.tests.test_websocket import uvicorn_server  # noqa: F401 — the fixture, reused
from conversations.desk.escalations import desk_reply, escalation_hand_back, escalation_take, person_of_user
from conversations.models import Conversation, ConversationOutcome, Escalation, EscalationStatus
from handoffs.models import PERSON, Handoff, HandoffKind
from tests.browser_fixtures import screenshot_path

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCREENSHOT = "desk.png"
ASK = "quero falar com um atendente humano"
WAITING_WORDS = "Obrigado, fico aguardando. Minha fatura veio com um valor estranho."
REPLY = "Olá! Sou a Ana, da equipe de atendimento. Já estou vendo a sua fatura."
NOTE = "Cliente antigo; a cobrança de roaming foi contestada em março."
INVOICE = "minha fatura veio alta"


@pytest.fixture
def browser_viewport() -> dict[str, int]:
    return {"width": 1400, "height": 1000}


@pytest.fixture
def base_url(uvicorn_server) -> str:  # noqa: F811 — the imported fixture
    return uvicorn_server.replace("ws://", "http://", 1)


class Customer:
    """A customer's WebSocket chat, run in a thread of its own (the browser test drives Playwright in this one): each
    call waits for what the socket brings."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.frames: asyncio.Queue[dict[str, Any]] | None = None
        self.socket: Any = None
        self.call(self._open(url))

    def call(self, coroutine: Any, timeout: float = 30) -> Any:
        future: Future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout)

    async def _open(self, url: str) -> None:
        from websockets.asyncio.client import connect

        self.socket = await connect(url)
        self.frames = asyncio.Queue()

        async def read() -> None:
            async for frame in self.socket:
                await self.frames.put(json.loads(frame))

        self.reader = asyncio.ensure_future(read())

    async def _next(self, kind: str, timeout: float) -> dict[str, Any]:
        assert self.frames is not None
        while (frame := await asyncio.wait_for(self.frames.get(), timeout))["type"] != kind:
            pass
        return frame

    def next(self, kind: str, timeout: float = 15) -> dict[str, Any]:
        """The next frame of ``kind`` (those before it are passed over)."""
        return self.call(self._next(kind, timeout), timeout + 5)

    def say(self, text: str) -> dict[str, Any]:
        """Send a message; its turn's ``done``."""
        self.call(self.socket.send(json.dumps({"text": text})))
        return self.next("done", 30)

    def close(self) -> None:
        async def closing() -> None:
            self.reader.cancel()
            await self.socket.close()

        self.call(closing())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


def elsewhere(service: Any, **kwargs: Any) -> Any:
    """A desk service called in a thread of its own, as a desk's request would be: its pushes go through
    ``async_to_sync``, which refuses this thread (Playwright's event loop runs here)."""

    def call() -> Any:
        try:
            return service(**kwargs)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result(timeout=30)


def log_in(page, base_url: str, username: str, password: str, then: str) -> None:
    page.goto(f"{base_url}/admin/login/?next={then}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-form input[type=submit]")
    page.wait_for_url(base_url + then)


def test_a_customer_asks_for_a_person_who_takes_answers_and_hands_back_on_the_desk(
    base_url,
    uvicorn_server,  # noqa: F811 — the imported fixture
    browser_page,
    desk_person,
    tenant,
    tenant_key,
    telecom,
    settings,
):
    settings.OFFLINE_LLM_LATENCY_MS = 5
    page = browser_page
    log_in(page, base_url, "ana", "ana-password", "/admin/")
    page.click("#desk-link")
    page.wait_for_url(base_url + "/desk/")
    page.wait_for_selector("#desk-connection[data-state=open]")
    assert page.is_visible("#desk-queues-empty")

    customer = Customer(f"{uvicorn_server}/ws/chat/telecom_contas/e2e-1/?key={tenant_key.raw}&route=profile")
    try:
        # The customer asks for a person: queued, told their place.
        asked = customer.say(ASK)
        escalation = asked["metadata"]["escalation"]
        assert (escalation["status"], escalation["position"], escalation["queue"]) == ("queued", 1, "support")
        assert "Você é o 1º da fila" in asked["answer"]
        key = asked["conversation_key"]

        # It arrives in the desk's queue as it happens, first in line; the person takes it.
        row = page.wait_for_selector(f'.desk-row[data-escalation="{escalation["id"]}"]')
        assert row.query_selector(".desk-position").inner_text() == "1"
        assert row.query_selector(".desk-reason").inner_text() == "The customer asked for a person"
        row.query_selector(".desk-row-take").click()
        page.wait_for_selector("#desk-conversation[data-mine=true][data-status=assigned]")
        page.wait_for_selector(f'#desk-mine .desk-row[data-escalation="{escalation["id"]}"]')
        assert page.locator("#desk-queues .desk-row").count() == 0
        assert "The customer asked for a person" in page.inner_text("#desk-why")
        assert "Why: The customer asked for a person." in page.inner_text("#desk-summary")
        taken = customer.next("escalation")
        assert taken["escalation"]["status"] == "assigned" and taken["notice"] == "Ana está atendendo você agora."

        # The customer writes while the person holds it: no assistant answers, the desk shows it at once.
        held = customer.say(WAITING_WORDS)
        assert held["answer"] == "" and held["metadata"]["escalation"]["person"] == "Ana"
        page.wait_for_selector(f'.desk-message[data-role=user]:has-text("{WAITING_WORDS[:30]}")')

        # The person answers and writes a note for colleagues; the customer receives the reply on the same socket.
        page.fill("#desk-reply", REPLY)
        page.click("#desk-reply-send")
        page.wait_for_selector(".desk-message[data-role=human]")
        page.fill("#desk-note", NOTE)
        page.click("#desk-note-send")
        page.wait_for_selector(".desk-message[data-role=note]")
        # Meanwhile another customer asks for a person, on another face: they join the queue, the desk sees it live.
        other = httpx.post(
            f"{base_url}/api/gateway/message",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
            json={
                "agent_id": "telecom_contas",
                "payload": {"text": "I want to talk to a real person", "session_id": "web-7"},
            },
            timeout=30,
        ).json()["metadata"]["escalation"]
        page.wait_for_selector(f'.desk-row[data-escalation="{other["id"]}"] .desk-position:text-is("1")')
        reply = customer.next("human")
        assert reply["message"]["content"] == REPLY
        assert reply["message"]["author"]["kind"] == "human" and reply["message"]["author"]["name"] == "Ana"
        assert page.is_hidden("#desk-error")
        page.screenshot(path=str(screenshot_path(SCREENSHOT)), full_page=True)

        # Handed back: the customer is told, and the next message is routed to a specialist again.
        page.fill("#desk-hand-back-note", "Explicada a cobrança de roaming.")
        page.click("#desk-hand-back")
        page.wait_for_selector("#desk-conversation[data-status=returned]")
        back = customer.next("escalation")
        assert back["escalation"]["status"] == "returned"
        routed = customer.say(INVOICE)
        assert routed["agent"] == "billing_agent"
        assert routed["metadata"]["escalation"] is None
        assert routed["metadata"]["route_decision"]["method"] == "keyword"
    finally:
        customer.close()

    assert page.errors == []
    conversation = Conversation.objects.get(conversation_key=key)
    assert conversation.outcome == "escalated" and conversation.escalation_id is None
    assert ConversationOutcome.objects.get(conversation=conversation).outcome == "escalated"
    handed, returned = Handoff.objects.filter(conversation=conversation, kind=HandoffKind.HUMAN).order_by("id")
    assert (handed.to_agent, handed.outcome) == (PERSON, "customer_request")
    assert (returned.from_agent, returned.outcome) == (PERSON, "returned")
    assert Escalation.objects.get(pk=escalation["id"]).status == EscalationStatus.RETURNED

    messages = httpx.get(
        f"{base_url}/api/sessions/{key}/messages", headers={"Authorization": f"Bearer {tenant_key.raw}"}, timeout=10
    ).json()["messages"]
    replies = [message for message in messages if message["role"] == "human"]
    assert [(m["content"], m["author"]["kind"], m["author"]["name"]) for m in replies] == [(REPLY, "human", "Ana")]
    assert all(message["role"] != "note" for message in messages)  # the customer's side never reads the notes


def test_the_chat_page_shows_a_persons_reply_and_the_escalations_notices(
    base_url, browser_page, staff_user, tenant, telecom, settings
):
    settings.OFFLINE_LLM_LATENCY_MS = 5
    page = browser_page
    log_in(page, base_url, "analyst", "analyst-password", "/chat/")
    page.select_option("#chat-profile", "telecom_contas")
    page.select_option("#chat-tenant", tenant.slug)
    page.select_option("#chat-route", "profile")
    page.wait_for_selector("#chat-connection[data-state=open]")
    session_id = page.input_value("#chat-session")

    page.fill("#chat-input", ASK)
    page.click("#chat-send")
    answer = page.wait_for_selector(".chat-answer[data-state=done]")
    assert answer.get_attribute("data-escalation") == "queued"
    assert answer.get_attribute("data-position") == "1"
    assert "Waiting for a person: support queue, number 1" in page.inner_text(".chat-escalation[data-status=queued]")

    escalation = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_contas:{session_id}").escalation
    person = person_of_user(staff_user)
    elsewhere(escalation_take, escalation_id=escalation.pk, person=person)
    page.wait_for_selector(".chat-escalation[data-status=assigned]")
    elsewhere(desk_reply, escalation_id=escalation.pk, person=person, text="Oi, aqui é uma pessoa.")
    human = page.wait_for_selector(".chat-human")
    assert human.get_attribute("data-author") == "analyst"
    assert "Oi, aqui é uma pessoa." in human.inner_text()
    assert page.get_attribute("#chat-current-agent", "data-agent") == "human"
    elsewhere(escalation_hand_back, escalation_id=escalation.pk, person=person)
    returned = page.wait_for_selector(".chat-escalation[data-status=returned]")
    assert "assistente virtual" in returned.inner_text()
    assert page.errors == []
