"""What a message did to the conversation's open flows, told from ``metadata["conversation"]``: each event as a
phrase, the frames open after it top first, its repair pattern and requests — and what is stored in another shape
is left out, never shown raw."""

from __future__ import annotations

import datetime as dt

import pytest

from routing.stack import STATE, TOPIC, Frame, StackStep
from routing.stack_explained import NOTHING_MOVED, stack_explained, step_explained

PAYMENT = Frame(kind=STATE, name="PAYING", agent="billing_agent", question="Confirma?")
INTERNET = Frame(kind=TOPIC, name="tech_support", agent="tech_agent", text="minha internet caiu")


def step_with(*events: tuple[str, Frame, str], frames: list[Frame] = ()) -> StackStep:
    step = StackStep(frames=list(frames), turn=2, now=dt.datetime(2025, 1, 1, tzinfo=dt.UTC))
    for name, frame, by in events:
        step.event(name, frame, by)
    return step


@pytest.mark.parametrize(
    ("event", "frame", "by", "phrase"),
    [
        ("opened", PAYMENT, "payment_request", "opened the flow PAYING (payment_request)"),
        ("pushed", PAYMENT, "order_tracking", "pushed the flow PAYING under a side question (order_tracking)"),
        ("resumed", PAYMENT, "order_tracking", "resumed the flow PAYING"),
        ("bound", PAYMENT, "reply", "read as the reply to the flow PAYING"),
        ("closed", PAYMENT, "reply", "closed the flow PAYING (its reply ended it)"),
        ("closed", PAYMENT, "skip", "closed the flow PAYING (the customer skipped its question)"),
        ("closed", PAYMENT, "new request", "closed the flow PAYING (the customer asked something new)"),
        ("cancelled", PAYMENT, "cancel", "cancelled the flow PAYING"),
        ("expired", PAYMENT, "expiry",
         "dropped the flow PAYING: it was older than the profile keeps a flow open (messages or minutes)"),
        ("expired", PAYMENT, "depth",
         "dropped the flow PAYING: more flows were open than the profile keeps (stack depth)"),
        ("queued", INTERNET, "multi_topic", "queued the request tech_support for later"),
        ("resumed", INTERNET, "reply", "took up the queued request tech_support"),
        ("cancelled", INTERNET, "reply", "declined the queued request tech_support"),
    ],
)  # fmt: skip
def test_each_event_reads_as_a_phrase(event, frame, by, phrase):
    assert step_explained(step_with((event, frame, by))).events == (phrase,)


def test_the_frames_open_after_the_message_are_listed_top_first_with_what_they_wait_for():
    told = step_explained(step_with(frames=[PAYMENT, INTERNET]))

    assert told.frames == (
        "the queued request tech_support, with tech_agent: “minha internet caiu”",
        "the flow PAYING, with billing_agent, which asked “Confirma?”",
    )


def test_the_summary_puts_the_events_the_repair_and_the_requests_in_one_line():
    told = stack_explained(
        {
            "stack": [],
            "events": [{"event": "cancelled", "frame": {"kind": "state", "name": "W"}, "by": "cancel"}],
            "repair": "cancel",
            "topics": [
                {"intent": "billing", "agent": "billing_agent", "status": "answered"},
                {"intent": "tech", "agent": "tech_agent", "status": "queued"},
            ],
        }
    )

    assert told is not None
    assert told.summary == (
        "cancelled the flow W; repair: cancel — the customer dropped what was open; "
        "2 requests in one message: billing (billing_agent) answered, tech (tech_agent) queued"
    )


def test_a_message_that_moved_nothing_and_met_no_flow_is_not_worth_showing():
    told = stack_explained({"stack": [], "events": [], "repair": None, "topics": []})

    assert told is not None and told.summary == NOTHING_MOVED and not told.worth_showing


@pytest.mark.parametrize("stored", [None, "text", ["a"], 3])
def test_no_conversation_part_tells_nothing(stored):
    assert stack_explained(stored) is None


def test_what_is_stored_in_another_shape_is_left_out():
    told = stack_explained(
        {
            "stack": [
                {"kind": "unknown", "name": "x"},
                "frame",
                {"kind": "state"},
                {"kind": "state", "name": "V", "opened_turn": "third"},
                {"kind": "state", "name": "W"},
            ],
            "events": ["pushed", {"event": 3}, {"event": "pushed", "frame": "W"}, {"event": "bound", "frame": {}}],
            "repair": ["cancel"],
            "topics": [None, "billing"],
        }
    )

    assert told is not None
    assert told.frames == ("the flow W",) and told.events == () and told.repair == "" and told.topics == ()
