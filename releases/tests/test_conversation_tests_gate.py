"""The release gate on answers: a failing required conversation test refuses a publish on every path (the publish, a
request for a second person, a staged rollout's candidate), naming the failed check; a reason from a user who may
publish failing versions lets it through; a failing test that is not required only warns. A rollout stage is held
while a required test fails against its candidate."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from releases.approvals import draft_rollout, publish_request
from releases.evals import conversation_tests_load, conversation_tests_parse
from releases.evals.gate import SUMMARY_KEY, ConversationTestsFailed, gate_warnings
from releases.models import ReleaseRequest, RolloutDecisionAction, RolloutPlan
from releases.rollout.guard import TESTS_HOLD, plan_evaluate, plan_start
from releases.routing_tests import PublishForbidden
from releases.versions import version_publish
from routing.models import Keyword, RoutingVersion
from routing.selectors import live_version

pytestmark = pytest.mark.django_db

SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: fatura
    required: {required}
    language: pt
    context: {{msisdn: "5511999999999"}}
    tool_answers:
      consultar_fatura: {{valor_total: "R$ 289,90"}}
      consultar_pagamentos: {{pagamentos: []}}
    turns:
      - user: minha fatura veio alta este mês
        expect:
          agent: billing_agent
          answer_contains: ["289,90"]
          answer_language: {language}
"""
WRONG_LANGUAGE = (
    "conversation test 'fatura', turn 1 of 1 (“minha fatura veio alta este mês”): answer_language: expected 'en', "
    "got 'pt'"
)


def saved(profile, *, required: bool = True, language: str = "pt") -> None:
    text = SUITE.format(required=str(required).lower(), language=language)
    conversation_tests_load(profile=profile, cases=conversation_tests_parse(text)[1])


def fresh(user):
    return type(user).objects.get(pk=user.pk)  # permissions are cached on the object


def test_a_failing_required_test_refuses_the_publish_and_names_the_failed_check(telecom, admin_user):
    saved(telecom, language="en")

    with pytest.raises(ConversationTestsFailed) as caught:
        version_publish(profile=telecom, user=admin_user, note="first")

    assert caught.value.status_code == 409 and caught.value.code == "conversation_tests_failed"
    said = caught.value.message
    assert said.startswith(f"1 of 1 required conversation tests of telecom_contas fail: {WRONG_LANGUAGE}")
    assert live_version(telecom) is None and not RoutingVersion.objects.exists()


def test_a_draft_that_sends_the_answer_to_another_specialist_is_refused_where_live_passed(telecom):
    saved(telecom)
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="fatura")
    Keyword.objects.filter(intent__name="billing_invoice_explanation", text="fatura").delete()

    with pytest.raises(ConversationTestsFailed) as caught:
        version_publish(profile=telecom, note="fatura to orders", based_on=1)

    assert "agent: expected 'billing_agent', got 'orders_agent'" in caught.value.message
    assert live_version(telecom).number == 1


def test_passing_tests_are_kept_with_the_version(telecom):
    saved(telecom)

    version = version_publish(profile=telecom, note="first")

    assert version.test_summary[SUMMARY_KEY] == {
        "total": 1,
        "passed": 1,
        "failed": 0,
        "required_failed": 0,
        "failures": [],
        "warnings": [],
    }


def test_a_failing_test_that_is_not_required_warns_and_publishes(telecom):
    saved(telecom, required=False, language="en")

    version = version_publish(profile=telecom, note="first")

    assert live_version(telecom) == version and version.forced_reason == ""
    assert gate_warnings(version.test_summary) == [WRONG_LANGUAGE]


def test_a_user_with_the_permission_publishes_anyway_and_the_reason_is_kept(telecom, editor):
    editor.user_permissions.add(Permission.objects.get(codename="publish_failing_version"))
    saved(telecom, language="en")

    version = version_publish(profile=telecom, user=fresh(editor), note="first", forced_reason="English comes next")

    assert version.forced_reason == "English comes next"
    assert version.test_summary[SUMMARY_KEY]["forced"] is True
    assert version.test_summary[SUMMARY_KEY]["failures"] == [WRONG_LANGUAGE]


def test_a_user_without_the_permission_may_not_give_a_reason(telecom, editor):
    saved(telecom, language="en")

    with pytest.raises(PublishForbidden):
        version_publish(profile=telecom, user=editor, note="first", forced_reason="I know better")

    assert live_version(telecom) is None


def test_a_request_for_a_second_person_is_refused_as_the_publish_is(guarded, editor):
    saved(guarded, language="en")

    with pytest.raises(ConversationTestsFailed, match="answer_language: expected 'en', got 'pt'"):
        publish_request(profile=guarded, user=editor, note="modem")

    assert not ReleaseRequest.objects.exists()


def test_a_staged_rollouts_candidate_is_refused_as_the_publish_is(telecom, admin_user):
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="modem")
    saved(telecom, language="en")

    with pytest.raises(ConversationTestsFailed, match="conversation test 'fatura'"):
        draft_rollout(profile=telecom, user=admin_user, settings={"stages": [10, 100]}, note="modem")

    assert RoutingVersion.objects.count() == 1 and not RolloutPlan.objects.exists()


# -- a rollout stage ---------------------------------------------------------------------------------------------


def started_plan(profile, *, hold_minutes: int = 0) -> RolloutPlan:
    """A candidate made while its tests passed, its plan running: every guard clear at once (no hold, no sample)."""
    version_publish(profile=profile, note="first")
    Keyword.objects.create(intent=profile.intents.get(name="retail_order_tracking"), text="modem")
    candidate = version_publish(profile=profile, note="modem", release=False)
    plan = RolloutPlan.objects.create(
        name="modem",
        profile=profile,
        candidate=candidate,
        stages=[20, 100],
        hold_minutes=hold_minutes,
        min_conversations=0,
    )
    plan_start(plan, actor="test")
    return plan


def test_a_required_test_failing_against_the_candidate_holds_the_stage_until_it_passes(telecom):
    plan = started_plan(telecom)
    saved(telecom, language="en")  # added while the plan runs: the candidate fails it

    held = plan_evaluate(plan, actor="test")

    assert held.action == RolloutDecisionAction.HOLD and held.stage == 0
    assert held.reason == TESTS_HOLD + WRONG_LANGUAGE
    assert held.figures["conversation_tests"] == [WRONG_LANGUAGE]
    saved(telecom, language="pt")

    assert plan_evaluate(plan, actor="test").action == RolloutDecisionAction.ADVANCE


def test_a_failing_test_that_is_not_required_does_not_hold_a_stage(telecom):
    plan = started_plan(telecom)
    saved(telecom, required=False, language="en")

    assert plan_evaluate(plan, actor="test").action == RolloutDecisionAction.ADVANCE


def test_a_stage_that_could_not_advance_anyway_plays_no_test(telecom, django_assert_max_num_queries):
    plan = started_plan(telecom, hold_minutes=60)
    saved(telecom, language="en")

    with django_assert_max_num_queries(30):  # a test played writes a conversation: far more
        decision = plan_evaluate(plan, actor="test")

    assert decision.action == RolloutDecisionAction.HOLD and "held 0 of 60 minutes" in decision.reason
