"""What the admin's pages say of the two-person rule before the click: a plan offers *Advance now* only to who may use
it, a version's page and its revert page say a revert to a version never served to everyone needs a second person,
and the plan form's candidates say whether each was served to everyone (``released_at``), not what their numbers
suggest."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from releases.approvals import draft_rollout
from releases.models import RolloutDecisionAction
from releases.rollout.commands import ERROR_ADVANCE_SECOND_PERSON, plan_command
from releases.tests.test_release_approval_paths import QUICK, approved_rollout, command_url, revert_url
from releases.versions import ERROR_REVERT_NEVER_RELEASED, version_publish
from routing.models import Keyword, RoutingVersion

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


def page_of(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def plan_page(plan) -> str:
    return reverse("admin:releases_rolloutplan_change", args=[plan.pk])


@pytest.fixture
def lead(django_user_model, editor, approver):
    """A routing editor who may approve releases too, and asked for nothing."""
    user = django_user_model.objects.create_user("lead", "lead@example.com", "lead-password", is_staff=True)
    user.groups.add(*editor.groups.all(), *approver.groups.all())
    return user


def test_advance_now_is_offered_only_to_who_may_advance_the_plan(client, editor, approver, lead, guarded):
    plan = approved_rollout(guarded, editor, approver, stages=[10, 50, 100])
    said = ERROR_ADVANCE_SECOND_PERSON.format(agent_id="telecom_contas")

    client.force_login(editor)  # who asked for it
    editors_page = page_of(client, plan_page(plan))
    editors_confirm = page_of(client, command_url(plan, RolloutDecisionAction.ADVANCE))
    client.force_login(lead)
    leads_page = page_of(client, plan_page(plan))
    leads_confirm = page_of(client, command_url(plan, RolloutDecisionAction.ADVANCE))

    assert 'id="rollout-advance"' not in editors_page and 'id="rollout-pause"' in editors_page
    assert said in editors_confirm and 'id="rollout-confirm"' not in editors_confirm
    assert 'id="rollout-advance"' in leads_page
    assert said not in leads_confirm and 'id="rollout-confirm"' in leads_confirm


def test_a_version_never_served_to_everyone_says_before_the_click_that_a_revert_needs_a_second_person(
    client, editor, guarded
):
    draft_rollout(profile=guarded, user=editor, settings=QUICK)  # candidate version 2, waiting for approval
    candidate = RoutingVersion.objects.get(profile=guarded, number=2)
    client.force_login(editor)

    version_page = page_of(client, reverse("admin:routing_routingversion_change", args=[candidate.pk]))
    confirm = page_of(client, revert_url(candidate))
    first_page = page_of(client, reverse("admin:routing_routingversion_change", args=[guarded.release.version.pk]))

    tools = version_page.split('class="object-tools"')[1].split("</ul>")[0]
    assert "Revert to this version (needs a second person)" in tools
    assert ERROR_REVERT_NEVER_RELEASED.format(number=2) in confirm and "Yes, revert" not in confirm
    assert "needs a second person)" not in first_page.split('class="object-tools"')[1].split("</ul>")[0]


def test_the_plan_forms_candidates_say_whether_each_was_served_to_everyone(admin_client, telecom):
    version_publish(profile=telecom, note="first")  # 1, live then
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="modem")
    plan = draft_rollout(profile=telecom, user=None, settings=QUICK).plan  # 2, rolled out, then aborted
    plan_command(plan, RolloutDecisionAction.ABORT, actor="operator")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="roteador")
    version_publish(profile=telecom, note="third")  # 3, live now
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="chip")
    version_publish(profile=telecom, note="fourth", release=False)  # 4, a candidate

    response = admin_client.get(reverse("admin:releases_rolloutplan_add"))

    labels = {label for _, label in response.context["adminform"].form.fields["candidate"].choices if label}
    assert {
        "telecom_contas version 1 (served before)",
        "telecom_contas version 2 (never served to everyone)",
        "telecom_contas version 3 (live now)",
        "telecom_contas version 4 (never served to everyone)",
    } <= labels
