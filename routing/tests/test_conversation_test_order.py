"""A recorded tool answer is read back with its keys in the order it was written, on every engine: the offline
model lists a tool's fields in the order the tool gave them, so a recorded answer whose order the database changed
(PostgreSQL's ``jsonb`` sorts keys by length) answers differently from the tool it stands for."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile
from releases.models import ConversationTest

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

ANSWER = {"invoice_id": "INV001", "msisdn": "5511999999999", "cliente": "Ana", "valor_total": 289.9, "moeda": "BRL"}


def test_a_tests_and_a_turns_recorded_answers_keep_their_keys_order():
    profile = AgentProfile.objects.create(agent_id="ordered", name="Ordered")
    turn = {"user": "oi", "tool_answers": {"consultar_fatura": ANSWER}, "expect": {"answer_contains": ["x"]}}
    saved = ConversationTest.objects.create(
        profile=profile, name="order", tool_answers={"consultar_fatura": ANSWER}, turns=[turn]
    )

    read = ConversationTest.objects.get(pk=saved.pk)

    assert list(read.tool_answers["consultar_fatura"]) == list(ANSWER)
    assert list(read.turns[0]["tool_answers"]["consultar_fatura"]) == list(ANSWER)
    assert list(read.turns[0]) == ["user", "tool_answers", "expect"]
