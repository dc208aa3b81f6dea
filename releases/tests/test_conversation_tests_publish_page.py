"""The admin's publish page and the conversation tests: on request it plays them against the live version and the
draft and shows, for each test whose answer changed, both answers; a publish a required test refuses says the failed
check; a failing test that is not required is said as a warning after the publish."""

from __future__ import annotations

import pytest

from releases.evals import conversation_tests_load, conversation_tests_parse
from releases.versions import version_publish
from routing.models import Keyword
from routing.selectors import live_version
from tests.adminkit import visible_text

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]  # an editor's admin page, on the embedded database too

SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: an invoice question goes to billing
    required: {required}
    tool_answers: {{consultar_fatura: {{valor_total: "R$ 289,90"}}, consultar_pagamentos: {{pagamentos: []}}}}
    turns:
      - user: minha fatura veio alta este mês
        expect: {{agent: billing_agent}}
  - name: an order question goes to orders
    turns:
      - user: cadê meu pedido?
        expect: {{agent: orders_agent}}
"""
FAILED = "turn 1 of 1 (“minha fatura veio alta este mês”): agent: expected 'billing_agent', got 'orders_agent'"


def moved(profile, *, required: bool = True) -> None:
    """Live: version 1; the draft sends invoice questions to the orders specialist."""
    version_publish(profile=profile, note="first")
    text = SUITE.format(required=str(required).lower())
    conversation_tests_load(profile=profile, cases=conversation_tests_parse(text)[1])
    Keyword.objects.create(intent=profile.intents.get(name="retail_order_tracking"), text="fatura")
    Keyword.objects.filter(intent__name="billing_invoice_explanation", text="fatura").delete()


def publish_url(profile) -> str:
    return f"/admin/agents/agentprofile/{profile.pk}/publish/"


def test_the_page_plays_the_tests_when_asked_and_shows_both_answers_of_a_changed_one(admin_client, telecom):
    moved(telecom)

    first = admin_client.get(publish_url(telecom)).content.decode()
    asked = admin_client.get(publish_url(telecom) + "?answers=1")

    assert 'id="answers-compare"' in first and 'id="answers-compared"' not in first  # nothing played on a view
    compared = asked.context["answers"]
    (changed,) = compared["shown"]
    (turn,) = changed["answers_changed"]
    page = visible_text(asked.content.decode())
    assert "1 of 2 conversation tests changed; 1 now fails against the draft." in page
    assert f"an invoice question goes to billing (required): now fails {FAILED}" in page
    assert f"1. minha fatura veio alta este mês billing_agent : {visible_text(turn['before']['answer'])}" in page
    assert f"orders_agent : {visible_text(turn['after']['answer'])}" in page
    assert turn["before"]["answer"] != turn["after"]["answer"]
    assert "an order question goes to orders" not in page  # unchanged: not listed


def test_a_publish_refused_by_a_required_test_says_the_failed_check(admin_client, telecom):
    moved(telecom)

    response = admin_client.post(publish_url(telecom), {"based_on": 1, "note": "fatura", "_now": "1"}, follow=True)

    said = [str(message) for message in response.context["messages"]]
    assert said == [
        "1 of 2 required conversation tests of telecom_contas fail: conversation test 'an invoice question goes to "
        f"billing', {FAILED}. Fix the draft, or publish anyway with a written reason (it takes the permission to "
        "publish failing versions)."
    ]
    assert live_version(telecom).number == 1


def test_a_failing_test_that_is_not_required_is_said_as_a_warning_after_the_publish(admin_client, telecom):
    moved(telecom, required=False)

    response = admin_client.post(publish_url(telecom), {"based_on": 1, "note": "fatura", "_now": "1"}, follow=True)

    said = [str(message) for message in response.context["messages"]]
    assert said[1] == f"Not required, and failing: conversation test 'an invoice question goes to billing', {FAILED}"
    assert live_version(telecom).number == 2
