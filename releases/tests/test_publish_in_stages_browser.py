"""A routing editor (not a superuser) rolls a draft out in stages from the publish page, in a real browser (Debian's
Chromium, as tests/browser_fixtures.py starts it) at 1,400 pixels: the page's two choices fit the window, the plan's
defaults are filled in, starting asks first, the rollout's live view opens with the stage counted from 1 and the
decision said in words, and the plan's Abort asks first."""

from __future__ import annotations

import pytest

from releases.models import RolloutPlan, RolloutPlanStatus
from releases.versions import version_publish
from routing.models import Keyword
from routing.selectors import live_version
from tests.browser_fixtures import screenshot_path, submit_login

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NO_OVERFLOW = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def test_an_editor_rolls_the_draft_out_in_stages_watches_it_and_aborts_it(live_server, browser_page, editor, telecom):
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="modem")
    page, base = browser_page, live_server.url
    page.goto(base + "/admin/login/?next=/admin/")
    submit_login(page, "editor", "editor-password")

    page.goto(base + f"/admin/agents/agentprofile/{telecom.pk}/change/")
    page.click("#publish-draft-link")
    page.wait_for_selector("#choice-stages")
    page.screenshot(path=str(screenshot_path("publish-choices-1400.png")), full_page=True)
    assert page.evaluate(NO_OVERFLOW)
    assert page.input_value("#id_plan-stages") == "5, 25, 50, 100"
    page.fill("#id_note", "modem goes to orders")
    page.fill("#id_plan-stages", "10, 50, 100")
    page.press("#id_plan-stages", "Enter")  # Enter chooses nothing: the choice is one of the two buttons
    assert live_version(telecom).number == 1 and not RolloutPlan.objects.exists()
    page.click("#publish-stages")
    page.wait_for_selector("#rollout-confirm")  # a click alone starts nothing: the next page asks first
    assert "10 % of new conversations will get it first" in page.text_content("#rollout-consequences")
    assert not RolloutPlan.objects.exists()
    page.click("#rollout-confirm")

    page.wait_for_selector("#content-main[data-state='ready']")
    plan = RolloutPlan.objects.get()
    assert page.url == base + f"/analytics/rollouts/{plan.pk}/"
    assert page.text_content("#plan-stage") == "1 of 3 (10 %)"
    assert "now 10 % of new conversations" in page.text_content("#plan-stages")
    start_row = page.locator("#table-decisions tbody tr").first
    assert start_row.locator("td").last.text_content() == "editor"
    page.screenshot(path=str(screenshot_path("rollout-view-started-1400.png")), full_page=True)
    assert page.evaluate(NO_OVERFLOW)

    page.click("#rollout-admin-link")
    page.wait_for_selector("#rollout-abort")
    assert page.evaluate(NO_OVERFLOW)
    page.screenshot(path=str(screenshot_path("rollout-plan-admin-1400.png")), full_page=True)
    page.click("#rollout-abort")
    page.wait_for_selector("#rollout-confirm")
    assert "Every conversation goes back to version 1" in page.text_content("#rollout-consequences")
    page.click("#rollout-confirm")
    page.wait_for_selector(".messagelist")

    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.ABORTED and live_version(telecom).number == 1
    assert page.errors == []
