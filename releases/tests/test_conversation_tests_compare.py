"""Draft against live, side by side: the same conversation tests played against both versions, per test both results
and, where an answer changed, both answers — by the function and by ``run_conversation_tests --compare``."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from releases.evals import conversation_tests_load, conversation_tests_parse
from releases.evals.compare import NOW_FAILS, STILL_PASSES, conversation_tests_compare
from releases.routing_tests import DRAFT, LIVE, routing_tests_spec
from releases.versions import version_publish
from routing.models import Keyword

pytestmark = pytest.mark.django_db

SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: an invoice question goes to billing
    language: pt
    context: {msisdn: "5511999999999"}
    tool_answers: {consultar_fatura: {valor_total: "R$ 289,90"}, consultar_pagamentos: {pagamentos: []}}
    turns:
      - user: minha fatura veio alta este mês
        expect: {agent: billing_agent}
  - name: an order question goes to orders
    turns:
      - user: cadê meu pedido?
        expect: {agent: orders_agent}
"""


@pytest.fixture
def moved(telecom):
    """Live: version 1. The draft sends invoice questions to the orders specialist."""
    conversation_tests_load(profile=telecom, cases=conversation_tests_parse(SUITE)[1])
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="fatura")
    Keyword.objects.filter(intent__name="billing_invoice_explanation", text="fatura").delete()
    return telecom


def test_each_test_has_both_results_and_a_changed_answer_shows_both_answers(moved):
    cases = conversation_tests_parse(SUITE)[1]

    compared = conversation_tests_compare(routing_tests_spec(moved, LIVE), routing_tests_spec(moved, DRAFT), cases)

    invoice, order = compared.tests
    assert (invoice.outcome, order.outcome) == (NOW_FAILS, STILL_PASSES)
    assert compared.changed == [invoice]
    (answer,) = invoice.answers
    assert (answer.number, answer.user) == (1, "minha fatura veio alta este mês")
    assert (answer.before_agent, answer.after_agent) == ("billing_agent", "orders_agent")
    assert answer.before == invoice.before.shown.turns[0].seen.answer != answer.after
    assert answer.after == invoice.after.shown.turns[0].seen.answer
    shown = compared.as_dict()
    assert (shown["total"], shown["changed"], shown["now_failing"]) == (2, 1, 1)
    assert shown["tests"][0]["after"]["failures"] == [
        "turn 1 of 1 (“minha fatura veio alta este mês”): agent: expected 'billing_agent', got 'orders_agent'"
    ]


def test_the_command_compares_live_and_draft_and_exits_1_when_the_draft_fails(moved):
    out = StringIO()

    with pytest.raises(SystemExit) as exited:
        call_command("run_conversation_tests", "--profile", "telecom_contas", "--compare", "live", stdout=out)

    assert exited.value.code == 1
    lines = out.getvalue().splitlines()
    assert lines[:2] == [
        "CHANGED an invoice question goes to billing: live passed, draft failed (now fails)",
        "  turn 1 (“minha fatura veio alta este mês”):",
    ]
    assert lines[2].startswith("    live (billing_agent): ")
    sides = [line for line in lines if line.startswith("    ") and line[4] != " "]  # later lines: indented further
    assert [side.split(":")[0] for side in sides] == ["    live (billing_agent)", "    draft (orders_agent)"]
    assert "live → draft: 1 of 2 tests changed, 1 now fail" in lines
    assert lines[-2:][0] == "1 passed, 1 failed" and lines[-1].startswith("Coverage: intents: ")
