"""A routing editor's whole day in the admin, in a real browser (Debian's Chromium, as tests/browser_fixtures.py
starts it), on the embedded default (SQLite), as a member of "Routing editors" who is not a superuser, at 1,400
pixels: open the ratings inbox, find the answer a customer rated down, open its conversation, add the customer's
message as a routing test, run the tests (the new one fails), fix the routing in the draft, run them again (it
passes), look at the impact preview, roll the draft out in stages from the publish page, watch the rollout
advance, then revert — no shell, no 403, no 500, nothing running off the right edge. The screenshots (in
``test-output/screenshots/editor-day-*.png``) are the ones docs/admin.md shows.

The customer's conversation is real: the message goes through the gateway with the tenant's API key and the
answer is rated through the API, as a customer's client would.
"""

from __future__ import annotations

import httpx
import pytest
from django.db import connection

from releases.models import RolloutPlan, RolloutPlanStatus, RoutingTestCase
from releases.versions import version_publish
from routing.models import RoutingVersion
from routing.selectors import live_version
from tenants.models import TenantGrant
from tests.browser_fixtures import screenshot_path, submit_login

pytestmark = [pytest.mark.slow, pytest.mark.sqlite_too, pytest.mark.django_db(transaction=True)]

COMPLAINT = "Quero reclamar da entrega, o entregador foi muito grosso comigo"
NO_OVERFLOW = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


@pytest.fixture
def sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("the editor's day runs on the embedded default: tests/test_sqlite_too.py runs it on SQLite")


@pytest.fixture
def complaint(live_server, tenant_key, telecom):
    """A customer's complaint routed to orders by the keyword "entrega", its answer rated down with a comment —
    over HTTP, with the tenant's key, as the customer's client sends them."""
    version_publish(profile=telecom, note="first")
    client = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {tenant_key.raw}"}, timeout=30)
    body = {
        "channel": "web",
        "agent_id": "telecom_contas",
        "payload": {"text": COMPLAINT, "session_id": "loja-1", "user_id": "cliente-1"},
    }
    answered = client.post("/api/gateway/message", json=body)
    assert answered.status_code == 200, answered.text
    assert answered.json()["agent"] == "orders_agent"
    key = answered.json()["conversation_key"]
    rated = client.post(
        f"/api/sessions/{key}/feedback",
        json={
            "message_id": answered.json()["message_id"],
            "rating": "down",
            "comment": "Eu queria reclamar, não rastrear",
        },
    )
    assert rated.status_code in (200, 201), rated.text
    return key


class Visits:
    """Every page the browser loads, with its status: none may be a 403 or a 5xx."""

    def __init__(self, page) -> None:
        self.failed: list[str] = []
        page.on(
            "response",
            lambda response: (
                self.failed.append(f"{response.status} {response.url}")
                if response.request.resource_type == "document" and (response.status == 403 or response.status >= 500)
                else None
            ),
        )


def shot(page, name: str) -> None:
    page.screenshot(path=str(screenshot_path(f"editor-day-{name}.png")), full_page=True)
    assert page.evaluate(NO_OVERFLOW), f"{name}: the page runs off the right edge at 1,400 px"


def run_tests(page, base: str) -> str:
    page.goto(base + "/admin/releases/routingtestcase/")
    page.click("text=Run tests")
    page.select_option("select[name=profile]", "telecom_contas")
    page.select_option("select[name=version]", "draft")
    page.click("input[type=submit][value=Run]")
    page.wait_for_selector("#summary")
    return page.text_content("#summary")


def test_a_routing_editors_day_from_a_rating_to_a_staged_rollout_and_back(
    sqlite_only, live_server, browser_page, editor, tenant, telecom, complaint
):
    TenantGrant.objects.create(
        tenant=tenant, user=editor, read_conversations=True, act_for_tenant=True, debug_tenant=True
    )
    page, base = browser_page, live_server.url
    visits = Visits(page)
    page.goto(base + "/admin/login/?next=/admin/")
    submit_login(page, "editor", "editor-password")
    shot(page, "01-home")

    # The inbox: the answer rated down, with the customer's comment.
    page.click("text=Customer ratings")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == 1
    assert "Eu queria reclamar" in page.text_content("#result_list")
    shot(page, "02-inbox")

    # Its conversation, at the rated answer; the customer's message becomes a routing test.
    page.click("#result_list a.rating-conversation")
    page.wait_for_selector(".timeline-add-test")
    shot(page, "03-conversation")
    page.click(".timeline-add-test")
    page.wait_for_url("**/admin/releases/routingtestcase/add/**")
    assert page.input_value("#id_message") == COMPLAINT
    assert page.input_value("#id_expect_intent") == "retail_order_tracking"  # what was decided
    page.fill("#id_name", "reclamação de entrega")
    page.select_option("#id_expect_intent", "support_request")
    page.select_option("#id_expect_agent", "support_agent")
    shot(page, "04-test-form")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    assert RoutingTestCase.objects.get().expect == {"intent": "support_request", "agent": "support_agent"}

    # The tests on the draft: the new one fails, and leads the results.
    summary = run_tests(page, base)
    assert summary.startswith("1 of 1 failed"), summary
    shot(page, "05-tests-failed")

    # The fix, in the draft: complaints are support's, before orders' keywords.
    page.goto(base + "/admin/routing/intent/?q=support_request")
    page.click("#result_list a:text-is('support_request')")
    page.wait_for_selector("#id_priority")
    page.fill("#id_priority", "5")
    first_new = page.input_value("#id_keywords-INITIAL_FORMS")  # the rows after the intent's keywords are new
    page.fill(f"#id_keywords-{first_new}-text", "reclamar")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    assert "draft" in page.text_content(".messagelist")
    assert live_version(telecom).number == 1  # customers still get version 1
    assert set(telecom.intents.get(name="support_request").keywords.values_list("text", flat=True)) == {
        "troca",
        "devolução",
        "garantia",
        "defeito",
        "reclamar",
    }

    summary = run_tests(page, base)
    assert summary.startswith("1 of 1 passed") or "failed" not in summary, summary
    shot(page, "06-tests-passed")

    # The impact on last days' real messages: the complaint would now go to support.
    page.goto(base + f"/admin/agents/agentprofile/{telecom.pk}/change/")
    page.click("text=Impact preview")
    page.wait_for_selector("#impact-totals")
    assert "1 of 1 message(s)" in " ".join(page.text_content("#impact-totals").split())
    shot(page, "07-impact")

    # Roll the draft out in stages from the publish page.
    page.goto(base + f"/admin/agents/agentprofile/{telecom.pk}/change/")
    page.click("#publish-draft-link")
    page.wait_for_selector("#choice-stages")
    page.fill("#id_note", "complaints go to support")
    page.fill("#id_plan-stages", "50, 100")
    shot(page, "08-publish-choices")
    page.click("#publish-stages")
    page.click("#rollout-confirm")
    page.wait_for_selector("#content-main[data-state='ready']")
    plan = RolloutPlan.objects.get()
    assert plan.status == RolloutPlanStatus.RUNNING
    assert page.text_content("#plan-stage") == "1 of 2 (50 %)"
    shot(page, "09-rollout-started")

    # Watch it advance: the plan's page, Advance now (confirmed) to the last stage, then to everyone.
    page.click("#rollout-admin-link")
    page.click("#rollout-advance")
    page.click("#rollout-confirm")
    page.wait_for_selector(".messagelist")
    page.click("#rollout-view-link")
    page.wait_for_selector("#content-main[data-state='ready']")
    assert page.text_content("#plan-stage") == "2 of 2 (100 %)"
    shot(page, "10-rollout-advanced")
    page.click("#rollout-admin-link")
    page.click("#rollout-advance")
    page.click("#rollout-confirm")
    page.wait_for_selector(".messagelist")
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.COMPLETED and live_version(telecom).number == 2

    # Revert to version 1 from the version history, after its confirmation.
    page.goto(base + f"/admin/agents/agentprofile/{telecom.pk}/change/")
    page.click("#content-main >> text=Version history")
    page.click(
        f"#result_list a[href*='/routingversion/{RoutingVersion.objects.get(profile=telecom, number=1).pk}/change/']"
    )
    page.click("text=Revert to this version")
    shot(page, "11-revert-confirm")
    page.click("input[type=submit][value^='Yes, revert']")
    page.wait_for_selector(".messagelist")
    assert live_version(telecom).reverted_from == 1

    assert visits.failed == []
    assert page.errors == []
