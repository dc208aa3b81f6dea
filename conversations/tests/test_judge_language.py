"""The judge's language check: the answer's own language against the message's (common.language)."""

from __future__ import annotations

import asyncio

import pytest

from conversations.judges import JudgeCase, RuleBasedJudge
from mcp_servers.telecom.server import consultar_fatura

ENGLISH_QUESTION = "My bill is too high this month, can you check it?"
SPANISH_QUESTION = "Mi factura llegó muy alta este mes, ¿puede revisarla?"


def language(answer: str, question: str, tools=()) -> tuple[str, dict]:
    result = asyncio.run(RuleBasedJudge().evaluate(JudgeCase(question=question, answer=answer, tool_results=tools)))
    return result.checks["language_matches"], result.details["language_matches"]


def test_a_portuguese_answer_that_echoes_an_english_question_fails():
    echo = (
        f'Faturas e pagamentos (modelo sem conexão): recebi sua mensagem. Você disse: "{ENGLISH_QUESTION}". '
        "Vou tratar disso como especialista."
    )

    assert language(echo, ENGLISH_QUESTION) == ("failed", {"user": "en", "answer": "pt"})


def test_an_echo_without_quotation_marks_fails_too():
    echo = f"Recebi sua mensagem: {SPANISH_QUESTION} Vou tratar disso como especialista."

    assert language(echo, SPANISH_QUESTION) == ("failed", {"user": "es", "answer": "pt"})


def test_an_answer_in_the_users_language_passes():
    english = (
        'Faturas e pagamentos (offline model): I received your message. You said: "My bill is too high this '
        'month, can you check it?". I will look into it as a specialist.'
    )
    spanish = "Su factura de este mes es de R$ 289,90 y vence el 10 de junio; la revisamos con gusto."

    assert language(english, ENGLISH_QUESTION) == ("passed", {"user": "en", "answer": "en"})
    assert language(spanish, SPANISH_QUESTION) == ("passed", {"user": "es", "answer": "es"})


def test_the_tool_results_portuguese_text_does_not_make_an_english_answer_portuguese():
    invoice = consultar_fatura("5511999999999", "INV001")
    call = {"tool": "consultar_fatura", "status": "ok", "arguments": {"msisdn": "5511999999999"}, "result": invoice}
    answer = f"Here is what I found about your bill: {invoice['resumo']} Status: {invoice['status']}."

    assert language(answer, ENGLISH_QUESTION, (call,)) == ("passed", {"user": "en", "answer": "en"})


def test_an_answer_that_is_only_the_echo_cannot_be_told():
    assert language(f'"{ENGLISH_QUESTION}"', ENGLISH_QUESTION)[0] == "not_applicable"


def test_a_bilingual_answer_with_a_sentence_of_its_own_in_the_users_language_passes():
    answer = "Sua fatura é de R$ 289,90 e vence agora. (Your invoice is R$ 289.90 and it is due now.)"

    assert language(answer, ENGLISH_QUESTION)[0] == "passed"


def test_a_message_whose_language_cannot_be_told_makes_the_check_not_applicable():
    assert language("Your invoice is R$ 289.90.", "P100?")[0] == "not_applicable"


# -- end to end: the gateway, the offline model and the judge ---------------------------------------------------


def send(api, text, *, context=None):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": "s-lang", "context": context or {}}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
def test_english_and_spanish_messages_get_answers_in_their_language_that_the_judge_passes(api, live_mcp):
    english = send(
        api,
        "Please check the boleto for my line, the amount looks wrong this month.",
        context={"msisdn": "5511999999999", "invoice_id": "INV001"},
    )
    spanish = send(api, "Mi internet está muy lento desde ayer, ¿qué puedo hacer?")

    assert english["metadata"]["mcp_tools"] == ["consultar_fatura", "consultar_pagamentos"]
    assert "I checked our systems about your message." in english["answer"]
    assert "valor_total: 289.9" in english["answer"]
    assert "recibí su mensaje." in spanish["answer"] and "Me ocuparé de ello como especialista." in spanish["answer"]
    for body, language in ((english, "en"), (spanish, "es")):
        judge = body["metadata"]["judges"]["rule_based"]
        assert judge["checks"]["language_matches"] == "passed"
        assert judge["details"]["language_matches"] == {"user": language, "answer": language}
        assert body["metadata"]["review"]["action"] == "accept"
