"""A routing editor's whole change in a real browser (Debian's Chromium): edit the draft → run the saved
tests → see a failure → fix it → publish → the next API message follows it → revert → the old behaviour is back.
Screenshots of each step go to test-output/screenshots/versions-*.png."""

from __future__ import annotations

import httpx
import pytest

from agents.models import AgentProfile
from releases.models import RoutingTestCase
from releases.versions import version_publish
from routing.models import RoutingVersion
from tests.browser_fixtures import screenshot_path, submit_login

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def ask(server, text: str, session: str) -> dict:
    """A customer's message over HTTP to the running server (the browser's thread holds an event loop)."""
    base, key = server
    response = httpx.post(
        f"{base}/api/gateway/message",
        json={"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()["metadata"]


def add_keyword(page, base: str, intent_pk: int, word: str) -> None:
    """Type ``word`` in the intent page's first empty keyword row and save."""
    page.goto(base + f"/admin/routing/intent/{intent_pk}/change/")
    rows = page.locator("input[name^='keywords-'][name$='-text']:not([name*='__prefix__'])")
    empty = next(i for i in range(rows.count()) if not rows.nth(i).input_value())
    rows.nth(empty).fill(word)
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")


def shot(page, name: str) -> None:
    page.screenshot(path=str(screenshot_path(f"versions-{name}.png")), full_page=True)


def test_an_editor_edits_tests_publishes_and_reverts_and_customers_follow(
    live_server, browser_page, editor, telecom, tenant_key
):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="what customers had")
    RoutingTestCase.objects.create(
        profile=profile,
        name="fatura alta",
        message="Minha fatura veio alta",
        expect={"intent": "billing_invoice_explanation"},
    )
    page, base = browser_page, live_server.url
    api = (base, tenant_key.raw)
    assert ask(api, "meu modem parou", "b-1")["intent"] != "retail_order_tracking"
    page.goto(base + "/admin/login/?next=/admin/")
    submit_login(page, "editor", "editor-password")

    # The editor edits the draft: "modem" as a keyword — on the product intent, by mistake.
    product = profile.intents.get(name="product_information")
    orders = profile.intents.get(name="retail_order_tracking")
    add_keyword(page, base, product.pk, "modem")

    # ...and writes the test of what they want: "modem" is an orders question.
    page.goto(base + "/admin/releases/routingtestcase/add/")
    page.select_option("#id_profile", label=str(profile))
    page.fill("#id_name", "modem")
    page.fill("#id_message", "meu modem parou")
    page.select_option("#id_expect_intent", "retail_order_tracking")
    page.select_option("#id_expect_agent", "orders_agent")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")

    # Run the tests on the draft: the new one fails, with the actual decision and its reason.
    page.goto(base + "/admin/releases/routingtestcase/run/?profile=telecom_contas&version=draft")
    assert page.inner_text("#summary") == "1 of 2 failed: “modem”. 1 passed."
    assert "FAIL" in page.inner_text("#results") and "product_information" in page.inner_text("#results")
    shot(page, "1-test-fails")

    # Publishing is refused while a test fails.
    page.goto(base + f"/admin/agents/agentprofile/{profile.pk}/publish/")
    page.fill("#id_note", "modem keyword")
    page.click("#publish-form input[type=submit]")
    # The refusal comes back as the page again with an error message: wait for it, not for whatever page is up.
    assert "routing test" in page.locator(".messagelist .error").inner_text().lower()
    assert RoutingVersion.objects.filter(profile=profile).count() == 1
    shot(page, "2-publish-refused")

    # Fix the draft: the keyword moves to the orders intent; the tests pass.
    page.goto(base + f"/admin/routing/intent/{product.pk}/change/")
    row = page.locator("input[name^='keywords-'][name$='-text'][value='modem']").get_attribute("name")
    page.check(f"input[name='{row.removesuffix('-text')}-DELETE']")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    add_keyword(page, base, orders.pk, "modem")
    page.goto(base + "/admin/releases/routingtestcase/run/?profile=telecom_contas&version=draft")
    assert page.inner_text("#summary") == "All 2 passed."
    # Customers still get version 1 while the fix is a draft.
    assert ask(api, "meu modem parou", "b-2")["intent"] != "retail_order_tracking"

    # Publish: the page shows what changes; the next API message follows it.
    page.goto(base + f"/admin/agents/agentprofile/{profile.pk}/publish/")
    assert "keyword 'modem' added to intent retail_order_tracking" in page.inner_text("#content-main")
    shot(page, "3-publish")
    page.fill("#id_note", "modem questions go to orders")
    page.click("#publish-form input[type=submit]")
    page.wait_for_selector(".messagelist .success")
    published = ask(api, "meu modem parou", "b-3")
    assert (published["intent"], published["version"]) == ("retail_order_tracking", 2)

    # Revert to version 1: the old behaviour is back on the next message.
    first = RoutingVersion.objects.get(profile=profile, number=1)
    page.goto(base + f"/admin/routing/routingversion/{first.pk}/change/")
    page.click("text=Revert to this version")
    shot(page, "4-revert")
    page.click("input[type=submit][value^='Yes, revert']")
    page.wait_for_selector(".messagelist .success")
    reverted = ask(api, "meu modem parou", "b-4")
    assert reverted["version"] == 3 and reverted["intent"] != "retail_order_tracking"
    shot(page, "5-reverted")
    assert page.errors == []
