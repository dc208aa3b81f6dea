"""The conversation stack over the WebSocket chat, on the demo as shipped: a side question inside a flow is answered
and the flow resumed, a cancel ends the flow and its state, a correction redoes the lookup with the new value, and a
two-topic message in router mode answers both. The REST side of the same walks: conversations/tests/
test_conversation_stack.py."""

from __future__ import annotations

import pytest

from chat.tests.test_websocket import chat, path
from conversations.models import Conversation

MSISDN = "5511999999999"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def rolled_out(multi_agent_for_everyone):
    """Every customer on the multi-agent graph, as the REST walks' gateway is."""


def turns(key: str, agent_id: str, session: str, *texts: str, **context) -> list[dict]:
    """Each text sent on one socket, one after another; the ``done`` event of each."""
    frames = [{"text": text, "user_id": f"{session}-user", "context": context} for text in texts]
    return [events[-1] for events in chat(path(key, agent_id=agent_id, session_id=session), *frames)]


def stack_events(done: dict) -> list[str]:
    return [event["event"] for event in done["metadata"]["conversation"]["events"]]


def state_of(done: dict) -> str:
    return Conversation.objects.get(conversation_key=done["conversation_key"]).state


def test_a_side_question_inside_the_payment_flow_is_answered_and_the_flow_resumed_on_the_socket(
    tenant_key, seeded_demo
):
    opened, asked, replied = turns(
        tenant_key.raw,
        "telecom_contas",
        "ws-digress",
        "Quero pagar minha fatura com pix",
        "antes disso, qual o vencimento da fatura?",
        "voltando ao pagamento: já paguei",
        msisdn=MSISDN,
    )

    assert "opened" in stack_events(opened)
    assert stack_events(asked)[:2] == ["pushed", "resumed"]
    assert "Voltando ao que estávamos vendo" in asked["answer"]
    assert [frame["name"] for frame in asked["metadata"]["conversation"]["stack"]] == ["WAITING_PAYMENT_CONFIRMATION"]
    assert replied["agent"] == "billing_agent"
    assert replied["metadata"]["route_decision"]["intent"] == "billing_payment_confirmation"
    assert "bound" in stack_events(replied)
    assert state_of(replied) == ""


def test_a_cancel_on_the_socket_ends_the_flow_and_its_state(tenant_key, seeded_demo):
    opened, cancelled, after = turns(
        tenant_key.raw,
        "telecom_contas",
        "ws-cancel",
        "I want to pay my bill with pix",
        "never mind, cancel that",
        "yes",
        msisdn=MSISDN,
    )

    assert [frame["name"] for frame in opened["metadata"]["conversation"]["stack"]] == ["WAITING_PAYMENT_CONFIRMATION"]
    assert cancelled["metadata"]["conversation"]["repair"] == "cancel"
    assert stack_events(cancelled) == ["cancelled"]
    assert "I have dropped that" in cancelled["answer"]
    assert cancelled["metadata"]["conversation"]["stack"] == [] and state_of(cancelled) == ""
    assert after["metadata"]["route_decision"]["method"] != "state"  # a "yes" confirms nothing any more


def test_a_correction_on_the_socket_redoes_the_lookup_with_the_new_value(tenant_key, seeded_demo):
    looked_up, corrected = turns(
        tenant_key.raw,
        "retail_orders",
        "ws-correct",
        "¿Dónde está mi pedido P100?",
        "perdón, me equivoqué, es el pedido P200",
        order_id="P100",
    )

    assert looked_up["agent"] == "orders_agent"
    assert corrected["metadata"]["conversation"]["repair"] == "correct"
    assert corrected["agent"] == "orders_agent"
    arguments = [call.get("arguments") or {} for call in corrected["metadata"]["mcp_results"]]
    assert {args["order_id"] for args in arguments if "order_id" in args} == {"P200"}


def test_two_requests_in_one_message_on_the_socket_in_router_mode_are_both_answered(tenant_key, seeded_demo):
    (done,) = turns(
        tenant_key.raw,
        "telecom_contas",
        "ws-topics",
        "minha internet caiu e ainda veio a conta mais cara",
        msisdn=MSISDN,
    )

    topics = done["metadata"]["conversation"]["topics"]
    assert len(topics) == 2 and {topic["status"] for topic in topics} == {"answered"}
    assert {part["agent"] for part in done["metadata"]["supervisor"]} == {topic["agent"] for topic in topics}
