"""Saved routing tests: the runner's results, confusion matrix and precision/recall on the telecom
profile; which spec they run against; the publishing gate and its permission override."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError

from releases.models import RoutingTestCase
from releases.routing_tests import (
    Case,
    PublishForbidden,
    RoutingTestsFailed,
    routing_tests_run,
    routing_tests_spec,
)
from releases.versions import version_publish, version_revert
from routing.models import RoutingVersion
from routing.selectors import live_version
from tests.factories import StatePolicyFactory

FATURA = Case(
    name="fatura alta",
    message="Minha fatura veio alta",
    expect={"intent": "billing_invoice_explanation", "agent": "billing_agent", "method": "keyword"},
)
PEDIDO = Case(name="pedido", message="Cadê meu pedido?", expect={"intent": "retail_order_tracking"})
# Mislabelled on purpose: "plano" is a keyword of product_information.
PLANO = Case(name="plano", message="Quero mudar meu plano", expect={"intent": "support_request"})
DEFEITO = Case(name="defeito", message="O produto veio com defeito", expect={"intent": "product_information"})


def save(profile, case: Case, **extra) -> RoutingTestCase:
    return RoutingTestCase.objects.create(
        profile=profile,
        name=case.name,
        message=case.message,
        state=case.state,
        active_specialist=case.active_specialist,
        expect=dict(case.expect),
        **extra,
    )


def test_each_result_has_the_actual_decision_its_reason_and_the_expectations_it_missed(telecom):
    run = routing_tests_run(routing_tests_spec(telecom), [FATURA, PLANO])

    fatura, plano = run.results
    assert fatura.passed and fatura.failed == ()
    assert fatura.actual["intent"] == "billing_invoice_explanation"
    assert fatura.actual["agent"] == "billing_agent" and fatura.actual["method"] == "keyword"
    assert "fatura" in fatura.reason
    assert not plano.passed and plano.failed == ("intent",)
    assert plano.actual["intent"] == "product_information"
    assert plano.failure_text().startswith("plano: expected intent=support_request; got intent=product_information (")
    assert (run.total, run.passed, run.failed) == (2, 1, 1)


def test_the_run_gives_a_confusion_matrix_and_precision_and_recall_per_intent(telecom):
    run = routing_tests_run(routing_tests_spec(telecom), [FATURA, PEDIDO, PLANO, DEFEITO])

    assert run.confusion == {
        "billing_invoice_explanation": {"billing_invoice_explanation": 1},
        "product_information": {"product_information": 1},
        "retail_order_tracking": {"retail_order_tracking": 1},
        "support_request": {"product_information": 1},
    }
    product, support, billing = (
        run.scores["product_information"],
        run.scores["support_request"],
        run.scores["billing_invoice_explanation"],
    )
    assert (product.precision, product.recall, product.support) == (0.5, 1.0, 1)
    assert (support.precision, support.recall, support.support) == (None, 0.0, 1)
    assert (billing.precision, billing.recall) == (1.0, 1.0)


def test_the_run_does_not_touch_the_database(telecom, django_assert_num_queries):
    spec = routing_tests_spec(telecom)
    cases = [FATURA, PEDIDO, PLANO, DEFEITO] * 25

    with django_assert_num_queries(0):
        run = routing_tests_run(spec, cases)

    assert run.total == 100


def test_a_case_is_decided_in_its_state_with_its_active_specialist(telecom):
    billing = telecom.specialists.get(name="billing_agent")
    intent = telecom.intents.get(name="billing_invoice_explanation")
    StatePolicyFactory(profile=telecom, state="WAITING_PAYMENT_CONFIRMATION", specialist=billing, intent=intent)
    in_state = Case(
        name="sim no pagamento",
        message="sim",
        state="WAITING_PAYMENT_CONFIRMATION",
        active_specialist="billing_agent",
        expect={"agent": "billing_agent", "method": "state"},
    )
    without = Case(name="sim sem estado", message="sim", expect={"agent": "billing_agent"})

    run = routing_tests_run(routing_tests_spec(telecom), [in_state, without])

    assert run.results[0].passed, run.results[0].failure_text()
    assert not run.results[1].passed and run.results[1].actual["agent"] == "support_agent"


def test_tests_run_against_the_draft_the_live_version_or_version_n(telecom):
    version_publish(profile=telecom, note="first")
    telecom.intents.get(name="support_request").keywords.create(text="mudar meu plano")
    telecom.intents.filter(name="support_request").update(priority=5)
    fixed = Case(name="plano", message="Quero mudar meu plano", expect={"intent": "support_request"})

    assert routing_tests_run(routing_tests_spec(telecom, "draft"), [fixed]).passed == 1
    assert routing_tests_run(routing_tests_spec(telecom, "live"), [fixed]).failed == 1
    assert routing_tests_run(routing_tests_spec(telecom, 1), [fixed]).failed == 1
    assert (routing_tests_spec(telecom, "draft").version, routing_tests_spec(telecom, "live").version) == (None, 1)


def test_an_unknown_version_is_not_found(telecom):
    from common.errors import NotFound

    with pytest.raises(NotFound, match="no version 7"):
        routing_tests_spec(telecom, 7)


def test_a_saved_test_names_an_unknown_expectation(telecom):
    case = RoutingTestCase(profile=telecom, name="x", message="oi", expect={"intent": "a", "speciality": "b"})

    with pytest.raises(ValidationError) as caught:
        case.full_clean()

    assert "unknown key 'speciality'" in str(caught.value.message_dict["expect"])


def test_the_runner_reports_goal_decisions_as_the_engine_records_them():
    from conversations.goals.turn import GOAL_AGENT
    from releases.routing_tests import GOAL_AGENT as REPORTED

    assert REPORTED == GOAL_AGENT


# -- the gate ----------------------------------------------------------------------------------------------


def test_publishing_is_refused_while_a_saved_test_fails(telecom, admin_user):
    save(telecom, FATURA)
    save(telecom, PLANO)
    save(telecom, DEFEITO, enabled=False)

    with pytest.raises(RoutingTestsFailed) as caught:
        version_publish(profile=telecom, user=admin_user, note="first")

    assert caught.value.code == "routing_tests_failed" and caught.value.status_code == 409
    assert caught.value.message.startswith("1 of 2 routing tests of telecom_contas fail: plano: expected intent=")
    assert live_version(telecom) is None and not RoutingVersion.objects.exists()


def test_a_user_with_the_permission_publishes_anyway_and_the_reason_is_recorded(telecom, editor):
    editor.user_permissions.add(Permission.objects.get(codename="publish_failing_version"))
    save(telecom, FATURA)
    save(telecom, PLANO)

    version = version_publish(
        profile=telecom,
        user=type(editor).objects.get(pk=editor.pk),  # a fresh user: permissions are cached on the object
        note="first",
        forced_reason="plano is a product question now; the test is fixed next",
    )

    assert live_version(telecom) == version
    assert version.forced_reason == "plano is a product question now; the test is fixed next"
    assert version.test_summary["total"] == 2 and version.test_summary["failed"] == 1
    assert version.test_summary["forced"] is True
    assert version.test_summary["failures"][0].startswith("plano: expected intent=support_request")


def test_a_user_without_the_permission_cannot_publish_anyway(telecom, editor):
    save(telecom, PLANO)

    with pytest.raises(PublishForbidden) as caught:
        version_publish(profile=telecom, user=editor, note="first", forced_reason="I know better")

    assert caught.value.code == "permission_denied" and caught.value.status_code == 403
    assert live_version(telecom) is None


def test_passing_tests_are_recorded_with_the_version_and_no_reason_is_kept(telecom, admin_user):
    save(telecom, FATURA)

    version = version_publish(profile=telecom, user=admin_user, forced_reason="not needed")

    assert version.test_summary == {"total": 1, "passed": 1, "failed": 0, "failures": []}
    assert version.forced_reason == ""


def test_a_revert_is_not_refused_but_its_run_is_recorded(telecom):
    version_publish(profile=telecom, note="first")
    telecom.intents.get(name="support_request").keywords.create(text="mudar meu plano")
    telecom.intents.filter(name="support_request").update(priority=5)
    fixed = Case(name="plano", message="Quero mudar meu plano", expect={"intent": "support_request"})
    save(telecom, fixed)
    version_publish(profile=telecom, note="plano to support", based_on=1)

    reverted = version_revert(profile=telecom, to=1)

    assert reverted.number == 3 and live_version(telecom) == reverted
    assert reverted.test_summary["failed"] == 1 and reverted.forced_reason == ""


def test_a_case_may_expect_the_next_state_and_the_run_reads_as_json(telecom):
    import json

    from common.config_version import config_version_bump

    telecom.intents.filter(name="billing_invoice_explanation").update(next_state="WAITING_PAYMENT_CONFIRMATION")
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    case = Case(name="fatura", message="minha fatura", expect={"next_state": "WAITING_PAYMENT_CONFIRMATION"})
    wrong = Case(name="pedido", message="meu pedido", expect={"next_state": "WAITING_PAYMENT_CONFIRMATION"})

    run = routing_tests_run(routing_tests_spec(telecom), [case, wrong])

    shown = json.loads(json.dumps(run.as_dict()))
    assert [result["passed"] for result in shown["results"]] == [True, False]
    assert shown["results"][1]["failed"] == ["next_state"] and shown["results"][1]["actual"]["next_state"] == ""
    assert (shown["total"], shown["passed"], shown["failed"]) == (2, 1, 1)


def test_the_publish_command_publishes_over_failing_tests_only_for_a_permitted_user_with_a_reason(telecom, editor):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    save(telecom, PLANO)

    with pytest.raises(CommandError, match="1 of 1 routing tests of telecom_contas fail"):
        call_command("routing_publish", "--profile", "telecom_contas", "--note", "first")
    with pytest.raises(CommandError, match="permission"):
        call_command(
            "routing_publish", "--profile", "telecom_contas", "--user", editor.username, "--forced-reason", "because"
        )
    editor.user_permissions.add(Permission.objects.get(codename="publish_failing_version"))
    out = StringIO()

    call_command(
        "routing_publish",
        "--profile",
        "telecom_contas",
        "--note",
        "first",
        "--user",
        editor.username,
        "--forced-reason",
        "plano moves to product next week",
        stdout=out,
    )

    version = live_version(telecom)
    assert version.number == 1 and version.created_by == editor
    assert version.forced_reason == "plano moves to product next week"
    assert out.getvalue().strip().endswith("telecom_contas: version 1 published.")
