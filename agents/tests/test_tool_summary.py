"""A tool result told in a customer's language other than the tool's: its data, lists and statuses included."""

from __future__ import annotations

from agents.tool_summary import ROWS_SHOWN, result_summary
from mcp_servers.telecom.server import consultar_pagamentos

FLIGHTS = {
    "origin": "LIS",
    "destination": "CDG",
    "flights": [
        {"flight": "TP440", "departs": "08:05", "price": 129.0, "currency": "EUR"},
        {"flight": "AF1025", "departs": "11:40", "price": 142.5, "currency": "EUR"},
    ],
    "explanation": "Encontrei 2 voos de Lisboa para Paris amanhã, o mais barato custa 129 euros.",
}


def test_a_list_the_tool_found_is_told_row_by_row_when_its_sentence_is_in_another_language():
    for language in ("en", "es"):
        told = result_summary(FLIGHTS, language)

        assert told.splitlines() == [
            "origin: LIS; destination: CDG",
            "flights:",
            "- flight: TP440; departs: 08:05; price: 129.0; currency: EUR",
            "- flight: AF1025; departs: 11:40; price: 142.5; currency: EUR",
        ]


def test_a_payment_lookup_in_english_tells_each_payments_status_not_only_the_customers_fields():
    told = result_summary(consultar_pagamentos("5511999999999"), "en")

    assert "pagamento_id: PAG-7002" in told and "status: confirmado" in told
    assert "faturas_em_aberto:\n- invoice_id: INV001; valor_total: 289.9" in told
    assert "Fatura paga mais de uma vez" not in told  # a Portuguese sentence of the tool's is left out


def test_the_tools_own_sentence_tells_it_in_its_own_language():
    assert result_summary(FLIGHTS, "pt") == FLIGHTS["explanation"]
    assert result_summary(FLIGHTS) == FLIGHTS["explanation"]


def test_a_long_list_shows_its_first_rows_and_says_there_are_more():
    rows = [{"id": index} for index in range(ROWS_SHOWN + 5)]

    told = result_summary({"items": rows}, "en").splitlines()

    assert told[0] == "items:" and told[-1] == "- …" and len(told) == ROWS_SHOWN + 2
