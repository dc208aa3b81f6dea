"""The conversation stack's lines at the end of an answer (conversations/stack_turn.py): written in the customer's
language when there is one to write, and no language switched to when there is none."""

from __future__ import annotations

import pytest
from django.utils import timezone, translation

from conversations.stack_turn import answer_lines
from conversations.turn import Turn, TurnInput
from routing import snapshot
from routing.public import STATE, Frame, StackStep

pytestmark = pytest.mark.django_db


def turn_with(step: StackStep, tenant) -> Turn:
    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(tenant_pk=tenant.pk, tenant_slug=tenant.slug, profile=profile, text="", session_id="lines")
    turn = Turn(input=data, mode=profile.effective_mode)
    turn.language.code = "en"
    turn.stack.step = step
    return turn


@pytest.fixture
def activated(monkeypatch) -> list[str]:
    """The languages switched to (``translation.override`` activates one on entry, the one before it on exit)."""
    switched: list[str] = []
    activate = translation.activate

    def counted(language: str) -> None:
        switched.append(language)
        activate(language)

    monkeypatch.setattr(translation, "activate", counted)
    return switched


def test_a_message_that_resumes_and_queues_nothing_ends_its_answer_with_no_line_and_switches_no_language(
    tenant, telecom, activated
):
    step = StackStep(frames=[], turn=3, now=timezone.now())

    assert answer_lines(turn_with(step, tenant)) == ""
    assert activated == []


def test_a_request_queued_for_later_and_a_flow_resumed_are_still_told_in_the_customers_language(
    tenant, telecom, activated
):
    queued = Frame(kind="topic", name="orders_status", agent="orders_agent", text="where is my order P100")
    step = StackStep(frames=[queued], turn=3, now=timezone.now(), queued=[queued])
    step.resume = Frame(kind=STATE, name="WAITING_PAYMENT_CONFIRMATION", agent="billing_agent", question="Paid yet?")

    lines = answer_lines(turn_with(step, tenant))

    assert lines == (
        "Back to where we were: Paid yet? Next, your other request: “where is my order P100”. Shall I look into it now?"
    )
    assert activated[0] == "en"  # then back to the language before it
