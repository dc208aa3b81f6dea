"""The judge's language check: the answer's own language against the message's (common.language)."""

from __future__ import annotations

import asyncio

import pytest

from common.language import detect_language
from conversations import judges
from conversations.judges import JudgeCase, JudgeResult, RuleBasedJudge
from mcp_servers.telecom.server import consultar_fatura

ENGLISH_QUESTION = "My bill is too high this month, can you check it?"
SPANISH_QUESTION = "Mi factura llegó muy alta este mes, ¿puede revisarla?"
PORTUGUESE_QUESTION = "Minha fatura veio alta. Pode consultar?"
PORTUGUESE_BODY = (
    "Sua fatura de maio ficou em R$ 289,90 porque incluiu a cobrança proporcional do novo plano. "
    "O vencimento é no dia 10 de junho e o pagamento pode ser feito pelo aplicativo ou no banco. "
    "Se você não reconhece algum item, posso abrir uma contestação agora mesmo. "
)


def language(answer: str, question: str, tools=()) -> tuple[str, dict]:
    result = asyncio.run(RuleBasedJudge().evaluate(JudgeCase(question=question, answer=answer, tool_results=tools)))
    return result.checks["language_matches"], result.details["language_matches"]


def judged(answer: str) -> JudgeResult:
    return asyncio.run(RuleBasedJudge().evaluate(JudgeCase(question=PORTUGUESE_QUESTION, answer=answer)))


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


@pytest.fixture
def read(monkeypatch) -> list[str]:
    """The texts the judge asks the language of, in order."""
    texts: list[str] = []

    def counted(text: str) -> str | None:
        texts.append(text)
        return detect_language(text)

    monkeypatch.setattr(judges, "detect_language", counted)
    return texts


def test_a_long_answer_in_the_users_language_is_read_from_its_opening_alone(read):
    """A reading costs its text's length: the judge reads an answer's opening, not its thousands of characters."""
    result = judged(PORTUGUESE_BODY * 10)

    assert result.checks["language_matches"] == "passed"
    assert result.details["language_matches"] == {"user": "pt", "answer": "pt"}
    assert read[0] == PORTUGUESE_QUESTION and len(read) == 2 and len(read[1]) <= judges.LANGUAGE_OPENING_CHARS


def test_a_long_answer_whose_opening_is_in_another_language_is_read_whole(read):
    """Where the opening does not settle it, the whole answer decides, as a short one's does."""
    opening = "Thanks for waiting, I looked at everything on your account this morning and here is what I found. "
    mostly_portuguese = judged(opening + PORTUGUESE_BODY * 4)
    answers_read = [len(text) > judges.LANGUAGE_OPENING_CHARS for text in read[1:]]
    read.clear()
    english = judged(opening * 3 + "Your May invoice is due on June 10 and you can pay it in the app or at a bank.")

    assert mostly_portuguese.details["language_matches"] == {"user": "pt", "answer": "pt"}
    assert mostly_portuguese.checks["language_matches"] == "passed"
    assert english.details["language_matches"] == {"user": "pt", "answer": "en"}
    assert english.checks["language_matches"] == "failed"
    assert answers_read == [False, True]  # the opening, then the whole
    assert [len(text) > judges.LANGUAGE_OPENING_CHARS for text in read[1:3]] == [False, True]  # then its sentences


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
