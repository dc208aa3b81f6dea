"""The chat page's 👍/👎 on answers in a real browser: rating, re-rating, and a refusal shown.

Served as in ``test_chat_page_browser.py`` (the page and its socket under uvicorn, Debian's Chromium through
Playwright). A screenshot goes to ``test-output/screenshots/chat-page-feedback.png``.
"""

from __future__ import annotations

import pytest

from chat.tests.test_websocket import uvicorn_server  # noqa: F401 — the fixture, reused
from conversations.feedback import ERROR_NOT_AN_ANSWER
from conversations.models import Message, MessageFeedback
from tests.browser_fixtures import screenshot_path

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCREENSHOT = "chat-page-feedback.png"
CHAT = "/chat/"
PRODUCT = "Qual o melhor plano de internet?"  # the product specialist answers; no MCP tool is called
INTERNET = "E a internet fibra?"


@pytest.fixture
def browser_viewport() -> dict[str, int]:
    return {"width": 1200, "height": 900}


@pytest.fixture
def base_url(uvicorn_server) -> str:  # noqa: F811 — the imported fixture
    return uvicorn_server.replace("ws://", "http://", 1)


def test_staff_rate_an_answer_down_then_up_and_see_a_refused_rating_explained(
    base_url, browser_page, staff_user, tenant, telecom, settings
):
    settings.OFFLINE_LLM_LATENCY_MS = 5
    page = browser_page
    page.goto(base_url + "/admin/login/?next=" + CHAT)
    page.fill("#id_username", "analyst")
    page.fill("#id_password", "analyst-password")
    page.click("#login-form input[type=submit]")
    page.wait_for_url(base_url + CHAT)
    page.select_option("#chat-profile", "telecom_contas")
    page.select_option("#chat-tenant", tenant.slug)
    page.wait_for_selector("#chat-connection[data-state=open]")

    def say(text: str):
        done = page.locator(".chat-answer[data-state=done]").count()
        page.fill("#chat-input", text)
        page.click("#chat-send")
        page.wait_for_function(
            "n => document.querySelectorAll('.chat-answer[data-state=done]').length === n", arg=done + 1
        )
        return page.locator(".chat-answer[data-state=done]").last

    first = say(PRODUCT)
    bar = first.locator(".chat-feedback")
    message_id = int(bar.get_attribute("data-message-id"))
    stored = Message.objects.get(pk=message_id)
    assert stored.role == "assistant"
    assert stored.content == first.locator(".chat-answer-text").text_content()
    up, down = bar.locator("button[data-rating=up]"), bar.locator("button[data-rating=down]")
    symbols = (up.locator(".chat-feedback-symbol").inner_text(), down.locator(".chat-feedback-symbol").inner_text())
    assert symbols == ("👍", "👎")
    assert (up.get_attribute("aria-pressed"), down.get_attribute("aria-pressed")) == ("false", "false")

    down.click()
    page.wait_for_selector(".chat-feedback[data-rating=down][data-state=saved]")
    assert (up.get_attribute("aria-pressed"), down.get_attribute("aria-pressed")) == ("false", "true")
    feedback = MessageFeedback.objects.get()
    assert (feedback.message_id, feedback.rating, feedback.staff_user_id) == (message_id, "down", staff_user.pk)

    up.click()
    page.wait_for_selector(".chat-feedback[data-rating=up][data-state=saved]")
    assert (up.get_attribute("aria-pressed"), down.get_attribute("aria-pressed")) == ("true", "false")
    assert list(MessageFeedback.objects.values_list("message_id", "rating")) == [(message_id, "up")]

    # An answer that is gone by the time it is rated (its history cleared meanwhile): the refusal is shown under
    # it, naming the field, and nothing shows pressed.
    second = say(INTERNET)
    second_bar = second.locator(".chat-feedback")
    Message.objects.filter(pk=int(second_bar.get_attribute("data-message-id"))).delete()
    second_bar.locator("button[data-rating=down]").click()
    page.wait_for_selector(".chat-feedback[data-state=error]")
    status = second_bar.locator(".chat-feedback-status")
    assert "message_id: " + ERROR_NOT_AN_ANSWER in status.inner_text()
    assert second_bar.locator("button[aria-pressed=true]").count() == 0
    assert MessageFeedback.objects.count() == 1

    page.screenshot(path=str(screenshot_path(SCREENSHOT)), full_page=True)
    assert page.errors == []
