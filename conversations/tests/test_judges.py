"""Judges and the review decision (pure, no database).

The LLM judge's model is a fake async callable here: ``ask`` is the one seam the
judge has, and the real model path is exercised over HTTP elsewhere.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from common.i18n import say
from common.language import LANGUAGES
from conversations.graph import answer_noted
from conversations.judges import (
    JUDGES,
    REVIEW_FALLBACK_ANSWER,
    JudgeCase,
    LLMJudge,
    RuleBasedJudge,
    detect_language,
    judge_answer,
    parse_verdict,
    review_decision,
    review_note,
)
from conversations.turn import Turn, TurnInput
from routing import snapshot

QUESTION = "Minha fatura veio alta. Pode consultar?"
ERROR_ANSWER = "Desculpe, não consegui concluir sua solicitação agora. (Sorry, I could not complete your request.)"
INVOICE = {
    "tool": "consultar_fatura",
    "status": "ok",
    "arguments": {"msisdn": "5511999999999", "invoice_id": "INV001"},
    "result": {
        "invoice_id": "INV001",
        "msisdn": "5511999999999",
        "referencia": "2025-05",
        "vencimento": "2025-06-10",
        "valor_total": 289.9,
        "status": "em aberto",
    },
}
ORDER = {"tool": "consultar_pedido", "status": "ok", "arguments": {"order_id": "P100"}, "result": {"order_id": "P100"}}


def rule(answer: str, *, question: str = QUESTION, tools=(), settings=None, boilerplate=(ERROR_ANSWER,)):
    case = JudgeCase(question=question, answer=answer, tool_results=tuple(tools), boilerplate=tuple(boilerplate))
    return asyncio.run(RuleBasedJudge().evaluate(case, settings))


def llm(reply, *, settings=None, prompts=None):
    async def ask(prompt: str) -> str:
        if prompts is not None:
            prompts.append(prompt)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    case = JudgeCase(question=QUESTION, answer="Sua fatura é de R$ 289,90.", tool_results=(INVOICE,))
    return asyncio.run(LLMJudge().evaluate(case, settings, ask=ask))


# -- rule-based judge ----------------------------------------------------------------------


def test_a_plain_answer_in_the_users_language_passes_without_tools():
    result = rule("Claro! Vou verificar a sua fatura e já te respondo com os detalhes.")
    assert result.checks == {"answered": "passed", "grounded": "not_applicable", "language_matches": "passed"}
    assert result.score == 1.0
    assert result.passed
    assert result.details["grounded"] == {"reason": "no tool ran"}


@pytest.mark.parametrize("answer", ["", "   ", ERROR_ANSWER, f"  {ERROR_ANSWER.upper()} "])
def test_an_empty_or_boilerplate_answer_is_not_answered_and_scores_zero(answer):
    result = rule(answer, tools=[INVOICE])
    assert result.checks == {"answered": "failed", "grounded": "not_applicable", "language_matches": "not_applicable"}
    assert result.score == 0.0
    assert not result.passed
    assert result.status == "failed"


def test_boilerplate_with_a_real_answer_around_it_counts_as_answered():
    result = rule(f"{ERROR_ANSWER} Mas a fatura INV001 é de R$ 289,90, com vencimento em 10/06.", tools=[INVOICE])
    assert result.checks["answered"] == "passed"


@pytest.mark.parametrize(
    "answer",
    [
        "Sua fatura é de 289,90.",
        "Sua fatura é de R$ 289,90 neste mês.",
        "O total ficou em R$289.90, pode pagar quando quiser.",
        "O valor é 289.9 reais.",
        "Sua fatura vence em 10/06/2025.",
        "Sua fatura vence em 10 de junho.",
        "Sua fatura vence em 2025-06-10.",
        "É a fatura de maio de 2025, que está em aberto.",
    ],
)
def test_an_answer_that_uses_a_tool_value_in_any_spelling_is_grounded(answer):
    result = rule(answer, tools=[INVOICE])
    assert result.checks["grounded"] == "passed", result.details
    assert result.score == 1.0


def test_an_answer_that_only_repeats_what_the_user_gave_is_not_grounded():
    result = rule("Consultei a fatura INV001 da sua linha e ela está em aberto, pode ficar tranquila.", tools=[INVOICE])
    assert result.checks["grounded"] == "failed"
    assert result.details["grounded"]["mentioned"] == 0
    assert result.score == pytest.approx(0.667)
    assert result.passed


def test_an_id_from_the_results_grounds_when_it_is_the_only_value():
    result = rule("O seu pedido P100 já está a caminho.", question="Onde está meu pedido?", tools=[ORDER])
    assert result.checks["grounded"] == "passed"


def test_grounding_is_not_applicable_when_every_tool_failed():
    failed = {"tool": "consultar_fatura", "status": "error", "error": "timeout"}
    result = rule("Não consegui consultar a sua fatura agora, tente de novo.", tools=[failed])
    assert result.checks["grounded"] == "not_applicable"
    assert result.details["grounded"] == {"reason": "no tool succeeded"}


def test_bare_tool_results_and_json_text_results_count():
    assert rule("A fatura é de R$ 289,90.", tools=[{"valor_total": 289.9}]).checks["grounded"] == "passed"
    text_result = {"tool": "t", "status": "ok", "result": json.dumps({"valor_total": 289.9})}
    assert rule("A fatura é de R$ 289,90.", tools=[text_result]).checks["grounded"] == "passed"


@pytest.mark.parametrize(
    ("text", "language"),
    [
        (QUESTION, "pt"),
        ("Onde está meu pedido?", "pt"),
        ("Mi factura llegó muy alta. ¿Puede revisarla?", "es"),
        ("¿Dónde está mi pedido?", "es"),
        ("My bill is too high, can you check it?", "en"),
        ("ok", None),
        ("Pedido P100?", None),
    ],
)
def test_it_detects_portuguese_spanish_and_english(text, language):
    assert detect_language(text) == language


def test_an_answer_in_another_language_fails_the_language_check():
    result = rule("Your invoice is R$ 289.90 and it is due on June 10.", tools=[INVOICE])
    assert result.checks == {"answered": "passed", "grounded": "passed", "language_matches": "failed"}
    assert result.details["language_matches"] == {"user": "pt", "answer": "en"}
    assert result.score == pytest.approx(0.667)


def test_a_bilingual_answer_that_includes_the_users_language_passes():
    result = rule("Sua fatura é de R$ 289,90 e vence agora. (Your invoice is R$ 289.90 and it is due now.)")
    assert result.checks["language_matches"] == "passed"


def test_the_language_check_is_not_applicable_when_the_question_is_too_short():
    assert rule("Sua fatura é de R$ 289,90.", question="P100?").checks["language_matches"] == "not_applicable"


def test_min_score_decides_whether_the_rule_judge_passes():
    answer = "Your invoice is R$ 289.90 and it is due on June 10."
    assert rule(answer, tools=[INVOICE], settings={"min_score": 0.6}).passed
    strict = rule(answer, tools=[INVOICE], settings={"min_score": 0.9})
    assert not strict.passed
    assert strict.status == "failed"
    assert strict.reason == "Failed: language_matches."


def test_an_ungrounded_answer_in_the_wrong_language_fails():
    result = rule("Your invoice is fine, nothing to worry about.", tools=[INVOICE])
    assert result.score == pytest.approx(0.333)
    assert not result.passed


# -- LLM judge ------------------------------------------------------------------------------


def test_the_llm_judge_reads_a_good_verdict():
    prompts: list[str] = []
    result = llm('{"score": 0.9, "reason": "Uses the invoice total."}', prompts=prompts)
    assert (result.status, result.score, result.passed, result.reason) == (
        "passed",
        0.9,
        True,
        "Uses the invoice total.",
    )
    assert "Sua fatura é de R$ 289,90." in prompts[0]
    assert '"valor_total": 289.9' in prompts[0]
    assert QUESTION in prompts[0]


def test_the_llm_judge_finds_the_verdict_inside_prose_and_fences():
    result = llm('Here you go:\n```json\n{"score": "0.2", "reason": "Wrong amount."}\n```')
    assert (result.status, result.score, result.passed) == ("failed", 0.2, False)


def test_the_llm_judge_applies_min_score():
    assert not llm('{"score": 0.6}', settings={"min_score": 0.7}).passed
    assert llm('{"score": 0.7}', settings={"min_score": 0.7}).passed


@pytest.mark.parametrize(
    "reply",
    [
        "I think it is fine.",
        '{"score": 1.5, "reason": "too good"}',
        '{"score": -0.1}',
        '{"score": "high"}',
        '{"score": true}',
        '{"reason": "no score"}',
        '{"score": 0.5',
        "",
    ],
)
def test_a_malformed_llm_verdict_is_an_error_not_an_exception(reply):
    result = llm(reply)
    assert result.status == "error"
    assert result.score is None
    assert not result.passed
    assert result.reason.startswith("Unreadable verdict")


def test_a_failing_or_slow_model_is_an_llm_judge_error():
    assert llm(ConnectionError("down")).reason == "The LLM judge failed: ConnectionError."

    class SlowJudge(LLMJudge):
        timeout = 0.01

    async def slow(prompt: str) -> str:
        await asyncio.sleep(1)
        return '{"score": 1}'

    result = asyncio.run(SlowJudge().evaluate(JudgeCase(question="q", answer="a"), ask=slow))
    assert (result.status, result.reason) == ("error", "The LLM judge timed out.")


def test_the_llm_judge_without_a_model_is_skipped():
    result = asyncio.run(LLMJudge().evaluate(JudgeCase(question="q", answer="a")))
    assert result.status == "skipped"


def test_parse_verdict_returns_score_and_reason():
    assert parse_verdict('{"score": 1, "reason": "ok"}') == (1.0, "ok")
    with pytest.raises(ValueError, match="no JSON verdict"):
        parse_verdict("nothing here")


# -- judge_answer -----------------------------------------------------------------------------


def test_judge_answer_runs_the_rule_judge_and_the_llm_judge_only_when_configured():
    async def ask(prompt: str) -> str:
        return '{"score": 0.8, "reason": "fine"}'

    kwargs = {"question": QUESTION, "answer": "Sua fatura é de R$ 289,90.", "tool_results": [INVOICE], "ask": ask}
    default = asyncio.run(judge_answer(**kwargs))
    assert list(default) == ["rule_based"]
    both = asyncio.run(judge_answer(settings={"llm_judge": True}, **kwargs))
    assert list(both) == ["rule_based", "llm"]
    assert both["llm"]["score"] == 0.8
    assert json.loads(json.dumps(both)) == both


def test_every_registered_judge_is_named_by_its_key():
    for name, judge_class in JUDGES.items():
        assert judge_class.name == name


# -- review -------------------------------------------------------------------------------------


def judged(answer: str, *, settings=None, ask=None, tools=(INVOICE,)):
    return asyncio.run(
        judge_answer(
            question=QUESTION,
            answer=answer,
            tool_results=tools,
            settings=settings,
            boilerplate=[ERROR_ANSWER],
            ask=ask,
        )
    )


def test_a_value_one_tool_handed_the_next_still_grounds_the_answer():
    quote = {
        "tool": "get_stock_price",
        "status": "ok",
        "arguments": {"symbol": "PETR4.SA"},
        "result": {"symbol": "PETR4.SA", "price": 38.2, "explanation": "PETR4.SA is at 38.20 BRL."},
    }
    sent = {
        "tool": "send_message",
        "status": "ok",
        "arguments": {"message": "PETR4.SA is at 38.20 BRL."},
        "result": {"sent": True, "id": 7, "explanation": "Notification sent."},
    }
    answer = "PETR4 is at 38.20 BRL today; I sent it to you."

    result = asyncio.run(
        RuleBasedJudge().evaluate(JudgeCase("what is the price of PETR4? notify me", answer, (quote, sent)))
    )

    assert result.checks["grounded"] == "passed"


def test_review_accepts_an_answer_that_passed():
    assert review_decision(judged("Sua fatura é de R$ 289,90."), {}) == {
        "action": "accept",
        "reason": "The answer passed the judges.",
    }


def test_review_replaces_an_answer_that_failed_the_rule_judge():
    decision = review_decision(judged("Your invoice is fine, nothing to worry about."), {})
    assert decision["action"] == "replace"
    assert "rule_based" in decision["reason"]


def test_review_keeps_a_failed_answer_when_replacement_is_off():
    results = judged("Your invoice is fine, nothing to worry about.")
    assert review_decision(results, {"replace_failed_answers": False})["action"] == "accept"


def test_review_keeps_a_canned_platform_answer():
    assert review_decision(judged(ERROR_ANSWER), {})["action"] == "accept"
    assert review_decision(judged(""), {})["action"] == "replace"


def test_review_replaces_an_answer_the_configured_llm_judge_failed():
    async def harsh(prompt: str) -> str:
        return '{"score": 0.1, "reason": "Invents a discount."}'

    results = judged("Sua fatura é de R$ 289,90.", settings={"llm_judge": True}, ask=harsh)
    assert review_decision(results, {"llm_judge": True})["action"] == "replace"


def test_review_never_replaces_an_answer_after_the_turn_changed_something_and_notes_it_instead():
    failed = judged("Your invoice is fine, nothing to worry about.")

    decision = review_decision(failed, {}, side_effects=["send_message"])

    assert decision["action"] == "note" and decision["side_effects"] == ["send_message"]
    assert "rule_based" in decision["reason"] and "send_message" in decision["reason"]
    assert review_decision(judged("Sua fatura é de R$ 289,90."), {}, side_effects=["send_message"])["action"] == (
        "accept"
    )


def test_the_review_note_is_in_the_customers_language():
    assert {language: detect_language(review_note(language)) for language in ("pt", "en", "es")} == {
        "pt": "pt",
        "en": "en",
        "es": "es",
    }
    assert review_note(None) == review_note("pt")


def test_review_ignores_an_llm_judge_error():
    async def broken(prompt: str) -> str:
        return "not json"

    results = judged("Sua fatura é de R$ 289,90.", settings={"llm_judge": True}, ask=broken)
    assert results["llm"]["status"] == "error"
    assert review_decision(results, {})["action"] == "accept"


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_fallback_answer_is_said_in_the_conversations_language_alone(language):
    answer = say(language, REVIEW_FALLBACK_ANSWER)

    assert detect_language(answer) == language and "(" not in answer


@pytest.mark.django_db
def test_the_review_note_after_an_answer_at_the_limit_fits_within_it_the_answer_cut_and_the_cut_recorded(
    tenant, telecom, settings
):
    settings.ANSWER_MAX_CHARS = 300
    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(tenant_pk=tenant.pk, tenant_slug=tenant.slug, profile=profile, text="", session_id="noted")
    turn = Turn(input=data, mode=profile.effective_mode)
    turn.answer = "B" * 300  # at the limit, as the output guardrails leave a longer one
    note = review_note("pt")

    answer_noted(turn, note)

    assert len(turn.answer) <= 300 and turn.answer.endswith("\n\n" + note)
    assert "…[cut:" in turn.answer and turn.answer.startswith("B")
    (cut,) = [hit for hit in turn.limits if hit["setting"] == "ANSWER_MAX_CHARS"]
    assert (cut["asked"], cut["ran"]) == (300 + 2 + len(note), len(turn.answer))


@pytest.mark.django_db
def test_a_short_answer_keeps_its_words_and_takes_the_review_note_whole(tenant, telecom):
    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(tenant_pk=tenant.pk, tenant_slug=tenant.slug, profile=profile, text="", session_id="noted")
    turn = Turn(input=data, mode=profile.effective_mode)
    turn.answer = "Pedido cancelado."

    answer_noted(turn, review_note("pt"))

    assert turn.answer == "Pedido cancelado.\n\n" + review_note("pt") and turn.limits == []
