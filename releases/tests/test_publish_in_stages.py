"""The profile's publish page offers both choices — to everyone now, or in stages — to a routing editor who is not a
superuser: the staged choice makes the candidate from the draft, the plan, starts it and lands on its live view; the
saved routing tests gate it as they gate a publish; wrong settings are refused naming the field, nothing made; the
profile's page lists its plans with a link to each one's live view."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from agents.models import AgentProfile
from releases.models import RolloutDecision, RolloutPlan, RolloutPlanStatus, RoutingTestCase
from releases.versions import version_publish
from routing.models import Keyword, RoutingVersion
from routing.rollout_plans import GUARD_METRICS
from routing.selectors import live_version
from tests.adminkit import change_url

pytestmark = pytest.mark.django_db


def publish_url(profile: AgentProfile) -> str:
    return f"/admin/agents/agentprofile/{profile.pk}/publish/"


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


def guard_rows(**limits: tuple[str, str]) -> dict[str, str]:
    """The publish page's guards table (prefix "plan"): per metric its relative and absolute limit, as typed."""
    posted = {}
    for index, name in enumerate(GUARD_METRICS):
        relative, absolute = limits.get(name, ("", ""))
        posted[f"plan-guards_{2 * index}"], posted[f"plan-guards_{2 * index + 1}"] = relative, absolute
    return posted


CONFIRMED = "_confirmed"


def staged(**changed: str) -> dict[str, str]:
    """What the page posts when "Start the staged rollout" is pressed, with the given fields changed."""
    data = {
        "how": "stages",
        "note": "modem goes to orders",
        "based_on": "1",
        "plan-stages": "10, 50, 100",
        "plan-hold_minutes": "30",
        "plan-min_conversations": "50",
        "plan-max_errors": "20",
        **guard_rows(fallback_rate=("25", "40"), judge_score=("10", "")),
        CONFIRMED: "Yes, start it",  # what the confirmation page posts (a first press only asks)
    }
    data.update(changed)
    return data


@pytest.fixture
def drafted(telecom) -> AgentProfile:
    """telecom_contas live at version 1, its draft one keyword further."""
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="modem")
    return telecom


@pytest.mark.sqlite_too
def test_the_publish_page_offers_both_choices_with_the_plans_defaults_filled_in(editor_client, drafted):
    page = editor_client.get(publish_url(drafted)).content.decode()

    assert "Publish to everyone now" in page and "Roll out in stages" in page
    assert 'id="publish-now"' in page and 'id="publish-stages"' in page
    # The plan's defaults (RolloutPlan's): stages as a list of percentages, the guards as rows of a table.
    assert 'name="plan-stages" value="5, 25, 50, 100"' in page
    assert 'name="plan-hold_minutes" value="60"' in page and 'name="plan-min_conversations" value="200"' in page
    assert 'name="plan-guards_0" id="id_plan-guards_0" value="25"' in page  # fallback rate: at most 25 % worse
    assert "Negative-feedback rate" in page and "Relative limit: how much worse than the control" in page
    assert "routing_publish" not in page and "[{" not in page  # no shell command, no JSON


def test_publishing_to_everyone_now_is_as_before(editor_client, editor, drafted):
    response = editor_client.post(publish_url(drafted), {"how": "now", "note": "modem", "based_on": "1"}, follow=True)

    assert any("Published telecom_contas version 2" in message for message in messages_of(response))
    assert (live_version(drafted).number, live_version(drafted).created_by) == (2, editor)
    assert not RolloutPlan.objects.exists()


def test_start_the_staged_rollout_asks_first_with_what_will_happen_and_makes_nothing(editor_client, drafted):
    pressed = {**staged(how=""), "_stages": "Start the staged rollout"}
    del pressed[CONFIRMED]

    asked = editor_client.post(publish_url(drafted), pressed)

    assert asked.status_code == 200
    assert not RolloutPlan.objects.exists() and RoutingVersion.objects.filter(profile=drafted).count() == 1
    page = asked.content.decode()
    assert 'id="rollout-confirm"' in page and "Yes, start it" in page
    assert "10 % of new conversations will get it first" in page and "Then 10 → 50 → 100 %" in page
    assert 'type="hidden" name="plan-stages" value="10, 50, 100"' in page  # what was typed is carried, not retyped
    form = page[page.index('id="rollout-start-form"') :].split("</form>")[0]
    assert form.count('name="csrfmiddlewaretoken"') == 1  # its own token, the old one not carried

    started = editor_client.post(publish_url(drafted), {**pressed, CONFIRMED: "Yes, start it"})

    assert started.status_code == 302 and RolloutPlan.objects.get().status == RolloutPlanStatus.RUNNING


def test_rolling_out_in_stages_makes_the_candidate_and_the_plan_starts_it_and_lands_on_its_live_view(
    editor_client, editor, drafted
):
    response = editor_client.post(publish_url(drafted), {**staged(how=""), "_stages": "Start the staged rollout"})

    plan = RolloutPlan.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/analytics/rollouts/{plan.pk}/"
    candidate = RoutingVersion.objects.get(profile=drafted, number=2)
    assert (candidate.created_by, candidate.note) == (editor, "modem goes to orders")
    assert live_version(drafted).number == 1  # the candidate is not live: the plan serves it to 10 %
    assert (plan.status, plan.stage, plan.percentage) == (RolloutPlanStatus.RUNNING, 0, 10)
    assert (plan.candidate, plan.control.number, plan.created_by) == (candidate, 1, editor)
    assert plan.stages == [10, 50, 100] and (plan.hold_minutes, plan.min_conversations) == (30, 50)
    assert plan.guards == [
        {"metric": "fallback_rate", "threshold": 0.25, "absolute": 0.4},
        {"metric": "judge_score", "threshold": 0.1},
    ]
    started = RolloutDecision.objects.get(plan=plan)
    assert (started.action, started.actor) == ("start", "admin: editor")
    live_view = editor_client.get(response["Location"])
    assert live_view.status_code == 200  # a routing editor watches the rollout they started
    assert 'href="/analytics/"' not in live_view.content.decode()  # the dashboard is not theirs: no link to a 403
    assert any("Rolling telecom_contas version 2 out in stages" in m for m in messages_of(live_view))


def test_failing_routing_tests_block_a_staged_rollout_as_they_block_a_publish(editor_client, drafted):
    RoutingTestCase.objects.create(
        profile=drafted, name="invoice", message="Minha fatura veio alta", expect={"intent": "support_request"}
    )

    staged_answer = editor_client.post(publish_url(drafted), staged())
    now_answer = editor_client.post(publish_url(drafted), {"how": "now", "note": "x", "based_on": "1"})

    for answer in (staged_answer, now_answer):
        assert answer.status_code == 200
        assert any("1 of 1 routing tests of telecom_contas fail" in m for m in messages_of(answer))
    assert RoutingVersion.objects.filter(profile=drafted).count() == 1 and not RolloutPlan.objects.exists()


@pytest.mark.parametrize(
    ("changed", "error"),
    [
        ({"plan-stages": "50, 20"}, "Stages: each percentage must be higher than the one before it"),
        ({"plan-stages": "10, 50"}, "Stages: the last stage must be 100 % (every new conversation)."),
        ({"plan-stages": "0, 100"}, "Stages: each stage is a whole percentage from 1 to 100"),
        ({"plan-stages": "ten, 100"}, "Stages: “ten” is not a whole percentage"),
        ({"plan-stages": ""}, "Stages: give at least one percentage"),
        ({"plan-guards_1": "120"}, "Guards, fallback rate: the absolute limit is a number from 0 to 100 percent."),
        ({"plan-guards_11": "2"}, "Guards, judge score: the absolute limit is a number from 0 to 1."),
        ({"plan-hold_minutes": "-1"}, "Ensure this value is greater than or equal to 0."),
    ],
)
def test_wrong_plan_settings_are_refused_naming_the_field_and_nothing_is_made(editor_client, drafted, changed, error):
    answer = editor_client.post(publish_url(drafted), staged(**changed))

    assert answer.status_code == 200
    assert error in answer.content.decode().replace("&#x27;", "'")
    assert RoutingVersion.objects.filter(profile=drafted).count() == 1 and not RolloutPlan.objects.exists()
    assert 'value="modem goes to orders"' in answer.content.decode()  # the note is kept


def test_a_profile_never_published_is_published_to_everyone_first(editor_client, telecom):
    page = editor_client.get(publish_url(telecom)).content.decode()
    assert "was never published" in page and 'id="publish-stages"' not in page

    answer = editor_client.post(publish_url(telecom), staged(based_on=""))

    assert any("was never published" in m for m in messages_of(answer))
    assert not RoutingVersion.objects.exists() and not RolloutPlan.objects.exists()


def test_a_second_staged_rollout_waits_for_the_running_one(editor_client, drafted):
    assert editor_client.post(publish_url(drafted), staged()).status_code == 302
    Keyword.objects.create(intent=drafted.intents.get(name="retail_order_tracking"), text="roteador")

    page = editor_client.get(publish_url(drafted)).content.decode()
    answer = editor_client.post(publish_url(drafted), staged())

    assert "is running already" in page
    assert any("already has a rollout running" in m for m in messages_of(answer))
    assert RolloutPlan.objects.count() == 1 and RoutingVersion.objects.filter(profile=drafted).count() == 2


def test_who_may_publish_but_not_make_plans_sees_no_staged_choice_and_cannot_post_one(
    client, django_user_model, drafted
):
    publisher = django_user_model.objects.create_user("publisher", password="x", is_staff=True)
    publisher.user_permissions.add(*Permission.objects.filter(codename__in=["view_agentprofile", "add_routingversion"]))
    client.force_login(publisher)

    page = client.get(publish_url(drafted)).content.decode()

    assert "Publish to everyone now" in page and "Roll out in stages" not in page
    assert client.post(publish_url(drafted), staged()).status_code == 403
    assert not RolloutPlan.objects.exists()


@pytest.mark.sqlite_too
def test_the_profile_page_lists_its_plans_with_their_stage_and_a_link_to_each_live_view(editor_client, drafted):
    candidate = version_publish(profile=drafted, note="candidate", release=False)
    running = RolloutPlan.objects.create(
        name="modem rollout", profile=drafted, candidate=candidate, stages=[10, 50, 100], status="running", stage=1
    )
    RolloutPlan.objects.create(name="old one", profile=drafted, candidate=candidate, status="completed", stage=3)

    page = editor_client.get(change_url(drafted)).content.decode()

    assert "Rollout plans" in page and "modem rollout" in page and "old one" in page
    assert "stage 2 of 3 (50 %)" in page and "completed: stage 4 of 4 (100 %)" in page
    assert f'href="/analytics/rollouts/{running.pk}/"' in page
    assert f'href="/admin/releases/rolloutplan/{running.pk}/change/"' in page
    assert editor_client.get(f"/analytics/rollouts/{running.pk}/").status_code == 200
