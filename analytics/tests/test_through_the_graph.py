"""Handoffs made by the real graph are what the analytics count."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def send(api, text):
    response = api.post(
        "/api/gateway/message",
        {"channel": "web", "agent_id": "telecom_contas", "payload": {"text": text, "session_id": "web-001"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_routing_handoff_made_by_the_gateway_is_counted(api, telecom):
    assert send(api, "Minha fatura veio alta")["agent"] == "billing_agent"
    assert send(api, "E o meu pedido?")["agent"] == "orders_agent"  # the router moves the conversation

    assert api.get("/api/analytics/handoffs").json() == {
        "total_handoffs": 1,
        "handoff_paths": [{"from": "billing_agent", "to": "orders_agent", "count": 1}],
        "conversations_with_handoffs": 1,
        "total_conversations": 1,
        "handoff_rate_percentage": 100.0,
    }
    assert api.get("/api/analytics/agents").json() == [
        {"agent": "billing_agent", "turns": 1, "share_percentage": 50.0},
        {"agent": "orders_agent", "turns": 1, "share_percentage": 50.0},
    ]
    methods = api.get("/api/analytics/routing-methods").json()
    assert (methods["methods"][0], methods["total"]) == (
        {"method": "keyword", "count": 2, "share_percentage": 100.0},
        2,
    )
    timeline = api.get("/api/analytics/handoffs/timeline", {"days": 1, "bucket": "hour"}).json()
    assert sum(period["by_kind"]["routing_handoff"] for period in timeline) == 1
    [recent] = api.get("/api/analytics/handoffs/recent").json()
    assert (recent["conversation_key"], recent["kind"]) == ("tenant_a:telecom_contas:web-001", "routing_handoff")
