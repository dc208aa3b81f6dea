"""What a played turn's answer is checked against (:func:`releases.evals.checks.turn_checked`): the answer's language
is that of its own words, not of what it quotes."""

from __future__ import annotations

from releases.evals.checks import Observed, turn_checked

# An English customer's answer from the demo's billing specialist, offline: its own words in English, the tool's
# Portuguese rows quoted.
ENGLISH_QUOTING_PORTUGUESE = (
    "Bills and payments (offline model): I checked our systems about your message.\n"
    "- consultar_fatura: “invoice_id: INV001; cliente: Ana Paula Ribeiro; plano: Controle 20GB; referencia: 2025-05; "
    "emissao: 2025-05-25; vencimento: 2025-06-10; valor_total: 289.9; status: em aberto\n"
    "itens:\n- tipo: plano; descricao: Plano Controle 20GB (mensalidade); valor: 149.9\n"
    "- tipo: dados_adicionais; descricao: Pacote adicional de internet 10GB; valor: 39.9”\n"
    "- consultar_pagamentos: “pagamentos:\n- pagamento_id: PAG-7002; data: 2025-05-10; valor: 149.9; "
    "forma: débito automático; invoice_id: INV000; status: confirmado”"
)
# The same tool's words, in a Portuguese answer of its own.
PORTUGUESE_QUOTING_ENGLISH = (
    "Faturas e pagamentos: consultei os sistemas sobre a sua mensagem e encontrei o que a operadora respondeu.\n"
    "- status_page: “All systems are operating normally and there is no incident in your region today.”"
)


def seen(answer: str) -> Observed:
    return Observed(answer=answer, agent="billing_agent", decision={}, state="")


def test_an_answer_in_the_customers_language_quoting_a_tools_portuguese_rows_reads_as_that_language():
    assert turn_checked({"answer_language": "en"}, seen(ENGLISH_QUOTING_PORTUGUESE)) == []
    assert turn_checked({}, seen(ENGLISH_QUOTING_PORTUGUESE), language="en") == []


def test_an_answer_whose_own_words_are_another_language_fails_whatever_it_quotes():
    (failure,) = turn_checked({"answer_language": "en"}, seen(PORTUGUESE_QUOTING_ENGLISH))
    assert (failure.key, failure.expected, failure.actual) == ("answer_language", "en", "pt")
    (failure,) = turn_checked({}, seen(PORTUGUESE_QUOTING_ENGLISH), language="en")
    assert (failure.actual, failure.note) == ("pt", "the test's language")


def test_an_answer_that_only_quotes_tells_no_language_and_fails_an_explicit_answer_language():
    (failure,) = turn_checked({"answer_language": "en"}, seen("“status: em aberto; valor: 149.9”"))
    assert failure.actual is None
