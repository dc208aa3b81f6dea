"""Conversation tests played against a version: the real turn, each test isolated (nothing of it stays in the
conversation store, the handoffs, the usage rows or the tenants; a plan's steps run here, never on workers), tools
answered from what the test recorded, and every failed check named with what was expected and what came."""

from __future__ import annotations

import pytest

from agents.models import ModelCallUsage
from conversations.memory.facts import facts_of
from conversations.models import Conversation, Escalation, Message, RouteDecisionRecord, ToolCall
from handoffs.models import Handoff
from releases.evals import conversation_tests_parse, run
from releases.evals.run import conversation_tests_run
from releases.routing_tests import DRAFT, LIVE, routing_tests_spec
from releases.versions import version_publish
from routing.models import Keyword
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: a high invoice is explained with the invoice
    language: pt
    context: {msisdn: "5511999999999"}
    tool_answers:
      consultar_fatura: {valor_total: "R$ 289,90", vencimento: "2025-06-10"}
      consultar_pagamentos: {pagamentos: []}
    turns:
      - user: minha fatura veio alta este mês
        expect:
          agent: billing_agent
          intent: billing_invoice_explanation
          tools_called: {consultar_fatura: {msisdn: "5511999999999"}}
          answer_contains: ["289,90"]
          answer_not_contains: ["Subject:"]
          answer_language: pt
      - user: obrigado, era isso
        expect: {no_state: true}
  - name: two requests in one message are both answered
    context: {msisdn: "5511999999999", order_id: P100}
    tool_answers:
      consultar_fatura: {valor_total: "R$ 289,90"}
      consultar_pagamentos: {pagamentos: []}
      consultar_pedido: {status: "em trânsito"}
      consultar_entrega: {previsao: "2025-06-12"}
    turns:
      - user: Minha fatura veio alta e cadê meu pedido P100?
        expect:
          intent: multi_intent
          topics: [billing_invoice_explanation, retail_order_tracking]
          tools_called: [consultar_fatura, consultar_pedido]
          answer_contains: ["289,90", "em trânsito"]
"""

STORE = (Conversation, Message, RouteDecisionRecord, ToolCall, Escalation, Handoff, ModelCallUsage, Tenant)


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in STORE}


def cases(text: str = SUITE):
    return conversation_tests_parse(text, name="suite.yaml")[1]


def test_tests_that_pass_leave_nothing_behind_and_their_plan_runs_here_not_on_workers(telecom, settings):
    # A broker is configured in the suite: a plan would go to Celery workers, which no rollback reaches (and none runs).
    settings.SUPERVISOR_EXECUTOR = "celery"
    settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = 2.0
    before = counts()

    run = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases())

    assert [result.failure_lines() for result in run.results] == [[], []]
    assert run.passed == 2
    (plan,) = run.results[1].attempts[0].turns
    assert [move["kind"] for move in plan.seen.handoffs] == ["supervisor_fanout", "supervisor_fanout"]
    assert counts() == before


def test_a_recorded_answer_is_the_tools_and_the_call_keeps_the_arguments_it_was_made_with(telecom):
    run = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases()[:1])

    first = run.results[0].attempts[0].turns[0].seen
    assert {"tool": "consultar_fatura", "arguments": {"msisdn": "5511999999999"}, "status": "ok", "recorded": True} in (
        first.tools
    )
    assert "289,90" in first.answer


def test_every_failed_check_is_named_with_what_was_expected_and_what_came(telecom):
    broken = SUITE.replace('answer_contains: ["289,90"]', 'answer_contains: ["389,90"]')
    broken = broken.replace("answer_language: pt", "answer_language: en")
    broken = broken.replace(
        'tools_called: {consultar_fatura: {msisdn: "5511999999999"}}', "tools_called: [abrir_chamado]"
    )

    (result, _) = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases(broken)).results

    assert not result.passed
    lines = result.failure_lines()
    assert lines[0].startswith(
        'turn 1 of 2 (“minha fatura veio alta este mês”): tools_called: expected ["abrir_chamado"]'
    )
    assert lines[0].endswith("(not called: abrir_chamado)")
    assert lines[1].startswith('turn 1 of 2 (“minha fatura veio alta este mês”): answer_contains: expected ["389,90"]')
    assert lines[2] == "turn 1 of 2 (“minha fatura veio alta este mês”): answer_language: expected 'en', got 'pt'"
    assert len(lines) == 3


def test_the_tests_language_is_checked_on_every_answer_unless_a_turn_names_another(telecom):
    spanish = SUITE.replace("    language: pt\n", "    language: es\n").replace("          answer_language: pt\n", "")

    (result, _) = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases(spanish)).results

    assert "answer_language: expected 'es', got 'pt' (the test's language)" in result.failure_lines()[0]


def test_the_draft_and_the_live_version_each_answer_as_they_route(telecom):
    version_publish(profile=telecom, note="first")
    moved = telecom.intents.get(name="retail_order_tracking")
    Keyword.objects.create(intent=moved, text="fatura")  # the draft: "fatura" ties, and orders wins nothing by it
    Keyword.objects.filter(intent__name="billing_invoice_explanation", text="fatura").delete()
    suite = cases()[:1]

    live = conversation_tests_run(routing_tests_spec(telecom, LIVE), suite)
    draft = conversation_tests_run(routing_tests_spec(telecom, DRAFT), suite)

    assert live.passed == 1
    assert draft.failed == 1
    assert "agent: expected 'billing_agent', got 'orders_agent'" in draft.results[0].failure_lines()[0]


def test_a_test_under_a_named_tenant_leaves_that_tenant_as_it_was(telecom, tenant):
    before = counts()

    run = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases()[:1], tenant=tenant)

    assert run.passed == 1
    assert counts() == before


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_tests_play_at_once_on_their_own_connections_and_come_back_in_order(telecom):
    suite = cases() * 3
    before = counts()

    run = conversation_tests_run(routing_tests_spec(telecom, DRAFT), suite)

    assert [result.case.name for result in run.results] == [case.name for case in suite]
    assert run.passed == 6
    assert counts() == before


SAME_CUSTOMER = """\
profile: telecom_contas
conversation_tests:
  - name: a fact told is recalled within its test
    language: pt
    user: cliente-repetido
    turns:
      - user: lembre que eu prefiro ser atendido por e-mail
      - user: o que você sabe sobre mim?
        expect: {answer_contains: ["e-mail"]}
  - name: the same customer in the next test is told nothing of it
    language: pt
    user: cliente-repetido
    turns:
      - user: o que você sabe sobre mim?
        expect: {answer_not_contains: ["e-mail"]}
"""


def test_two_tests_of_the_same_customer_do_not_see_each_others_facts(telecom):
    run = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases(SAME_CUSTOMER))

    assert [result.failure_lines() for result in run.results] == [[], []]


def test_under_a_named_tenant_a_fact_a_test_told_reaches_no_later_test_nor_the_tenants_customer(telecom, tenant):
    # The customer's facts are cached by tenant and user: a test's fact, read back inside its transaction, must not
    # be cached for the real tenant, where the next test (and the customer, for minutes) would read it.
    suite = cases(SAME_CUSTOMER)

    run = conversation_tests_run(routing_tests_spec(telecom, DRAFT), suite, tenant=tenant)

    assert [result.failure_lines() for result in run.results] == [[], []]
    assert facts_of(tenant_id=tenant.pk, user_id="cliente-repetido") == ()


def test_a_turns_state_is_what_the_turn_says_it_stored_not_read_again(telecom, monkeypatch):
    read: list[int | None] = []
    monkeypatch.setattr(run, "_state_after", lambda conversation_pk: read.append(conversation_pk) or "")

    results = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases()).results

    assert all(result.passed for result in results) and read == []
