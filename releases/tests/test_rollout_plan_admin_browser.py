"""A routing editor renames a started rollout plan from its change page in a real browser (Debian's Chromium, as
tests/browser_fixtures.py starts it): the page shows what the plan rolls out as text, sends only the inputs it
renders, and the save is taken, the stages untouched."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.urls import reverse

from agents.models import AgentProfile
from releases.models import RolloutPlan, RolloutPlanStatus
from releases.rollout.commands import plan_start
from releases.versions import version_publish
from routing.models import Intent, Keyword
from tests.browser_fixtures import submit_login

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_editor_renames_a_running_plan_from_its_change_page(live_server, browser_page, editor, telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="v1")
    Keyword.objects.create(intent=Intent.objects.get(profile=profile, name="billing_invoice_explanation"), text="zz")
    candidate = version_publish(profile=profile, note="zz", release=False)
    plan = RolloutPlan.objects.create(name="zz", profile=profile, candidate=candidate, stages=[10, 50, 100])
    plan_start(plan, actor="operator")
    page, base = browser_page, live_server.url
    page.goto(base + "/admin/login/?next=/admin/")
    submit_login(page, "editor", "editor-password")

    page.goto(base + reverse("admin:releases_rolloutplan_change", args=[plan.pk]))
    assert page.locator("#id_stages").count() == 0  # started: the stages are text
    assert "10 → 50 → 100 %" in page.text_content(".field-stages_shown")
    page.fill("#id_name", "zz for invoices")
    page.click("input[name=_save]")
    changelist = reverse("admin:releases_rolloutplan_changelist")
    page.wait_for_url(lambda url: urlsplit(url).path == changelist)

    assert "was changed successfully" in page.text_content(".messagelist")
    plan.refresh_from_db()
    assert (plan.name, plan.status, plan.stages) == ("zz for invoices", RolloutPlanStatus.RUNNING, [10, 50, 100])
    assert page.errors == []
