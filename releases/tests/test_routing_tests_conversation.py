"""Saved routing tests that are short conversations: the runner plays the earlier turns in order through the
conversation stack, carrying the frames, the state and the active specialist and intent from one to the next as the
chat does, checks every turn's expectations, and fails the case at the turn that missed. Single-message cases are
decided as before."""

from __future__ import annotations

import json

import pytest

from common.config_version import config_version_bump
from releases.models import RoutingTestCase
from releases.routing_tests import Case, CaseTurn, RoutingTestsFailed, routing_tests_run, routing_tests_spec
from releases.versions import version_publish
from routing.expectations import ROUTING_TEST_EXPECT_KEYS, routing_test_expect_errors
from routing.selectors import live_version
from tests.factories import IntentFactory, StatePolicyFactory

FLOW = "WAITING_PAYMENT_CONFIRMATION"
CONFIRMATION = "billing_payment_confirmation"
# The flow: a bill question sets the state, and the state's policy takes the customer's short reply.
OPEN = CaseTurn("Minha fatura veio alta", {"intent": "billing_invoice_explanation", "state_after": FLOW})
SIDE = CaseTurn("antes disso, cadê meu pedido?", {"intent": "retail_order_tracking", "events": ["pushed", "resumed"]})


@pytest.fixture
def flow(telecom):
    """telecom_contas with a flow: the bill's explanation waits for a confirmation, which its state policy gives to
    an intent that sets no state."""
    invoice = telecom.intents.get(name="billing_invoice_explanation")
    telecom.intents.filter(pk=invoice.pk).update(next_state=FLOW)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    confirmation = IntentFactory(profile=telecom, name=CONFIRMATION, specialist=invoice.specialist, priority=50)
    StatePolicyFactory(profile=telecom, state=FLOW, specialist=invoice.specialist, intent=confirmation)
    return telecom


def conversation(name: str, *turns: CaseTurn, message: str, **expect) -> Case:
    return Case(name=name, message=message, expect=expect, turns=turns)


def test_a_side_question_inside_the_flow_is_answered_and_the_reply_after_it_is_bound_to_the_flow(flow):
    case = conversation(
        "pergunta no meio do fluxo",
        OPEN,
        SIDE,
        message="sim",
        intent=CONFIRMATION,
        method="state",
        events=["bound", "closed"],
        state_after="",
    )

    result = routing_tests_run(routing_tests_spec(flow), [case]).results[0]

    assert result.passed, result.failure_text()
    opened, side = result.turns
    assert opened.actual["events"] == ["opened"] and opened.actual["state_after"] == FLOW
    # The side question went elsewhere and the flow still waits: the state is carried to the reply.
    assert side.actual["agent"] == "orders_agent" and side.actual["state_after"] == FLOW
    assert result.actual["agent"] == "billing_agent"


def test_the_reply_without_the_earlier_turns_is_not_the_flows(flow):
    """What the earlier turns carry is what decides: the same message alone reaches no flow."""
    alone = Case(name="sim sozinho", message="sim", expect={"method": "state"})

    result = routing_tests_run(routing_tests_spec(flow), [alone]).results[0]

    assert not result.passed and result.actual["method"] == "fallback"


def test_a_conversation_fails_at_the_turn_that_missed_and_says_which(flow):
    wrong = CaseTurn("antes disso, cadê meu pedido?", {"intent": "billing_invoice_explanation"})
    case = conversation("lado errado", OPEN, wrong, message="sim", method="state")

    run = routing_tests_run(routing_tests_spec(flow), [case])

    result = run.results[0]
    assert not result.passed and run.failed == 1
    assert result.failing_turn == 2
    assert [turn.passed for turn in result.turns] == [True, False] and result.failed == ()  # the last one held
    assert result.failure_text().startswith(
        "lado errado: turn 2 of 3 (“antes disso, cadê meu pedido?”): expected intent=billing_invoice_explanation; "
        "got intent=retail_order_tracking ("
    )
    assert run.summary()["failures"] == [result.failure_text()]


def test_a_conversation_whose_own_message_misses_names_its_last_turn(flow):
    case = conversation("estado errado", OPEN, message="sim", state_after=FLOW)

    result = routing_tests_run(routing_tests_spec(flow), [case]).results[0]

    assert result.failing_turn == 2
    assert result.failure_text().startswith("estado errado: expected state_after=" + FLOW + "; got state_after=(none)")


def test_a_cancel_ends_the_flow_and_its_state(flow):
    case = conversation(
        "cancelar", OPEN, message="deixa pra lá", method="repair", repair="cancel", events=["cancelled"], state_after=""
    )

    result = routing_tests_run(routing_tests_spec(flow), [case]).results[0]

    assert result.passed, result.failure_text()


def test_small_talk_inside_the_flow_pushes_nothing_and_the_flow_still_waits(flow):
    thanks = CaseTurn("obrigado!", {"method": "small_talk", "state_after": FLOW})
    case = conversation("obrigado no meio", OPEN, thanks, message="sim", method="state")

    result = routing_tests_run(routing_tests_spec(flow), [case]).results[0]

    assert result.passed, result.failure_text()
    assert result.turns[1].actual["events"] == []


def test_a_correction_redoes_the_step_the_previous_turn_routed(flow):
    """The active intent is carried: the correction re-runs it."""
    pedido = CaseTurn("Onde está o meu pedido P100?", {"intent": "retail_order_tracking"})
    case = conversation(
        "correção",
        pedido,
        message="desculpa, digitei errado, o pedido é o P200",
        intent="retail_order_tracking",
        method="repair",
        repair="correct",
    )

    result = routing_tests_run(routing_tests_spec(flow), [case]).results[0]

    assert result.passed, result.failure_text()


def test_a_single_message_expecting_its_topics_is_read_by_the_stack(flow):
    case = Case(
        name="dois pedidos",
        message="minha fatura veio alta e meu pedido atrasou",
        expect={"topics": ["billing_invoice_explanation", "retail_order_tracking"]},
    )
    missing = Case(name="um só", message="minha fatura veio alta", expect={"topics": ["retail_order_tracking"]})

    first, second = routing_tests_run(routing_tests_spec(flow), [case, missing]).results

    assert first.passed, first.failure_text()
    assert not second.passed and second.failed == ("topics",) and second.turns == ()
    assert second.failure_text().startswith("um só: expected topics=[retail_order_tracking]; got topics=[] (")


def test_a_single_message_case_is_decided_as_before(flow):
    """No earlier turns and nothing only the stack shows: the engine's decision for the message, in the case's state,
    with the same keys as ever, and the language it is answered in."""
    case = Case(name="sim no pagamento", message="sim", state=FLOW, expect={"method": "state"})

    result = routing_tests_run(routing_tests_spec(flow), [case]).results[0]

    assert result.passed and set(result.actual) == {*ROUTING_TEST_EXPECT_KEYS, "language"}
    assert "turns" not in result.as_dict()


def test_conversations_run_without_the_database_and_read_as_json(flow, django_assert_num_queries):
    spec = routing_tests_spec(flow)
    cases = [conversation(f"c{n}", OPEN, SIDE, message="sim", method="state") for n in range(20)]

    with django_assert_num_queries(0):
        run = routing_tests_run(spec, cases)

    assert run.passed == 20
    shown = json.loads(json.dumps(run.as_dict()))["results"][0]
    assert [turn["turn"] for turn in shown["turns"]] == [1, 2] and shown["failing_turn"] is None
    assert shown["turns"][1]["actual"]["events"] == ["pushed", "resumed"]


def test_a_saved_conversation_gates_publishing(flow, admin_user):
    RoutingTestCase.objects.create(
        profile=flow,
        name="lado errado",
        message="sim",
        turns=[{"message": OPEN.message}, {"message": SIDE.message, "expect": {"intent": "product_information"}}],
        expect={"method": "state"},
    )

    with pytest.raises(RoutingTestsFailed) as caught:
        version_publish(profile=flow, user=admin_user, note="first")

    assert "lado errado: turn 2 of 3" in caught.value.message
    assert live_version(flow) is None


def test_a_conversation_found_in_a_state_has_its_flow_open(flow):
    """A test that starts in a state, as a single message expecting what the stack shows: the flow the intent setting
    that state opened waits, and a side question pushes it and resumes it."""
    case = Case(
        name="no meio do pagamento",
        message="antes disso, cadê meu pedido?",
        state=FLOW,
        expect={"intent": "retail_order_tracking", "events": ["pushed", "resumed"], "state_after": FLOW},
    )

    result = routing_tests_run(routing_tests_spec(flow), [case]).results[0]

    assert result.passed, result.failure_text()


def test_a_test_expecting_a_language_fails_when_the_message_would_be_answered_in_another(flow):
    english = Case(name="english bill", message="my bill came in way too high this month", expect={"language": "en"})
    portuguese = Case(name="conta alta", message="minha fatura veio alta demais este mês", expect={"language": "en"})

    passed, failed = routing_tests_run(routing_tests_spec(flow), [english, portuguese]).results

    assert passed.passed and passed.actual["language"] == "en"
    assert not failed.passed and failed.failed == ("language",) and failed.actual["language"] == "pt"
    assert "expected language=en; got" in failed.failure_text()


def test_a_conversation_keeps_its_language_for_a_reply_that_tells_none(flow):
    # "ok" tells no language: the conversation's, read from its first message, answers it.
    case = conversation(
        "english reply",
        CaseTurn("my bill came in way too high this month", {"language": "en"}),
        message="ok",
        language="en",
    )

    result = routing_tests_run(routing_tests_spec(flow), [case]).results[0]

    assert result.passed, result.failure_text()


def test_an_expected_language_the_platform_does_not_speak_is_refused_by_name():
    assert routing_test_expect_errors({"language": "fr"}) == ["language: must be one of: pt, es, en."]
