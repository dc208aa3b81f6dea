"""A conversation tests file (``profile:`` and ``conversation_tests:``): the issue's example read unchanged, every
problem named with its line and field, the written file read back as it was, and the tests saved and given back by
name."""

from __future__ import annotations

import textwrap

import pytest

from releases.evals import (
    ConversationTestsFileError,
    conversation_tests_dump,
    conversation_tests_load,
    conversation_tests_parse,
    conversation_tests_saved,
    conversation_tests_text,
)
from releases.evals.files import MAX_TESTS
from releases.models import ConversationTest
from routing.conversation_tests.cases import CaseTurn, ConversationCase

# The issue's example, byte for byte.
EXAMPLE = """\
profile: telecom_contas
conversation_tests:
  - name: a high invoice is explained with the invoice
    required: true            # a failure blocks publish and rollout stages
    language: pt              # the conversation's language, and every answer's unless a turn says otherwise
    context: {msisdn: "5511999999999"}
    turns:
      - user: minha fatura veio alta este mês
        expect:
          agent: billing_agent
          intent: billing_invoice_explanation
          tools_called: [consultar_fatura]
          answer_contains: ["fatura"]
          answer_not_contains: ["Subject:"]
          answer_language: pt
      - user: obrigado, era isso
        expect:
          no_state: true
          judge: {rubric: "Thanks the customer and does not ask for anything else.", min_score: 0.7}
"""


def limit(agent_id: str) -> int:
    return 4000


def parse(text: str) -> tuple[str, list[ConversationCase]]:
    return conversation_tests_parse(text, name="suite.yaml", input_limit=limit)


def refused(text: str) -> list[str]:
    with pytest.raises(ConversationTestsFileError) as caught:
        parse(text)
    return caught.value.problems


def test_the_issues_example_reads_unchanged_as_one_test_of_two_turns():
    agent_id, cases = parse(EXAMPLE)

    assert agent_id == "telecom_contas"
    assert cases == [
        ConversationCase(
            name="a high invoice is explained with the invoice",
            required=True,
            language="pt",
            context={"msisdn": "5511999999999"},
            turns=(
                CaseTurn(
                    user="minha fatura veio alta este mês",
                    expect={
                        "agent": "billing_agent",
                        "intent": "billing_invoice_explanation",
                        "tools_called": ["consultar_fatura"],
                        "answer_contains": ["fatura"],
                        "answer_not_contains": ["Subject:"],
                        "answer_language": "pt",
                    },
                ),
                CaseTurn(
                    user="obrigado, era isso",
                    expect={
                        "no_state": True,
                        "judge": {
                            "rubric": "Thanks the customer and does not ask for anything else.",
                            "min_score": 0.7,
                        },
                    },
                ),
            ),
        )
    ]


def test_an_unknown_key_is_named_with_its_line_at_every_level():
    text = EXAMPLE.replace("    required: true", "    owner: ana\n    required: true")
    text = text.replace("          no_state: true", "          no_state: true\n          answer_contain: [x]")
    text = text.replace("min_score: 0.7}", "min_score: 0.7, model: gpt}")
    text += "flows: []\n"

    problems = refused(text)

    assert problems[0] == "suite.yaml:22: flows: unknown key 'flows' (allowed: profile, conversation_tests)."
    assert problems[1].startswith("suite.yaml:4: conversation_tests[0].owner: unknown key 'owner' (allowed: name, ")
    assert problems[2].startswith(
        "suite.yaml:20: conversation_tests[0].turns[1].expect.answer_contain: unknown key 'answer_contain' (allowed: "
    )
    assert problems[3].startswith(
        "suite.yaml:21: conversation_tests[0].turns[1].expect.judge.model: unknown key 'model' (allowed: rubric, "
    )
    assert len(problems) == 4


def test_a_problem_inside_a_value_is_named_with_its_line_and_field():
    text = EXAMPLE.replace(
        'answer_contains: ["fatura"]', 'answer_contains: ["fatura"]\n          answer_matches: "(a)\\\\1"'
    )

    (problem,) = refused(text)

    assert problem.startswith("suite.yaml:14: conversation_tests[0].turns[0].expect.answer_matches: RE2 cannot compile")


def test_a_missing_field_is_named_on_the_line_of_what_lacks_it():
    (problem,) = refused(EXAMPLE.replace("      - user: obrigado, era isso\n", "      - channel: web\n"))

    assert problem == "suite.yaml:16: conversation_tests[0].turns[1]: user: required text (the customer's message)."
    (problem,) = refused(EXAMPLE.split("      - user: obrigado")[0] + "      - obrigado, era isso\n")
    assert problem == (
        "suite.yaml:16: conversation_tests[0].turns[1]: must be a mapping with the customer's message (user) and, "
        "optionally, expect."
    )


def test_a_repeated_name_and_a_file_without_a_profile_are_refused():
    tests = EXAMPLE.split("conversation_tests:\n")[1]
    problems = refused("conversation_tests:\n" + tests + tests)

    assert problems == [
        "suite.yaml:1: profile: required text (the profile's agent_id).",
        "suite.yaml:19: conversation_tests[1].name: 'a high invoice is explained with the invoice' is repeated "
        "(first on line 2).",
    ]


def test_a_file_of_more_tests_than_the_bound_is_refused_before_they_are_read():
    item = "  - {name: t, turns: [{user: oi}]}\n"

    (problem,) = refused("profile: p\nconversation_tests:\n" + item * (MAX_TESTS + 1))

    assert (
        problem == f"suite.yaml:2: conversation_tests: at most {MAX_TESTS:,} tests in a file ({MAX_TESTS + 1:,} given)."
    )


def test_a_written_file_reads_back_as_the_tests_it_was_written_from():
    _, cases = parse(EXAMPLE)
    extra = ConversationCase(
        name="a schema, recorded answers and a disabled test",
        required=False,
        enabled=False,
        user="cliente-7",
        channel="whatsapp",
        tool_answers={"consultar_fatura": {"total": "R$ 120,00", "itens": [{"nome": "roaming"}]}},
        turns=(
            CaseTurn(
                user="qual o total?",
                channel="web",
                context={"invoice_id": "F-9"},
                tool_answers={"consultar_fatura": {"total": "R$ 99,90"}},
                expect={
                    "answer_schema": {"type": "object", "required": ["total"]},
                    "tools_called": {"consultar_fatura": {"invoice_id": "F-9"}},
                    "answer_matches": r"R\$\s*\d+",
                    "judge": {"rubric": "Says the total.", "min_score": 0.5, "runs": 3},
                },
            ),
        ),
    )

    text = conversation_tests_text("telecom_contas", [*cases, extra])

    assert parse(text) == ("telecom_contas", [*cases, extra])


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_loaded_tests_are_saved_by_name_and_dumped_as_the_file_had_them(telecom):
    _, cases = parse(EXAMPLE)

    first = conversation_tests_load(profile=telecom, cases=cases)
    again = conversation_tests_load(profile=telecom, cases=cases)

    assert (first.created, first.updated, again.created, again.updated) == (1, 0, 0, 0)
    assert conversation_tests_saved(telecom) == cases
    assert parse(conversation_tests_dump(telecom)) == ("telecom_contas", cases)


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_a_load_updates_a_test_by_name_and_with_replace_deletes_those_the_file_does_not_name(telecom):
    _, cases = parse(EXAMPLE)
    conversation_tests_load(profile=telecom, cases=cases)
    ConversationTest.objects.create(profile=telecom, name="old", turns=[{"user": "oi"}], language="pt")
    changed = parse(EXAMPLE.replace("min_score: 0.7", "min_score: 0.8"))[1]

    report = conversation_tests_load(profile=telecom, cases=changed, replace=True)

    assert (report.created, report.updated, report.deleted) == (0, 1, 1)
    (saved,) = ConversationTest.objects.filter(profile=telecom)
    assert saved.turns[1]["expect"]["judge"]["min_score"] == 0.8


@pytest.mark.django_db
def test_a_message_longer_than_the_profiles_input_limit_is_refused_by_the_profiles_limit(telecom):
    telecom.guardrails = {**(telecom.guardrails or {}), "max_input_chars": 20}
    telecom.save(update_fields=["guardrails"])

    with pytest.raises(ConversationTestsFileError) as caught:
        conversation_tests_parse(textwrap.dedent(EXAMPLE), name="suite.yaml")

    assert caught.value.problems == [
        "suite.yaml:8: conversation_tests[0].turns[0].user: longer than the profile's limit of 20 characters (31)."
    ]
