"""What a turn stores, and in how many statements (conversations/records.py): the messages, the route decision, the
tool calls and the moves go with the conversation's update in one statement on PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.rehearsal import rehearsing
from conversations.graph import run_turn
from conversations.models import Message, ToolCall
from conversations.turn import TurnInput
from routing import snapshot

pytestmark = pytest.mark.django_db

ANSWERS = {
    "consultar_fatura": {"valor_total": "R$ 289,90", "vencimento": "2025-06-10"},
    "consultar_pagamentos": {"pagamentos": []},
}


def invoice_question(tenant, text: str) -> TurnInput:
    profile = snapshot.current().profiles["telecom_contas"]
    return TurnInput(
        tenant_pk=tenant.pk,
        tenant_slug=tenant.slug,
        profile=profile,
        text=text,
        session_id="records",
        context={"msisdn": "5511999999999"},
    )


def test_a_turns_tool_calls_are_stored_with_its_messages_in_the_one_statement_that_hands_the_ticket_on(tenant, telecom):
    first = invoice_question(tenant, "minha fatura veio alta este mês")
    with rehearsing(ANSWERS):
        async_to_sync(run_turn)(first)  # the conversation is created and counted

    with CaptureQueriesContext(connection) as queries, rehearsing(ANSWERS):
        result = async_to_sync(run_turn)(replace(first, text="e a fatura do mês passado, veio alta também?"))

    statements = [query["sql"].split(" ", 1)[0] for query in queries.captured_queries]
    assert statements == ["UPDATE", "WITH"], statements  # the ticket's take, then the turn stored
    answer = Message.objects.get(pk=result.message_id)
    stored = ToolCall.objects.filter(message=answer).order_by("id").values_list("tool", "status")
    assert list(stored) == [("consultar_fatura", "ok"), ("consultar_pagamentos", "ok")]


def test_a_turn_that_recounts_its_conversation_inside_an_open_transaction_joins_it_without_a_savepoint(tenant, telecom):
    """A conversation test plays its turns in a transaction rolled back at its end: a turn's write that needs a
    transaction (here the recount of a conversation whose request went to two specialists) joins it; a savepoint
    would cost two round trips and protect nothing, since a failed write fails the test and nothing goes on in it."""
    two_requests = replace(invoice_question(tenant, "minha fatura veio alta e cadê meu pedido P1?"), session_id="two")
    with CaptureQueriesContext(connection) as queries, rehearsing({**ANSWERS, "consultar_pedido": {"status": "ok"}}):
        async_to_sync(run_turn)(two_requests)

    statements = [query["sql"].split(" ", 1)[0] for query in queries.captured_queries]
    assert connection.in_atomic_block and "WITH" in statements
    assert not {"SAVEPOINT", "RELEASE"} & set(statements), statements
