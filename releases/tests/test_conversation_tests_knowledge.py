"""Conversation tests about knowledge: ``cites`` (a passage, none, or a named document), ``unknown`` ("I don't know")
and ``grounded`` (the answer's numbers and most of its content words are the cited passages'), played on a profile's
help centre and checked on answers written by hand."""

from __future__ import annotations

import pytest

from knowledge.models import KnowledgeSource
from knowledge.services import document_ingest
from releases.evals import conversation_tests_parse
from releases.evals.checks import Cited, Observed, grounding, turn_checked
from releases.evals.run import conversation_tests_run
from releases.routing_tests import DRAFT, routing_tests_spec
from routing.conversation_tests.cases import expect_problems

PLANS = b"""# Plans and internet

## Internet speed

The fibre plan delivers up to 500 megabits per second. Speed tests should be run over a cable, not over Wi-Fi.

## Changing plan

You can change your plan once a month in the app, under My plan. The new price applies from the next invoice.
"""
SPEED = Cited(
    "Plans and internet",
    "plans.md",
    "The fibre plan delivers up to 500 megabits per second. Speed tests should be run over a cable, not over Wi-Fi.",
)
QUESTION = "How fast is the internet on the fibre plan?"


def seen(answer: str, *cited: Cited, unknown: bool = False) -> Observed:
    return Observed(
        answer=answer,
        agent="product_agent",
        decision={},
        state="",
        question=QUESTION,
        knowledge={"unknown": True} if unknown else {},
        cited=cited,
    )


def test_an_answer_quoting_or_rewording_its_passage_is_grounded():
    quoted = (
        "Products (offline model): Our documents say: “The fibre plan delivers up to 500 megabits per second.” [1]"
        "\n\nSources: [1] Plans and internet"
    )
    reworded = "On the fibre plan you get up to 500 megabits per second; run speed tests over a cable. [1]"

    assert grounding(quoted, QUESTION, [SPEED], framing=("Products", "(offline model)", "Our documents say:")) == ""
    assert grounding(quoted, QUESTION, [SPEED]).startswith("4 of its 9 content words are not in the cited passages")
    assert grounding(reworded, QUESTION, [SPEED]) == ""
    assert turn_checked({"grounded": True, "cites": "plans.md"}, seen(reworded, SPEED)) == []


def test_an_answer_stating_a_number_its_passages_do_not_hold_is_not_grounded():
    invented = "The fibre plan delivers up to 900 megabits per second, for 99.90 a month. [1]"

    (failure,) = turn_checked({"grounded": True}, seen(invented, SPEED))

    assert (failure.key, failure.actual) == ("grounded", False)
    assert failure.note == "states 900, 99.90, which neither the cited passages nor the message hold"
    assert grounding("The fibre plan delivers up to 500.0 megabits per second.", QUESTION, [SPEED]) != ""
    assert grounding("Up to 1,000 megabits per second.", "Is 1.000 megabits per second possible?", [SPEED]) == ""


def test_an_answer_mostly_of_words_its_passages_do_not_hold_is_not_grounded_and_says_which():
    padded = "Our premium customers enjoy dedicated support, priority installation and a free router upgrade. [1]"

    why = grounding(padded, QUESTION, [SPEED])

    assert why.startswith("10 of its 10 content words are not in the cited passages: premium, customers, enjoy")
    assert grounding("Fibre plan speed: up to 500 megabits per second.", QUESTION, []) == "the answer cites no passage"


def test_cites_names_a_document_by_title_or_file_name_or_says_whether_any_passage_is_cited():
    answer = seen("“The fibre plan delivers up to 500 megabits per second.” [1]", SPEED)

    for expected in (True, "plans.md", "PLANS AND INTERNET"):
        assert turn_checked({"cites": expected}, answer) == []
    (failure,) = turn_checked({"cites": "faturas.md"}, answer)
    assert (failure.key, failure.actual) == ("cites", ["Plans and internet"])
    (failure,) = turn_checked({"cites": False}, answer)
    assert failure.actual == ["Plans and internet"]
    assert turn_checked({"cites": False, "unknown": True}, seen("I don't know.", unknown=True)) == []
    (failure,) = turn_checked({"unknown": True}, answer)
    assert (failure.key, failure.expected, failure.actual) == ("unknown", True, False)


def test_the_knowledge_keys_refuse_values_of_the_wrong_kind_naming_the_key():
    assert expect_problems({"cites": True, "grounded": True, "unknown": False}) == []
    assert expect_problems({"cites": 3, "grounded": "yes", "unknown": None}) == [
        (("cites",), "must be true, false or a document's title or file name."),
        (("grounded",), "must be true or false."),
        (("unknown",), "must be true or false."),
    ]


SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: a help-centre question is answered from its article
    language: en
    turns:
      - user: How fast is the internet on the fibre plan?
        expect: {agent: product_agent, cites: plans.md, grounded: true, unknown: false}
  - name: a question the articles do not answer
    language: en
    turns:
      - user: Do you sell gift cards for birthdays?
        expect: {cites: false, unknown: true}
  - name: expecting the wrong article
    required: false
    turns:
      - user: How fast is the internet on the fibre plan?
        expect: {cites: faturas.md}
"""


@pytest.mark.django_db
@pytest.mark.sqlite_too
@pytest.mark.usefixtures("multi_agent_for_everyone")
def test_a_saved_suite_checks_the_citations_the_grounding_and_i_dont_know_of_played_turns(telecom):
    source = KnowledgeSource.objects.create(profile=telecom, name="Help centre", language="en")
    document_ingest(source=source, file_name="plans.md", data=PLANS)
    _, cases = conversation_tests_parse(SUITE, name="suite.yaml")

    answered, unknown, wrong = conversation_tests_run(routing_tests_spec(telecom, DRAFT), cases).results

    assert answered.failure_lines() == [] and unknown.failure_lines() == []
    turn = answered.attempts[0].turns[0]
    assert [cited.file_name for cited in turn.seen.cited] == ["plans.md"]
    (line,) = wrong.failure_lines()
    assert line.endswith("cites: expected 'faturas.md', got [\"Plans and internet\"]")
