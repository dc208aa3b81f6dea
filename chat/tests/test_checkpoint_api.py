"""``GET /api/sessions/{conversation_key}/checkpoint``: the conversation's live state after a delegation
and after a permission question, on the demo data with its MCP servers running; another tenant's key finds nothing.
"""

from __future__ import annotations

import pytest

from common.errors import ERROR_CONVERSATION_NOT_FOUND

pytestmark = pytest.mark.django_db

MSISDN = "5511999999999"


@pytest.fixture
def demo(seeded_demo):
    """The demo configuration with its MCP servers running (tests/mcp_fixtures.py). Asked for before the keys: the
    demo reads the tenants, so seeded after a key's tenant was made it is seeded for real, not restored."""


def say(api, text: str, *, agent_id: str, session: str, **context) -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": agent_id, "payload": {"text": text, "session_id": session, "context": context}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def checkpoint(api, key: str):
    return api.get(f"/api/sessions/{key}/checkpoint")


def test_after_a_delegation_the_checkpoint_shows_the_open_sub_conversation(demo, api, django_assert_max_num_queries):
    key = say(api, "Minha fatura veio alta", agent_id="telecom_assistente", session="cp-1", msisdn=MSISDN)[
        "conversation_key"
    ]

    with django_assert_max_num_queries(3):
        response = checkpoint(api, key)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["conversation_key"] == key
    assert (body["active_specialist"], body["active_backend"]) == ("billing_agent", "")
    assert body["sub_conversation"]["specialist"] == "billing_agent"
    assert body["sub_conversation"]["coordinator"] == "assistente_virtual"
    assert (body["pending_permission"], body["granted_permissions"]) == (None, [])
    assert (body["message_count"], body["turn_tickets_issued"], body["turn_tickets_done"]) == (2, 1, 1)
    assert {"state", "active_intent", "pending_result", "goal_state", "cohort", "ended_at", "updated_at"} <= body.keys()


def test_after_a_permission_question_the_checkpoint_shows_it_pending_then_granted(demo, api):
    asked = say(api, "Estou sem sinal no celular", agent_id="telecom_contas", session="cp-2", msisdn=MSISDN)
    key = asked["conversation_key"]

    pending = checkpoint(api, key).json()
    say(api, "Sim, pode", agent_id="telecom_contas", session="cp-2")
    granted = checkpoint(api, key).json()

    assert pending["active_specialist"] == "support_agent"
    assert pending["pending_permission"]["tool"] == "diagnosticar_linha"
    assert pending["granted_permissions"] == []
    assert granted["pending_permission"] is None
    assert granted["granted_permissions"] == ["diagnosticar_linha"]
    assert (granted["message_count"], granted["turn_tickets_done"]) == (4, 2)


def test_another_tenants_conversation_is_not_found(demo, api, outsider_api):
    key = say(api, "Minha fatura veio alta", agent_id="telecom_assistente", session="cp-3", msisdn=MSISDN)[
        "conversation_key"
    ]

    response = checkpoint(outsider_api, key)

    assert response.status_code == 404
    assert response.json()["error"]["message"] == ERROR_CONVERSATION_NOT_FOUND
    assert checkpoint(api, "tenant_a:telecom_assistente:nobody").status_code == 404
