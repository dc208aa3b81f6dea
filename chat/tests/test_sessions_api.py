"""Ending a session and clearing its history through the sessions API."""

from __future__ import annotations

import pytest
from django.utils.dateparse import parse_datetime

from agents.models import McpServer
from common.config_version import config_version_bump
from common.errors import ERROR_CONVERSATION_NOT_FOUND
from conversations.models import Conversation, Message, RouteDecisionRecord, ToolCall
from handoffs.models import Handoff, HandoffKind
from handoffs.services import Move, moves_record
from tests.factories import StatePolicyFactory

pytestmark = pytest.mark.django_db

KEY = "tenant_a:telecom_contas:web-001"
SESSION_URL = f"/api/sessions/{KEY}"
CLEAR_URL = f"{SESSION_URL}/clear"
MESSAGES_URL = f"{SESSION_URL}/messages"
INVOICE_CONTEXT = {"msisdn": "5511999999999", "invoice_id": "INV001"}
SUMMARY = "O cliente 5511999999999 contesta a fatura INV001 de R$ 289,90."

LIVE_STATE = {
    "state": "WAITING_PAYMENT_CONFIRMATION",
    "active_intent": "billing_invoice_explanation",
    "sub_conversation": {"specialist": "billing_agent", "coordinator": "orders_agent", "context": "fatura"},
    "pending_result": {"status": "completed", "summary": "segunda via enviada"},
    "pending_permission": {"tool": "consultar_pagamentos", "specialist": "billing_agent"},
    "granted_permissions": ["consultar_fatura"],
    "turn_tickets_issued": 7,
    "turn_tickets_done": 6,
}


def send(api, text, *, session_id="web-001", **payload):
    response = api.post(
        "/api/gateway/message",
        {
            "channel": "web",
            "agent_id": "telecom_contas",
            "payload": {"text": text, "session_id": session_id, "user_id": "u1", **payload},
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def history(conversation: Conversation) -> tuple[int, int, int, int]:
    return (
        Message.objects.filter(conversation=conversation).count(),
        RouteDecisionRecord.objects.filter(conversation=conversation).count(),
        ToolCall.objects.filter(conversation=conversation).count(),
        Handoff.objects.filter(conversation=conversation).count(),
    )


@pytest.fixture
def unreachable_tools(telecom):
    """Tool calls fail fast (nothing listens on port 9) but are still stored, like any other."""
    McpServer.objects.update(endpoint="http://127.0.0.1:9/mcp", timeout=2)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals


@pytest.fixture
def conversation(api, unreachable_tools):
    """Two turns (billing with two tool calls, then orders: a routing handoff) and a delegation with a summary."""
    send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)
    send(api, "E o meu pedido?")
    conversation = Conversation.objects.get(conversation_key=KEY)
    moves_record(
        conversation_id=conversation.pk,
        tenant_id=conversation.tenant_id,
        profile_id=conversation.profile_id,
        moves=[
            Move(
                "orders_agent",
                "billing_agent",
                HandoffKind.DELEGATION,
                reason="Second invoice",
                context_summary=SUMMARY,
            )
        ],
    )
    assert history(conversation) == (4, 2, 2, 2)
    return conversation


def with_live_state(conversation: Conversation) -> Conversation:
    Conversation.objects.filter(pk=conversation.pk).update(**LIVE_STATE)
    conversation.refresh_from_db()
    return conversation


# -- ending a session ---------------------------------------------------------------------------


def test_ending_a_session_forgets_its_live_state_and_keeps_its_history(api, conversation):
    with_live_state(conversation)

    response = api.delete(SESSION_URL)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body.keys() == {"conversation_key", "ended", "ended_at", "outcome"}
    assert (body["conversation_key"], body["ended"]) == (KEY, True)
    assert body["outcome"] == "abandoned"  # open, and nothing closed it: decided at once (docs/analytics.md)
    conversation.refresh_from_db()
    assert parse_datetime(body["ended_at"]) == conversation.ended_at
    assert (conversation.state, conversation.active_specialist, conversation.active_intent) == ("", "", "")
    assert (conversation.sub_conversation, conversation.pending_result, conversation.pending_permission) == (
        None,
        None,
        None,
    )
    assert conversation.granted_permissions == []
    assert (conversation.turn_tickets_issued, conversation.turn_tickets_done) == (7, 6)
    assert conversation.message_count == 4
    assert history(conversation) == (4, 2, 2, 2)
    assert Handoff.objects.get(kind=HandoffKind.DELEGATION).context_summary == SUMMARY


def test_the_session_shows_its_live_state_and_when_it_was_ended(api, conversation):
    with_live_state(conversation)
    before = api.get(MESSAGES_URL).json()
    assert before["sub_conversation"] == LIVE_STATE["sub_conversation"]
    assert before["pending_result"] == LIVE_STATE["pending_result"]
    assert before["pending_permission"] == LIVE_STATE["pending_permission"]
    assert before["granted_permissions"] == ["consultar_fatura"]
    assert before["ended_at"] is None

    ended_at = api.delete(SESSION_URL).json()["ended_at"]

    after = api.get(MESSAGES_URL).json()
    assert (after["sub_conversation"], after["pending_result"], after["pending_permission"]) == (None, None, None)
    assert (after["state"], after["active_specialist"], after["granted_permissions"]) == ("", "", [])
    assert after["ended_at"] == ended_at
    assert len(after["messages"]) == 4


def test_a_message_after_the_end_starts_fresh_on_the_same_conversation(api, telecom):
    billing = telecom.specialists.get(name="billing_agent")
    intent = telecom.intents.get(name="billing_invoice_explanation")
    intent.next_state = "WAITING_PAYMENT_CONFIRMATION"
    intent.save()
    StatePolicyFactory(profile=telecom, state="WAITING_PAYMENT_CONFIRMATION", specialist=billing, intent=intent)
    send(api, "Quero a segunda via do boleto")
    assert Conversation.objects.get().state == "WAITING_PAYMENT_CONFIRMATION"

    assert api.delete(SESSION_URL).status_code == 200
    body = send(api, "sim")

    assert body["conversation_key"] == KEY
    decision = body["metadata"]["route_decision"]
    assert decision["method"] != "state"  # the state that would have kept "sim" with billing is gone
    assert decision["handoff"] is False  # no active specialist to hand off from
    conversation = Conversation.objects.get()
    assert conversation.message_count == 4
    assert [m["content"] for m in api.get(MESSAGES_URL).json()["messages"] if m["role"] == "user"] == [
        "Quero a segunda via do boleto",
        "sim",
    ]
    assert Handoff.objects.count() == 0


def test_a_staff_session_may_end_any_tenants_session(client, staff_user, conversation):
    client.force_login(staff_user)

    response = client.delete(SESSION_URL)

    assert response.status_code == 200, response.content
    assert response.json()["ended"] is True
    assert Conversation.objects.get().ended_at is not None


# -- clearing a session's history -----------------------------------------------------------------


def test_clearing_a_session_deletes_its_messages_decisions_and_tool_calls(api, conversation):
    send(api, "Minha fatura veio alta", session_id="web-002", context=INVOICE_CONTEXT)
    other = Conversation.objects.get(session_id="web-002")
    assert history(other) == (2, 1, 2, 0)

    response = api.post(CLEAR_URL)

    assert response.status_code == 200, response.content
    assert response.json() == {
        "conversation_key": KEY,
        "cleared": {"messages": 4, "route_decisions": 2, "tool_calls": 2},
    }
    conversation.refresh_from_db()
    assert conversation.message_count == 0
    assert history(conversation) == (0, 0, 0, 2)
    assert history(other) == (2, 1, 2, 0)


def test_clearing_keeps_the_handoff_rows_with_their_summaries_blanked(api, conversation):
    api.post(CLEAR_URL)

    rows = Handoff.objects.filter(conversation=conversation).order_by("id")
    assert [(h.from_agent, h.to_agent, h.kind) for h in rows] == [
        ("billing_agent", "orders_agent", HandoffKind.ROUTING),
        ("orders_agent", "billing_agent", HandoffKind.DELEGATION),
    ]
    assert [h.context_summary for h in rows] == ["", ""]
    assert rows[1].reason == "Second invoice"
    body = api.get(MESSAGES_URL).json()
    assert (body["messages"], body["route_decisions"]) == ([], [])
    assert len(body["handoffs"]) == 2


def test_clearing_keeps_the_live_state_and_the_session_goes_on(api, conversation):
    api.post(CLEAR_URL)
    conversation.refresh_from_db()
    assert (conversation.active_specialist, conversation.ended_at) == ("orders_agent", None)

    send(api, "Onde está meu pedido?")

    conversation.refresh_from_db()
    assert conversation.message_count == 2
    assert history(conversation)[:2] == (2, 1)


def test_a_staff_session_may_clear_any_tenants_session(client, staff_user, conversation):
    client.force_login(staff_user)

    response = client.post(CLEAR_URL)

    assert response.status_code == 200, response.content
    assert response.json()["cleared"]["messages"] == 4


# -- who may ------------------------------------------------------------------------------------


def end(client, key=KEY):
    return client.delete(f"/api/sessions/{key}")


def clear(client, key=KEY):
    return client.post(f"/api/sessions/{key}/clear")


@pytest.mark.parametrize("action", [end, clear])
def test_another_tenants_session_is_not_found_and_left_alone(outsider_api, conversation, action):
    with_live_state(conversation)

    response = action(outsider_api)

    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "not_found",
        "message": ERROR_CONVERSATION_NOT_FOUND,
        "fields": {"conversation_key": [ERROR_CONVERSATION_NOT_FOUND]},
    }
    conversation.refresh_from_db()
    assert (conversation.state, conversation.ended_at, conversation.message_count) == (LIVE_STATE["state"], None, 4)
    assert history(conversation) == (4, 2, 2, 2)
    assert Handoff.objects.get(kind=HandoffKind.DELEGATION).context_summary == SUMMARY


@pytest.mark.parametrize("action", [end, clear])
def test_an_unknown_session_is_not_found(api, telecom, action):
    response = action(api, "tenant_a:telecom_contas:nope")

    assert response.status_code == 404
    assert response.json()["error"]["fields"] == {"conversation_key": [ERROR_CONVERSATION_NOT_FOUND]}


@pytest.mark.parametrize("action", [end, clear])
def test_a_signed_in_user_who_is_not_staff_finds_no_session(client, django_user_model, conversation, action):
    client.force_login(django_user_model.objects.create_user("visitor", "visitor@example.com", "visitor-password"))

    assert action(client).status_code == 404
    assert history(conversation) == (4, 2, 2, 2)


@pytest.mark.parametrize("action", [end, clear])
def test_a_request_without_a_key_is_refused(client, conversation, action):
    response = action(client)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    conversation.refresh_from_db()
    assert (conversation.active_specialist, conversation.ended_at) == ("orders_agent", None)
    assert history(conversation) == (4, 2, 2, 2)


@pytest.mark.parametrize("action", [end, clear])
def test_a_request_with_a_wrong_key_is_refused(client, conversation, action):
    client.defaults["HTTP_AUTHORIZATION"] = "Bearer wrong"

    assert action(client).status_code == 401
    assert history(conversation) == (4, 2, 2, 2)


def test_both_endpoints_are_in_the_openapi_schema(client):
    schema = client.get("/api/schema/").content.decode()
    assert "/api/sessions/{conversation_key}/clear" in schema
    assert "SessionEnded" in schema
    assert "SessionCleared" in schema
