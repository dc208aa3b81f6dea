"""The conversation tests' contract: what a test may say, what is refused and where, and the saved row refusing the
same things as the file."""

from __future__ import annotations

import copy

import pytest
from django.core.exceptions import ValidationError

from releases.models import ConversationTest
from routing.conversation_tests.cases import (
    EXPECT_KEYS,
    JUDGE_MAX_RUNS,
    MAX_TURNS,
    RUBRIC_MAX_CHARS,
    ConversationCase,
    Judge,
    conversation_test_problems,
)

LIMIT = 4000
# The issue's example, as data.
EXAMPLE = {
    "name": "a high invoice is explained with the invoice",
    "required": True,
    "language": "pt",
    "context": {"msisdn": "5511999999999"},
    "turns": [
        {
            "user": "minha fatura veio alta este mês",
            "expect": {
                "agent": "billing_agent",
                "intent": "billing_invoice_explanation",
                "tools_called": ["consultar_fatura"],
                "answer_contains": ["fatura"],
                "answer_not_contains": ["Subject:"],
                "answer_language": "pt",
            },
        },
        {
            "user": "obrigado, era isso",
            "expect": {
                "no_state": True,
                "judge": {"rubric": "Thanks the customer and does not ask for anything else.", "min_score": 0.7},
            },
        },
    ],
}


def problems(data) -> dict[str, str]:
    found = conversation_test_problems(data, max_chars=LIMIT)
    return {".".join(map(str, where)): problem for where, problem in found}


def with_expect(**expect) -> dict:
    data = copy.deepcopy(EXAMPLE)
    data["turns"][0]["expect"] = expect
    return data


def test_the_issues_example_is_a_test_with_nothing_wrong():
    assert problems(EXAMPLE) == {}


def test_every_kind_of_expectation_is_accepted_together():
    data = with_expect(
        intent="billing_invoice_explanation",
        agent="billing_agent",
        method="keyword",
        next_state="WAITING_PAYMENT_CONFIRMATION",
        events=["pushed", "resumed"],
        language="pt",
        state="WAITING_PAYMENT_CONFIRMATION",
        answer_contains=["fatura"],
        answer_not_contains=["Subject:", "msisdn"],
        answer_matches=r"R\$\s*\d+,\d{2}",
        answer_language="pt",
        answer_schema={"type": "object", "required": ["status"]},
        answer_min_chars=10,
        answer_max_chars=800,
        tools_called={"consultar_fatura": {"msisdn": "5511999999999"}},
        tools_not_called=["consultar_pedido"],
        frame_pushed="WAITING_PAYMENT_CONFIRMATION",
        frame_resumed=True,
        escalated=False,
        delegated_to="billing_agent",
        returned=True,
        judge={"rubric": "Explains the invoice.", "min_score": 0.5, "runs": 3},
    )

    assert problems(data) == {}


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ((), "owner"),
        (("turns", 0), "message"),
        (("turns", 0, "expect"), "answer_contain"),
        (("turns", 1, "expect", "judge"), "threshold"),
    ],
)
def test_an_unknown_key_anywhere_is_named_where_it_is(path, key):
    data = copy.deepcopy(EXAMPLE)
    place = data
    for part in path:
        place = place[part]
    place[key] = "x"

    found = problems(data)

    where = ".".join(map(str, (*path, key)))
    assert found[where].startswith(f"unknown key {key!r} (allowed: ")


def test_a_pattern_re2_cannot_run_is_refused_saying_why():
    found = problems(with_expect(answer_matches=r"(a+)\1"))

    assert "RE2 cannot compile it" in found["turns.0.expect.answer_matches"]


def test_a_schema_the_platform_does_not_check_is_refused_saying_why():
    found = problems(with_expect(answer_schema={"$ref": "https://example.com/schema.json"}))

    assert "Only references inside the schema" in found["turns.0.expect.answer_schema"]


def test_a_judge_needs_a_rubric_a_score_between_zero_and_one_and_a_bounded_number_of_runs():
    found = problems(with_expect(judge={"rubric": " ", "min_score": 7, "runs": JUDGE_MAX_RUNS + 1}))

    assert found["turns.0.expect.judge.rubric"] == "required text."
    assert "from 0 to 1" in found["turns.0.expect.judge.min_score"]
    assert f"from 1 to {JUDGE_MAX_RUNS}" in found["turns.0.expect.judge.runs"]


def test_texts_turns_and_messages_are_bounded():
    data = copy.deepcopy(EXAMPLE)
    data["turns"] = [{"user": "oi", "expect": {"agent": "billing_agent"}}] * (MAX_TURNS + 1)
    data["turns"][0] = {"user": "x" * (LIMIT + 1)}
    data["turns"][1] = {"user": "oi", "expect": {"judge": {"rubric": "x" * (RUBRIC_MAX_CHARS + 1), "min_score": 1}}}

    found = problems(data)

    assert found["turns"] == f"at most {MAX_TURNS} turns ({MAX_TURNS + 1} given)."
    assert "profile's limit of 4000 characters" in found["turns.0.user"]
    assert "longer than 2,000 characters" in found["turns.1.expect.judge.rubric"]


def test_values_of_the_wrong_kind_are_named():
    found = problems(
        with_expect(
            answer_contains="fatura",
            answer_language="fr",
            answer_min_chars=50,
            answer_max_chars=10,
            escalated="yes",
            frame_pushed="",
            tools_called={"consultar_fatura": ["msisdn"]},
            tools_not_called=["consultar_fatura"],
            intent="",
        )
    )

    assert found["turns.0.expect.answer_contains"].startswith("must be a list of one or more phrases")
    assert found["turns.0.expect.answer_language"] == "must be one of: pt, es, en."
    assert found["turns.0.expect.answer_min_chars"] == "is more than answer_max_chars (10)."
    assert found["turns.0.expect.escalated"] == "must be true or false."
    assert found["turns.0.expect.frame_pushed"] == "must be true, false or a frame's name or kind."
    assert found["turns.0.expect.tools_called.consultar_fatura"].startswith("must be a mapping of the arguments")
    assert found["turns.0.expect.tools_not_called"].startswith("names a tool tools_called names too")
    assert found["turns.0.expect.intent"] == "must be a non-empty text."


def test_a_test_that_checks_nothing_is_refused():
    data = {"name": "só conversa", "turns": [{"user": "oi"}, {"user": "tchau"}]}

    assert problems(data) == {
        "": "checks nothing: give a turn an expect (or the test a language its answers must be in)."
    }
    assert problems({**data, "language": "pt"}) == {}


def test_a_test_read_from_its_data_writes_the_same_data_back():
    case = ConversationCase.read(EXAMPLE)

    assert ConversationCase.read(case.data()) == case
    assert case.data()["turns"][1]["expect"]["judge"] == {
        "rubric": "Thanks the customer and does not ask for anything else.",
        "min_score": 0.7,
    }
    assert case.turns[1].judge == Judge("Thanks the customer and does not ask for anything else.", 0.7, 1)
    assert case.runs == 1


def test_a_test_runs_as_many_times_as_its_judges_ask_at_most():
    data = copy.deepcopy(EXAMPLE)
    data["turns"][0]["expect"]["judge"] = {"rubric": "Explains.", "min_score": 0.5, "runs": 3}

    assert ConversationCase.read(data).runs == 3


def test_every_expect_key_is_documented_in_the_field_help():
    help_text = ConversationTest._meta.get_field("turns").help_text

    assert all(key in help_text for key in EXPECT_KEYS)


# -- the saved row ---------------------------------------------------------------------------------------------


def row(profile, **fields) -> ConversationTest:
    values = {
        "name": EXAMPLE["name"],
        "language": "pt",
        "context": EXAMPLE["context"],
        "turns": copy.deepcopy(EXAMPLE["turns"]),
    }
    return ConversationTest(profile=profile, **{**values, **fields})


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_the_saved_row_takes_the_example_and_gives_it_back(telecom):
    saved = row(telecom)
    saved.full_clean()
    saved.save()

    saved.refresh_from_db()
    assert ConversationCase.read(saved.data()) == ConversationCase.read(EXAMPLE)


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_the_saved_row_refuses_what_the_file_refuses_on_the_field_it_is_about(telecom):
    turns = copy.deepcopy(EXAMPLE["turns"])
    turns[1]["expect"]["judge"]["runs"] = 0
    turns[0]["expect"]["answer_matches"] = "(?=x)"

    with pytest.raises(ValidationError) as caught:
        row(telecom, turns=turns, context=["msisdn"], language="fr").full_clean()

    errors = caught.value.message_dict
    assert errors["turns"] == [
        f"turns[0].expect.answer_matches: {problems({**EXAMPLE, 'turns': turns})['turns.0.expect.answer_matches']}",
        f"turns[1].expect.judge.runs: must be a whole number from 1 to {JUDGE_MAX_RUNS}.",
    ]
    assert errors["context"] == ['must be a mapping, e.g. {msisdn: "5511999999999"}.']
    assert "language" in errors  # Django's own choice check speaks first


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_the_saved_row_bounds_a_message_by_its_profiles_input_limit(telecom):
    telecom.guardrails = {**(telecom.guardrails or {}), "max_input_chars": 20}
    turns = [{"user": "minha fatura veio alta este mês, explica?", "expect": {"agent": "billing_agent"}}]

    with pytest.raises(ValidationError) as caught:
        row(telecom, turns=turns).full_clean()

    assert caught.value.message_dict["turns"] == [
        "turns[0].user: longer than the profile's limit of 20 characters (41)."
    ]
