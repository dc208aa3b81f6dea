"""Runs kept: a run of a profile's conversation tests is stored with what was asked, who started it, its progress,
its counts, each test's result (failures first) and what of the profile it covered; the model usage of its turns and
judges is the run's, never a tenant's; bad input names its field and stores nothing; a large suite goes to a Celery
worker where a broker is configured, and plays at once otherwise."""

from __future__ import annotations

import json
import time

import pytest

from agents.models import ModelCallUsage
from common.errors import DomainError
from conversations.models import Message
from releases.evals import conversation_tests_load, conversation_tests_parse
from releases.evals.run import conversation_tests_run
from releases.evals.runs import QUEUE_FROM, conversation_test_run_start, run_report
from releases.models import ConversationTestRun, ConversationTestRunSource, ConversationTestRunStatus
from releases.routing_tests import DRAFT, routing_tests_spec
from tests.llm_server import Reply

SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: an invoice question goes to billing
    language: pt
    context: {msisdn: "5511999999999"}
    tool_answers: {consultar_fatura: {valor_total: "R$ 289,90"}, consultar_pagamentos: {pagamentos: []}}
    turns:
      - user: minha fatura veio alta este mês
        expect: {agent: billing_agent, tools_called: [consultar_fatura], answer_contains: ["289,90"]}
  - name: an order question goes to orders
    required: false
    turns:
      - user: cadê meu pedido?
        expect: {agent: billing_agent}
"""


def saved(profile, text: str = SUITE) -> None:
    conversation_tests_load(profile=profile, cases=conversation_tests_parse(text, name="suite.yaml")[1])


def many(count: int) -> str:
    """A suite of ``count`` one-turn tests that pass offline."""
    tests = "".join(
        f"  - name: invoice {number}\n    turns:\n      - user: minha fatura veio alta\n"
        "        expect: {agent: billing_agent}\n"
        for number in range(count)
    )
    return f"profile: telecom_contas\nconversation_tests:\n{tests}"


@pytest.mark.django_db
def test_a_run_is_kept_with_its_counts_each_tests_result_failures_first_and_its_coverage(telecom, editor):
    saved(telecom)

    run = conversation_test_run_start(profile=telecom, source=ConversationTestRunSource.ADMIN, started_by=editor)

    assert (run.status, run.version, run.version_number, run.started_by, run.source) == (
        "finished",
        "draft",
        None,
        editor,
        "admin",
    )
    assert (run.total, run.done, run.passed, run.failed, run.required_failed) == (2, 2, 1, 1, 0)
    shown = run_report(run)
    assert [result["name"] for result in shown["results"]] == [
        "an order question goes to orders",
        "an invoice question goes to billing",
    ]
    assert shown["results"][0]["failures"] == [
        "turn 1 of 1 (“cadê meu pedido?”): agent: expected 'billing_agent', got 'orders_agent'"
    ]
    assert shown["results"][1]["turns"][0]["tools"][0]["tool"] == "consultar_fatura"
    intents = run.coverage["intents"]
    assert {"billing_invoice_explanation", "retail_order_tracking"} <= set(intents["exercised"])
    assert "support_request" in intents["missing"]
    assert run.coverage["tools"]["exercised"] == ["consultar_fatura", "consultar_pagamentos"]
    assert run.coverage["languages"]["missing"] == ["es", "en"]


@pytest.mark.django_db
def test_the_tests_named_and_a_comparison_are_kept_with_the_answers_that_changed(telecom):
    saved(telecom)

    run = conversation_test_run_start(
        profile=telecom,
        source=ConversationTestRunSource.API,
        names=["an order question goes to orders"],
        compare="live",
    )

    assert (run.names, run.compared_with, run.total, run.changed) == (
        ["an order question goes to orders"],
        "live",
        1,
        0,
    )
    (result,) = run_report(run)["results"]
    assert result["compared"]["outcome"] == "still fails"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("asked", "field"),
    [
        ({"version": "newest"}, "version"),
        ({"version": 7}, "version"),
        ({"compare": "0"}, "compare"),
        ({"names": "an invoice question goes to billing"}, "names"),
        ({"names": ["nope"]}, "names"),
        ({"names": [3]}, "names"),
    ],
)
def test_bad_input_names_its_field_and_stores_nothing(telecom, asked, field):
    saved(telecom)

    with pytest.raises(DomainError) as raised:
        conversation_test_run_start(profile=telecom, source=ConversationTestRunSource.API, **asked)

    assert list(raised.value.fields) == [field] and raised.value.status_code == 400
    assert not ConversationTestRun.objects.exists()


@pytest.mark.django_db
def test_a_profile_without_tests_is_refused_naming_the_tests(telecom):
    with pytest.raises(DomainError, match="telecom_contas has no enabled conversation test to run"):
        conversation_test_run_start(profile=telecom, source=ConversationTestRunSource.API)


@pytest.mark.django_db
def test_the_model_usage_of_the_turns_and_the_judge_is_the_runs_and_reaches_no_tenant(telecom, scripted_llm):
    def responder(body: dict) -> Reply:
        if "Rubric:" in str(body["messages"][-1]["content"]):
            return Reply(content=json.dumps({"score": 0.9, "reason": "fine"}), usage=(40, 5))
        return Reply(content="Sua fatura subiu: o total é R$ 289,90.", usage=(100, 20))

    scripted_llm.respond_with(responder)
    saved(
        telecom,
        """\
profile: telecom_contas
conversation_tests:
  - name: judged
    turns:
      - user: minha fatura veio alta este mês
        expect: {judge: {rubric: "Names the total.", min_score: 0.5}}
""",
    )

    run = conversation_test_run_start(profile=telecom, source=ConversationTestRunSource.API)

    assert run.passed == 1
    kinds = {call["kind"]: call for call in run.usage["calls"]}
    assert kinds["judge"]["prompt_tokens"] == 40 and kinds["judge"]["completion_tokens"] == 5
    assert kinds["answer"]["prompt_tokens"] >= 100
    assert run.usage["total_tokens"] == sum(c["prompt_tokens"] + c["completion_tokens"] for c in run.usage["calls"])
    assert not ModelCallUsage.objects.exists() and not Message.objects.exists()


@pytest.mark.django_db
def test_each_result_is_told_as_it_comes_in_the_tests_order(telecom):
    told: list[str] = []
    cases = conversation_tests_parse(SUITE, name="suite.yaml")[1]

    conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases, on_result=lambda r: told.append(r.case.name))

    assert told == [case.name for case in cases]


@pytest.mark.django_db
def test_without_a_broker_a_large_suite_plays_at_once(telecom, settings):
    settings.REDIS_URL = ""
    saved(telecom, many(QUEUE_FROM))

    run = conversation_test_run_start(profile=telecom, source=ConversationTestRunSource.ADMIN)

    assert (run.status, run.passed) == (ConversationTestRunStatus.FINISHED, QUEUE_FROM)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_with_a_broker_a_large_suite_is_queued_and_a_worker_plays_it_with_its_progress(telecom, celery_worker):
    saved(telecom, many(QUEUE_FROM))

    run = conversation_test_run_start(profile=telecom, source=ConversationTestRunSource.ADMIN)

    assert (run.status, run.total, run.done) == (ConversationTestRunStatus.QUEUED, QUEUE_FROM, 0)
    seen_done = set()
    for _ in range(1200):  # polls of the row, not a time bound on the run
        run.refresh_from_db()
        seen_done.add(run.done)
        if run.status == ConversationTestRunStatus.FINISHED:
            break
        time.sleep(0.1)
    assert (run.status, run.passed, run.done) == (ConversationTestRunStatus.FINISHED, QUEUE_FROM, QUEUE_FROM)
    assert run.results.count() == QUEUE_FROM
