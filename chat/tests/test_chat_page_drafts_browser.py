"""The chat page's Version picker in a real browser: an editor tries the draft, then the live version.

Served as in ``test_chat_page_browser.py`` (the page and its socket under uvicorn, Debian's Chromium through
Playwright). A screenshot of the draft being tried goes to ``test-output/screenshots/chat-page-draft.png``.
"""

from __future__ import annotations

import pytest

from chat.tests.test_websocket import uvicorn_server  # noqa: F401 — the fixture, reused
from conversations.models import Message
from releases.versions import version_publish
from routing.models import Keyword
from tests.browser_fixtures import screenshot_path

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHAT = "/chat/"
MODEM = "meu modem chegou quebrado"  # no keyword of the live version; the draft's edited keyword


@pytest.fixture
def browser_viewport() -> dict[str, int]:
    return {"width": 1200, "height": 900}


@pytest.fixture
def base_url(uvicorn_server) -> str:  # noqa: F811 — the imported fixture
    return uvicorn_server.replace("ws://", "http://", 1)


def test_an_editor_picks_the_draft_and_its_edited_keyword_routes_then_live_routes_the_old_way(
    base_url, browser_page, staff_user, tenant, telecom, settings
):
    settings.OFFLINE_LLM_LATENCY_MS = 5
    version_publish(profile=telecom, note="first")
    # The draft's edit: the keyword "entrega" of retail_order_tracking becomes "modem".
    Keyword.objects.filter(intent__profile=telecom, text="entrega").update(text="modem")
    from common.config_version import config_version_bump

    config_version_bump()  # QuerySet.update bypasses the signals
    page = browser_page
    page.goto(base_url + "/admin/login/?next=" + CHAT)
    page.fill("#id_username", "analyst")
    page.fill("#id_password", "analyst-password")
    page.click("#login-form input[type=submit]")
    page.wait_for_url(base_url + CHAT)
    page.select_option("#chat-profile", "telecom_contas")
    page.select_option("#chat-tenant", tenant.slug)
    page.select_option("#chat-route", "profile")
    page.wait_for_selector("#chat-connection[data-state=open]")
    assert page.input_value("#chat-version") == "live"
    assert page.is_hidden("#chat-draft-marker")
    live_session = page.input_value("#chat-session")

    def say(text: str) -> tuple[str, str]:
        """The agent the message was routed to and the answer's version, once it is done."""
        done = page.locator(".chat-answer[data-state=done]").count()
        page.fill("#chat-input", text)
        page.click("#chat-send")
        page.wait_for_function(
            "n => document.querySelectorAll('.chat-answer[data-state=done]').length === n", arg=done + 1
        )
        answer = page.locator(".chat-answer[data-state=done]").last
        return page.locator(".chat-route").last.get_attribute("data-agent"), answer.get_attribute("data-version")

    # Draft: a new conversation, marked as the draft, routed by the draft's keyword.
    page.select_option("#chat-version", "draft")
    page.wait_for_selector("#chat-connection[data-state=open]")
    draft_session = page.input_value("#chat-session")
    assert draft_session != live_session
    assert page.is_visible("#chat-draft-marker")
    assert "Draft" in page.inner_text("#chat-draft-marker")
    assert page.get_attribute("#content-main", "data-version") == "draft"
    assert say(MODEM) == ("orders_agent", "draft")
    page.screenshot(path=str(screenshot_path("chat-page-draft.png")), full_page=True)

    # Live again: another new conversation, no marker, the old routing.
    page.select_option("#chat-version", "live")
    page.wait_for_selector("#chat-connection[data-state=open]")
    assert page.input_value("#chat-session") not in (live_session, draft_session)
    assert page.is_hidden("#chat-draft-marker")
    assert page.locator(".chat-turn").count() == 0  # the draft's transcript went with its conversation
    agent, version = say(MODEM)
    assert agent != "orders_agent" and version == "1"

    stored = Message.objects.get(conversation__session_id=draft_session, role="assistant")
    assert stored.agent == "orders_agent" and stored.metadata["version"] == "draft"
    assert page.errors == []
