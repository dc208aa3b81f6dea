"""The graph's two database edges hand their connection back: none is held while a model answers."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from conversations.models import Message
from conversations.turn import Turn, TurnInput
from conversations.turn_store import conversation_load, turn_persist, turn_start
from routing import snapshot


def _turn(tenant, session_id: str) -> Turn:
    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(
        tenant_pk=tenant.pk,
        tenant_slug=tenant.slug,
        profile=profile,
        text="Minha fatura veio alta",
        session_id=session_id,
    )
    turn = Turn(input=data, mode=profile.effective_mode)
    turn.guardrails.text_to_store = turn.guardrails.sanitized_text = data.text
    turn.answer = "Resposta"
    assert turn_start(turn)  # the ticket, and the conversation read with it
    return turn


@pytest.mark.django_db(transaction=True)
def test_loading_and_persisting_a_turn_each_hand_the_connection_back(tenant, telecom):
    turn = _turn(tenant, "conn-1")
    assert connection.connection is None  # taking the ticket and reading the conversation gave it back too
    turn_persist(turn)
    assert connection.connection is None

    conversation_load(_turn(tenant, "conn-1"), None)
    assert connection.connection is None
    assert Message.objects.filter(conversation__session_id="conn-1").count() == 2


@pytest.mark.django_db
def test_inside_a_transaction_the_connection_is_left_alone(tenant, telecom):
    with transaction.atomic():
        turn_persist(_turn(tenant, "conn-2"))
        conversation_load(_turn(tenant, "conn-2"), None)
        assert connection.connection is not None
        assert Message.objects.filter(conversation__session_id="conn-2").count() == 2
