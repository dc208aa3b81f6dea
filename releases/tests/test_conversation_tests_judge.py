"""A turn's ``judge: {rubric, min_score}``: asked of the profile's model with the rubric, the customer's message and
the answer; a judge that errs or replies what cannot be read fails the check; ``runs: N`` plays the test N times
against a pass rate; offline, a deterministic judge that reads the rubric's quoted phrases and never passes an empty
answer."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from releases.evals import conversation_tests_parse
from releases.evals.judging import OFFLINE, answer_judged
from releases.evals.run import MIN_PASS_RATE, conversation_tests_run
from releases.routing_tests import DRAFT, routing_tests_spec
from routing.conversation_tests.cases import Judge
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

RUBRIC = "Explains why the invoice is higher and names its total."
SUITE = f"""\
profile: telecom_contas
conversation_tests:
  - name: the invoice is explained
    turns:
      - user: minha fatura veio alta este mês
        expect:
          judge: {{rubric: "{RUBRIC}", min_score: 0.7}}
"""
ANSWER = "Sua fatura subiu por causa do roaming: o total é R$ 289,90."


def cases(text: str = SUITE):
    return conversation_tests_parse(text, name="suite.yaml")[1]


def judging(scores: list[object]):
    """A scripted model: the specialist answers ANSWER; the judge, each score in turn (a text is sent as it is)."""
    left = list(scores)

    def responder(body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        if "Rubric:" not in str(prompt):
            return Reply(content=ANSWER)
        score = left.pop(0)
        return Reply(content=score if isinstance(score, str) else json.dumps({"score": score, "reason": "read"}))

    return responder


def test_the_judge_model_is_asked_with_the_rubric_the_message_and_the_answer(telecom, scripted_llm):
    scripted_llm.respond_with(judging([0.9]))

    run = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases())

    assert run.passed == 1
    (asked,) = [body for body in scripted_llm.requests if "Rubric:" in str(body["messages"][-1]["content"])]
    prompt = asked["messages"][-1]["content"]
    assert RUBRIC in prompt and "minha fatura veio alta este mês" in prompt and ANSWER in prompt
    verdict = run.results[0].attempts[0].turns[0].verdict
    assert verdict is not None and (verdict.judge, verdict.score) == ("model", 0.9)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ("I think it is fine.", "Unreadable verdict: no JSON verdict with a score."),
        ('{"score": 7}', "Unreadable verdict: score must be between 0 and 1."),
        (0.4, "read"),
    ],
)
def test_a_verdict_that_cannot_be_read_or_falls_short_fails_the_check(telecom, scripted_llm, reply, said):
    scripted_llm.respond_with(judging([reply]))

    (result,) = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases()).results

    assert not result.passed
    (line,) = result.failure_lines()
    assert line.startswith("turn 1 of 1 (“minha fatura veio alta este mês”): judge: expected 'score ≥ 0.7', got ")
    assert line.endswith(f"({said})")


def test_a_judge_model_that_errs_fails_the_check(telecom, scripted_llm):
    scripted_llm.respond_with(judging([]))
    scripted_llm.reply(ANSWER)
    scripted_llm.reply_error(500)

    (result,) = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases()).results

    assert not result.passed
    (line,) = result.failure_lines()
    assert line.startswith(
        "turn 1 of 1 (“minha fatura veio alta este mês”): judge: expected 'score ≥ 0.7', got 'no score' "
        "(The LLM judge failed: "
    )


def test_a_judged_test_asked_to_run_three_times_passes_on_its_pass_rate(telecom, scripted_llm):
    scripted_llm.respond_with(judging([0.9, 0.2, 0.8]))
    thrice = SUITE.replace("min_score: 0.7}", "min_score: 0.7, runs: 3}")

    (result,) = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases(thrice)).results

    assert len(result.attempts) == 3
    assert result.pass_rate == pytest.approx(2 / 3) and result.pass_rate >= MIN_PASS_RATE
    assert result.passed
    assert result.failure_text().startswith("the invoice is explained (passed 67% of 3 runs): turn 1 of 1")


def test_offline_a_judged_test_runs_once_whatever_its_runs(telecom):
    thrice = SUITE.replace("min_score: 0.7}", "min_score: 0.7, runs: 3}")

    (result,) = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases(thrice)).results

    assert len(result.attempts) == 1
    assert result.attempts[0].turns[0].verdict.judge == OFFLINE


def judged_offline(telecom, rubric: str, answer: str, question: str = "minha fatura veio alta"):
    spec = routing_tests_spec(telecom, DRAFT)
    return async_to_sync(answer_judged)(
        profile=spec, judge=Judge(rubric, 0.7), question=question, answer=answer, tools=()
    )


def test_offline_the_rubrics_quoted_phrases_must_be_in_the_answer(telecom):
    rubric = 'Says "segunda via" and "boleto".'

    missing = judged_offline(telecom, rubric, "Posso enviar a segunda via por e-mail agora mesmo.")
    present = judged_offline(telecom, rubric, "Posso enviar a segunda via do boleto por e-mail agora mesmo.")

    assert (missing.passed, missing.checks["quoted"]) == (False, "failed")
    assert (present.passed, present.checks["quoted"]) == (True, "passed")


def test_offline_an_empty_answer_or_one_in_another_language_does_not_pass(telecom):
    empty = judged_offline(telecom, "Answers the customer.", "")
    english = judged_offline(
        telecom, "Answers the customer.", "Your invoice is higher this month because of the roaming charges."
    )

    assert (empty.passed, empty.score) == (False, 0.0)
    assert not english.passed and english.checks["language_matches"] == "failed"


def test_offline_a_rubric_in_the_answers_language_needs_its_content_words_in_the_answer(telecom):
    rubric = "Explica o aumento da fatura pelo roaming internacional."

    off = judged_offline(telecom, rubric, "Obrigado pelo contato, logo retornamos com novidades sobre o pedido.")
    on = judged_offline(telecom, rubric, "O aumento da fatura veio do roaming internacional usado em maio.")

    assert off.checks["words"] == "failed" and not off.passed
    assert on.checks["words"] == "passed" and on.passed
