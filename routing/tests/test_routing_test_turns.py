"""A saved routing test's earlier turns and the conversation's expectations, as the model checks them: at most ten
turns, each a message within the profile's input limit and an optional expectation, checked key by key like the
test's own; every problem names where it is."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from releases.models import RoutingTestCase
from routing.expectations import ROUTING_TEST_MAX_TURNS, routing_test_expect_errors

pytestmark = pytest.mark.django_db


def saved(profile, **fields) -> RoutingTestCase:
    return RoutingTestCase(
        profile=profile, name="conversa", message="sim", expect=fields.pop("expect", {"method": "state"}), **fields
    )


def errors(case: RoutingTestCase) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        case.full_clean()
    return caught.value.message_dict


def test_a_conversation_with_expectations_per_turn_is_accepted(telecom):
    case = saved(
        telecom,
        turns=[
            {"message": "Minha fatura veio alta", "expect": {"intent": "billing_invoice_explanation"}},
            {"message": "antes disso, cadê meu pedido?", "expect": {"events": ["pushed", "resumed"], "topics": ["x"]}},
            {"message": "obrigado!"},
        ],
        expect={"state_after": "", "repair": "cancel", "events": ["cancelled"]},
    )

    case.full_clean()


@pytest.mark.parametrize(
    "turns, problem",
    [
        ("sim", "turns: must be a list of turns"),
        (["sim"], "turns[0]: must be a mapping with message and, optionally, expect."),
        ([{"expect": {"intent": "a"}}], "turns[0].message: required text."),
        ([{"message": "  "}], "turns[0].message: required text."),
        ([{"message": "oi", "state": "X"}], "turns[0].state: unknown key 'state' (allowed: message, expect)."),
        ([{"message": "oi", "expect": {}}], "turns[0].expect: must be a mapping of one or more of: intent,"),
        ([{"message": "oi", "expect": {"events": ["pushd"]}}], "turns[0].expect.events: no event 'pushd'"),
        ([{"message": "oi", "expect": {"intnt": "a"}}], "turns[0].expect.intnt: unknown key 'intnt'"),
        (
            [{"message": f"oi {n}"} for n in range(ROUTING_TEST_MAX_TURNS + 1)],
            "turns: at most 10 turns before the test's message (11 given).",
        ),
    ],
)
def test_bad_turns_are_refused_naming_where(telecom, turns, problem):
    found = errors(saved(telecom, turns=turns))

    assert any(line.startswith(problem) for line in found["turns"]), found


def test_a_turns_message_is_bounded_by_the_profiles_input_limit(telecom, settings):
    settings.MAX_INPUT_CHARS = 50
    long = {"message": "x" * 51}

    assert errors(saved(telecom, turns=[long]))["turns"] == [
        "turns[0].message: longer than the profile's limit of 50 characters (51)."
    ]
    telecom.guardrails = {"max_input_chars": 60}
    saved(telecom, turns=[long]).full_clean()


@pytest.mark.parametrize(
    "expect, problem",
    [
        ({"events": "pushed"}, "events: must be a list of one or more of: opened, pushed, resumed, bound, closed,"),
        ({"events": []}, "events: must be a list of one or more of"),
        ({"events": ["bound", "popped"]}, "events: no event 'popped' (events: opened,"),
        ({"repair": "undo"}, "repair: must be one of: cancel, correct, repeat, skip, already_told."),
        ({"state_after": None}, 'state_after: must be a text (the state after the message; "" for none).'),
        ({"topics": ["billing", ""]}, "topics: must be a list of one or more intents."),
        ({"intent": ""}, "intent: must be a non-empty text."),
    ],
)
def test_the_conversations_expectations_are_checked_by_key(expect, problem):
    assert [error for error in routing_test_expect_errors(expect) if error.startswith(problem)], (
        routing_test_expect_errors(expect)
    )


def test_no_state_after_the_message_is_a_valid_expectation():
    assert routing_test_expect_errors({"state_after": ""}) == []
