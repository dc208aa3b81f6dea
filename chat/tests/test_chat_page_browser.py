"""The chat page in a real browser: Debian's Chromium driven by Playwright against uvicorn.

``live_server`` serves WSGI and cannot hold a WebSocket, so the page and its socket are served by
``platform.asgi.application`` under uvicorn in a thread (the ``uvicorn_server`` fixture of
``test_websocket.py``), on the test database. Chromium comes from ``scripts/bootstrap --with-chromium``;
Playwright starts that binary and never downloads a browser of its own. Without Chromium the test skips on
a developer's machine and fails under ``CI=true``. A screenshot goes to ``test-output/screenshots/``.
"""

from __future__ import annotations

import json

import pytest

from chat.tests.test_websocket import (
    MSISDN,
    uvicorn_server,  # noqa: F401 — the fixture, reused
)
from conversations.models import Conversation, Message
from tests.browser_fixtures import screenshot_path
from tests.demo_snapshot import demo_seed

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCREENSHOT = "chat-page.png"
CHAT = "/chat/"
INVOICE = "Minha fatura veio alta"  # the seed's billing example


@pytest.fixture
def browser_viewport() -> dict[str, int]:
    return {"width": 1200, "height": 900}


@pytest.fixture
def base_url(uvicorn_server) -> str:  # noqa: F811 — the imported fixture
    return uvicorn_server.replace("ws://", "http://", 1)


def chat_opened(page, base_url: str, tenant, agent_id: str):
    """The analyst signed in on the chat page, talking to ``agent_id`` for ``tenant``, the socket open."""
    page.goto(base_url + "/admin/login/?next=" + CHAT)
    page.fill("#id_username", "analyst")
    page.fill("#id_password", "analyst-password")
    page.click("#login-form input[type=submit]")
    page.wait_for_url(base_url + CHAT)
    page.select_option("#chat-profile", agent_id)
    page.select_option("#chat-tenant", tenant.slug)
    page.wait_for_selector("#chat-connection[data-state=open]")
    return page


def sent(page, text: str, turns: int) -> None:
    """``text`` sent, and the page waited on until ``turns`` answers are done."""
    page.fill("#chat-input", text)
    page.click("#chat-send")
    page.wait_for_function("n => document.querySelectorAll('.chat-answer[data-state=done]').length === n", arg=turns)


def test_anonymous_visitors_are_sent_to_the_admin_login(base_url, browser_page):
    browser_page.goto(base_url + CHAT)
    assert "/admin/login/" in browser_page.url


def test_staff_chat_with_telecom_contas_and_see_billing_agent_stream_the_answer(
    base_url, browser_page, staff_user, tenant, live_mcp, settings
):
    settings.OFFLINE_LLM_LATENCY_MS = 5
    page = browser_page

    page.goto(base_url + "/admin/")
    page.fill("#id_username", "analyst")
    page.fill("#id_password", "analyst-password")
    page.click("#login-form input[type=submit]")
    page.wait_for_url(base_url + "/admin/")
    page.click("#chat-link")
    page.wait_for_url(base_url + CHAT)

    page.select_option("#chat-profile", "telecom_contas")
    page.select_option("#chat-tenant", tenant.slug)
    page.wait_for_selector("#chat-connection[data-state=open]")
    session_id = page.input_value("#chat-session")
    assert session_id

    page.fill("#chat-user", "u1")
    page.fill("#chat-context", json.dumps({"msisdn": MSISDN}))  # the billing tools look the line up by it
    page.fill("#chat-input", INVOICE)
    page.click("#chat-send")
    answer = page.wait_for_selector(".chat-answer[data-state=done]")

    assert page.get_attribute("#chat-current-agent", "data-agent") == "billing_agent"
    display_name = page.get_attribute("#chat-current-agent", "data-display-name")
    assert display_name
    assert page.inner_text("#chat-current-agent") in (f"{display_name} (billing_agent)", "billing_agent")
    assert page.locator(".chat-agent[data-agent=billing_agent]").count() == 1
    assert answer.get_attribute("data-agent") == "billing_agent"
    assert "billing_agent" in answer.query_selector(".chat-answer-agent").inner_text()

    # Streamed token by token, and the tokens spelled out the answer that done then confirmed.
    assert int(answer.get_attribute("data-tokens")) > 10
    assert answer.get_attribute("data-streamed") == "complete"
    shown = answer.query_selector(".chat-answer-text").evaluate("node => node.textContent")

    conversation = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_contas:{session_id}")
    assert answer.get_attribute("data-conversation-key") == conversation.conversation_key
    stored = Message.objects.filter(conversation=conversation, role="assistant").order_by("-pk").first()
    assert stored is not None and stored.agent == "billing_agent"
    assert shown == stored.content
    assert conversation.user_id == "u1" and conversation.channel == "websocket"

    # Tool calls folded, opened on demand.
    tools = page.locator("details.chat-tool")
    assert tools.count() >= 1
    first = tools.first
    assert first.get_attribute("open") is None
    assert not first.locator(".chat-tool-finished").is_visible()
    assert first.get_attribute("data-status") == "ok"
    first.locator("summary").click()
    assert first.locator(".chat-tool-finished").is_visible()
    assert "finished: ok" in first.locator(".chat-tool-finished").inner_text()

    assert page.is_hidden("#chat-error")
    page.screenshot(path=str(screenshot_path(SCREENSHOT)), full_page=True)
    assert page.errors == []


@pytest.fixture
def demo_profiles(transactional_db, mcp_servers):
    """seed_demo's profiles (telecom_assistente delegates) with their MCP servers running."""
    from agents.models import McpServer
    from common.config_version import config_version_bump

    demo_seed()  # for real: a transactional test (tests/demo_snapshot.py)
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()


def test_delegations_returns_and_agent_switches_show_inline_as_they_happen(
    base_url, browser_page, staff_user, tenant, demo_profiles, settings
):
    from handoffs.models import Handoff

    settings.OFFLINE_LLM_LATENCY_MS = 5
    page = chat_opened(browser_page, base_url, tenant, "telecom_assistente")
    session_id = page.input_value("#chat-session")
    page.fill("#chat-context", json.dumps({"msisdn": MSISDN, "order_id": "P100"}))

    # The coordinator delegates the invoice to billing_agent, who answers in the same turn.
    sent(page, INVOICE, 1)
    moves = page.locator(".chat-move")
    assert [moves.nth(i).get_attribute("data-kind") for i in range(moves.count())] == ["delegation"]
    assert moves.first.inner_text() == "assistente_virtual → billing_agent (delegation)"
    assert page.get_attribute("#chat-current-agent", "data-agent") == "billing_agent"
    assert page.locator(".chat-answer").last.get_attribute("data-agent") == "billing_agent"

    # An order question is out of billing's scope: it returns, and the coordinator delegates to orders_agent.
    sent(page, "Meu pedido P100 atrasou?", 2)
    second = page.locator(".chat-turn").last
    kinds = [m.get_attribute("data-kind") for m in second.locator(".chat-move").all()]
    assert kinds == ["return", "delegation"]
    assert [m.inner_text() for m in second.locator(".chat-move").all()] == [
        "billing_agent → assistente_virtual (return)",
        "assistente_virtual → orders_agent (delegation)",
    ]
    switches = second.locator(".chat-switch")
    assert switches.count() >= 1
    assert switches.first.get_attribute("data-from") == "billing_agent"
    assert switches.last.get_attribute("data-to") == "orders_agent"
    assert page.get_attribute("#chat-current-agent", "data-agent") == "orders_agent"
    last_answer = page.locator(".chat-answer").last
    assert last_answer.get_attribute("data-agent") == "orders_agent"

    # The page showed exactly the moves stored in agent_handoffs, in order.
    conversation = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_assistente:{session_id}")
    stored = list(
        Handoff.objects.filter(conversation=conversation).order_by("created_at", "id").values_list("kind", flat=True)
    )
    assert stored == ["delegation", "return", "delegation"]
    page.screenshot(path=str(screenshot_path("chat-page-delegation.png")), full_page=True)
    assert page.errors == []


def test_a_side_question_inside_a_flow_shows_the_flow_pushed_and_resumed(
    base_url, browser_page, staff_user, tenant, demo_profiles, settings
):
    settings.OFFLINE_LLM_LATENCY_MS = 5
    page = chat_opened(browser_page, base_url, tenant, "telecom_contas")
    page.fill("#chat-context", json.dumps({"msisdn": MSISDN}))

    sent(page, "Quero pagar minha fatura com pix", 1)
    opened = page.locator(".chat-turn").last.locator(".chat-stack")
    assert opened.get_attribute("data-events") == "opened"
    assert opened.inner_text() == (
        "Flows: opened WAITING_PAYMENT_CONFIRMATION (billing_payment_request) · open: WAITING_PAYMENT_CONFIRMATION"
    )

    sent(page, "antes disso, qual o vencimento da fatura?", 2)
    digressed = page.locator(".chat-turn").last.locator(".chat-stack")
    assert digressed.get_attribute("data-events") == "pushed resumed"
    assert digressed.inner_text().startswith(
        "Flows: pushed WAITING_PAYMENT_CONFIRMATION (billing_invoice_explanation); resumed WAITING_PAYMENT_CONFIRMATION"
    )

    sent(page, "obrigado!", 3)  # small talk: nothing moved, the flow still open
    assert page.locator(".chat-turn").last.locator(".chat-stack").inner_text() == (
        "Flows: nothing moved · open: WAITING_PAYMENT_CONFIRMATION"
    )
    page.screenshot(path=str(screenshot_path("chat-page-flows.png")), full_page=True)
    assert page.errors == []


@pytest.fixture
def finance_profile(transactional_db, finance_mcp, monkeypatch):
    """seed_demo's finance_assistente (goal mode) over the real finance MCP server, its manifest synced into goals
    and capabilities before the demo is published, as scripts/start does it (first_run --demo --sync)."""
    from urllib.parse import urlsplit

    server = urlsplit(finance_mcp)
    monkeypatch.setenv("MCP_FINANCE_HOST", server.hostname)
    monkeypatch.setenv("MCP_FINANCE_PORT", str(server.port))
    demo_seed("--sync")  # for real: a transactional test (tests/demo_snapshot.py)


def test_goal_mode_shows_the_goal_read_the_plan_steps_and_asks_with_candidate_buttons(
    base_url, browser_page, staff_user, tenant, finance_profile, settings
):
    settings.OFFLINE_LLM_LATENCY_MS = 5
    page = browser_page
    page.goto(base_url + "/admin/login/?next=" + CHAT)
    page.fill("#id_username", "analyst")
    page.fill("#id_password", "analyst-password")
    page.click("#login-form input[type=submit]")
    page.wait_for_url(base_url + CHAT)

    option = page.locator("#chat-profile option[value=finance_assistente]")
    assert option.get_attribute("data-mode") == "goal"
    assert "goal mode" in option.inner_text()
    page.select_option("#chat-profile", "finance_assistente")
    page.select_option("#chat-tenant", tenant.slug)
    page.wait_for_selector("#chat-connection[data-state=open]")
    session_id = page.input_value("#chat-session")

    def answers(turns: int) -> None:
        page.wait_for_function(
            "n => document.querySelectorAll('.chat-answer[data-state=done]').length === n", arg=turns
        )

    page.fill("#chat-input", "qual o preço da Nordea?")
    page.click("#chat-send")
    answers(1)
    asking = page.locator(".chat-turn").first

    # The goal and the entities read, then the plan: the symbol search asked, the quote never ran.
    assert asking.locator(".chat-goal-text").inner_text() == "GET_QUOTE · symbol_text: Nordea"
    steps = asking.locator(".chat-plan-step")
    assert [(s.get_attribute("data-capability"), s.get_attribute("data-status")) for s in steps.all()] == [
        ("search_symbol", "clarification"),
        ("get_stock_price", "skipped"),
    ]
    assert "ms" in steps.first.locator(".chat-plan-status").inner_text()

    # The candidates, as buttons; the second one answers with its number.
    choices = asking.locator("button.chat-choice")
    assert [c.get_attribute("data-value") for c in choices.all()] == ["NDA-SE.ST", "NDA-FI.HE"]
    assert "NDA-FI.HE" in choices.nth(1).inner_text()
    choices.nth(1).click()
    answers(2)

    answered = page.locator(".chat-turn").last
    assert answered.locator(".chat-user").inner_text() == "2"
    assert choices.nth(1).get_attribute("data-chosen") == "true"
    assert all(c.is_disabled() for c in choices.all())  # a question answered is not answered twice
    answer = answered.locator(".chat-answer")
    assert answer.get_attribute("data-agent") == "goal_planner"
    assert "NDA-FI.HE" in answer.locator(".chat-answer-text").inner_text()
    assert answered.locator(".chat-goal").get_attribute("data-status") == "success"
    shown = [
        (s.get_attribute("data-capability"), s.get_attribute("data-status"))
        for s in answered.locator(".chat-plan-step").all()
    ]
    assert ("get_stock_price", "success") in shown
    assert answered.locator("button.chat-choice").count() == 0

    conversation = Conversation.objects.get(conversation_key=f"{tenant.slug}:finance_assistente:{session_id}")
    stored = Message.objects.filter(conversation=conversation, role="assistant").order_by("-pk").first()
    assert stored is not None and stored.metadata["goal"]["status"] == "success"
    assert answer.locator(".chat-answer-text").evaluate("node => node.textContent") == stored.content
    page.screenshot(path=str(screenshot_path("chat-page-goal.png")), full_page=True)
    assert page.errors == []


HOSTILE = '<img src=x onerror="document.title=1">'


def test_what_goal_mode_shows_is_text_never_markup(
    base_url, browser_page, staff_user, tenant, finance_profile, scripted_llm, settings
):
    from routing.goals.intent import GoalIntent

    # The model reads the markup as the stock's name; the user did write it, so it is kept.
    arguments = {"domain": "finance", "goal": "GET_QUOTE", "entities": {"symbol_text": HOSTILE}, "confidence": 0.97}
    scripted_llm.reply_tool_call(GoalIntent.__name__, arguments)
    page = chat_opened(browser_page, base_url, tenant, "finance_assistente")
    title = page.title()

    page.fill("#chat-input", f"qual o preço da {HOSTILE}?")
    page.click("#chat-send")
    page.wait_for_selector(".chat-answer[data-state=done]")

    assert page.locator(".chat-goal-text").inner_text() == f"GET_QUOTE · symbol_text: {HOSTILE}"
    assert page.locator("#chat-log img").count() == 0
    assert page.title() == title
    assert page.errors == []
