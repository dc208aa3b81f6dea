"""What a turn stores, and in how many statements (conversations/records.py): the messages, the route decision, the
tool calls and the moves go with the conversation's update in one statement on PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.db.models import Field
from django.test.utils import CaptureQueriesContext

from common.infra import fastjson
from common.rehearsal import rehearsing
from conversations.graph import run_turn
from conversations.models import Message, RouteDecisionRecord, ToolCall
from conversations.records import TurnRecord, _turn_statement, row_new, turn_rows
from conversations.turn import LIMIT_RESPONSE, TurnInput
from routing import snapshot
from routing.public import RouteDecision
from tests.stock_paths import fast_path_only

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


def row_columns(row) -> dict:
    return {each.attname: getattr(row, each.attname) for each in type(row)._meta.concrete_fields}


@pytest.mark.parametrize(
    ("model", "values"),
    [
        (Message, {"conversation_id": 7, "role": "user", "content": "oi", "metadata": {"channel": "web"}}),
        (Message, {"conversation_id": 7, "role": "assistant", "prompt_tokens": 12, "judge_score": 0.5, "step": 2}),
        (RouteDecisionRecord, {"conversation_id": 7, "mode": "router", "intent": "billing", "confidence": 0.9}),
        (ToolCall, {"conversation_id": 7, "tool": "consultar_fatura", "arguments": {"msisdn": "5511"}}),
        (ToolCall, {}),
    ],
)
def test_a_row_built_by_position_holds_what_the_keyword_constructor_gives_it(model, values):
    built, keyworded = row_new(model, **values), model(**values)

    assert row_columns(built) == row_columns(keyworded)
    assert built._state.adding and built.pk is None
    again = row_new(model, **values)
    for each in model._meta.concrete_fields:  # a default made for each row (a dict, a list) is the row's own
        if isinstance(getattr(built, each.attname), dict | list) and each.attname not in values:
            assert getattr(again, each.attname) is not getattr(built, each.attname)


def test_building_a_turns_rows_makes_no_columns_constant_default_again(monkeypatch):
    """A turn's rows take every column's constant default as worked out once per model: Django's keyword
    constructor made each left-out column's default again for every row (ten for the customer's message, three for the
    answer, two for a decision)."""
    record = TurnRecord(
        conversation_id=7,
        tenant_id=1,
        profile_id=2,
        text="minha fatura veio alta",
        answer="Sua fatura de R$ 289,90 vence dia 10.",
        agent="billing_agent",
        mode="router",
        metadata={"mode": "router"},
        decision=RouteDecision(route="billing_agent", agent="billing_agent", intent="billing", method="keyword"),
        tool_calls=[
            {
                "tool": "consultar_fatura",
                "server": "telecom",
                "arguments": {},
                "status": "ok",
                "latency_ms": 3.0,
                "result": {},
                "error": None,
            }
        ],
    )
    turn_rows(record)  # each model's defaults worked out
    made: list[str] = []
    get_default = Field.get_default

    def counted(self):
        made.append(self.attname)
        return get_default(self)

    monkeypatch.setattr(Field, "get_default", counted)
    rows = turn_rows(record)

    assert made == []
    assert [message.role for message in rows.messages] == ["user", "assistant"]
    assert (rows.messages[0].step, rows.messages[0].agent, rows.messages[0].latency_ms) == (0, "", None)
    assert rows.decision is not None and rows.decision.message_id is None  # linked once the messages have ids
    assert rows.tool_calls[0].error == ""


@fast_path_only
def test_a_turns_statement_is_made_once_for_its_shape_and_holds_each_turns_own_values():
    decision = RouteDecision(route="billing_agent", agent="billing_agent", intent="billing", method="keyword")
    records = [
        TurnRecord(
            conversation_id=7,
            tenant_id=1,
            profile_id=2,
            text=text,
            answer="Sua fatura vence dia 10.",
            agent="billing_agent",
            mode="router",
            metadata={"mode": "router"},
            decision=decision,
        )
        for text in ("minha fatura veio alta", "e a do mês passado?")
    ]
    updates = {"state": "billing", "language": "pt"}

    (first, first_params), (second, second_params) = (
        _turn_statement(turn_rows(record), conversation_pk=7, ticket=ticket, updates=updates)
        for ticket, record in enumerate(records)
    )

    assert second is first  # joined once for the shape: the same text, its hash kept downstream
    assert "minha fatura veio alta" in first_params and "e a do mês passado?" in second_params
    assert "e a do mês passado?" not in first_params


def test_a_turns_metadata_is_encoded_once_for_its_bound_and_stored_as_encoded(tenant, telecom, monkeypatch):
    first = invoice_question(tenant, "minha fatura veio alta este mês")
    with rehearsing(ANSWERS):
        async_to_sync(run_turn)(first)
    encoded = []
    dumps = fastjson.dumps

    def counted(value, **kwargs):
        written = dumps(value, **kwargs)
        if isinstance(value, dict) and "route_decision" in value:  # the answer's metadata
            encoded.append(written)
        return written

    monkeypatch.setattr(fastjson, "dumps", counted)

    with rehearsing(ANSWERS):
        result = async_to_sync(run_turn)(replace(first, text="e a fatura do mês passado, veio alta também?"))

    assert len(encoded) == 1  # its size; the jsonb column takes those bytes (SQLite's column is json.dumps's)
    stored = Message.objects.get(pk=result.message_id).metadata
    assert stored == orjson.loads(encoded[0]) and stored["route_decision"]["intent"] == result.metadata["intent"]
    assert stored["mcp_results"] == result.metadata["mcp_results"]


def test_metadata_that_does_not_fit_is_cut_and_stored_as_cut_without_the_bytes_of_its_first_encoding(
    tenant, telecom, settings
):
    settings.RESPONSE_MAX_BYTES = 4_096
    first = invoice_question(tenant, "minha fatura veio alta este mês")
    answers = {**ANSWERS, "consultar_fatura": {"valor_total": "R$ 289,90", "detalhe": "x" * 20_000}}
    with rehearsing(answers):
        result = async_to_sync(run_turn)(first)

    stored = Message.objects.get(pk=result.message_id).metadata
    assert [hit["limit"] for hit in stored["limits"]][-1] == LIMIT_RESPONSE
    assert stored["limits"] == result.metadata["limits"] and len(fastjson.dumps(stored)) < 4_096


def test_a_turns_rows_carry_its_tenant_and_the_language_it_was_read_in_and_keep_it_when_the_language_changes(
    tenant, telecom
):
    """The analytics count a turn's messages and route decision under its tenant and language without reading the
    conversation: the rows repeat them. A later turn in another language leaves the earlier rows as they were."""
    first = invoice_question(tenant, "minha fatura veio alta este mês")
    with rehearsing(ANSWERS):
        before = async_to_sync(run_turn)(first)
        after = async_to_sync(run_turn)(
            replace(first, text="and the invoice of last month, was it high?", language="en")
        )

    answer = Message.objects.get(pk=before.message_id)  # the first turn's last message
    conversation = answer.conversation
    assert conversation.language == "en" and Message.objects.get(pk=after.message_id).conversation_id == conversation.pk
    messages = Message.objects.filter(conversation=conversation)
    decisions = RouteDecisionRecord.objects.filter(conversation=conversation)
    turns = [
        {*messages.filter(pk__lte=answer.pk).values_list("tenant_id", "language")}
        | {*decisions.filter(message_id__lte=answer.pk).values_list("tenant_id", "language")},
        {*messages.filter(pk__gt=answer.pk).values_list("tenant_id", "language")}
        | {*decisions.filter(message_id__gt=answer.pk).values_list("tenant_id", "language")},
    ]
    assert turns == [{(tenant.pk, "pt")}, {(tenant.pk, "en")}]
    assert decisions.count() == 2
    calls = ToolCall.objects.filter(conversation=conversation)
    assert calls.exists() and set(calls.values_list("tenant_id", flat=True)) == {tenant.pk}
