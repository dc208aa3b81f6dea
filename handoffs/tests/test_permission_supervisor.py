"""The permission gate inside a supervisor plan (offline model, tools over real MCP)."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile, McpTool
from conversations.models import Conversation

pytestmark = pytest.mark.django_db

CONTEXT = {"msisdn": "5511999999999", "order_id": "P100"}


def send(api, text, context=None):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": "plan-1", "context": context or {}}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def supervised(live_mcp, telecom):
    AgentProfile.objects.filter(pk=telecom.pk).update(routing_mode="supervisor")
    tool = McpTool.objects.get(name="consultar_pagamentos")
    tool.needs_permission = True
    tool.save()  # also moves the routing config version on


def test_a_plans_part_asks_for_permission_and_the_reply_goes_to_that_specialist(api, supervised):
    body = send(api, "Meu pedido atrasou e minha fatura veio duplicada", CONTEXT)

    assert body["metadata"]["route_decision"]["agents"] == ["billing_agent", "orders_agent"]
    assert "autorização para usar consultar_pagamentos" in body["answer"]
    assert "P100" in body["answer"]  # the other part answered as usual
    statuses = {r["tool"]: r["status"] for r in body["metadata"]["mcp_results"]}
    assert statuses["consultar_pagamentos"] == "permission_required"
    assert statuses["consultar_fatura"] == "ok"
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert (conversation.pending_permission["tool"], conversation.pending_permission["agent"]) == (
        "consultar_pagamentos",
        "billing_agent",
    )

    granted = send(api, "sim")
    assert granted["agent"] == "billing_agent"
    assert granted["metadata"]["permission"] == {"tool": "consultar_pagamentos", "reply": "granted"}
    assert {r["tool"]: r["status"] for r in granted["metadata"]["mcp_results"]}["consultar_pagamentos"] == "ok"


def test_a_granted_tool_runs_in_a_plan_without_asking_again(api, supervised):
    send(api, "Meu pedido atrasou e minha fatura veio duplicada", CONTEXT)
    send(api, "sim")

    again = send(api, "Meu pedido atrasou e minha fatura veio duplicada", CONTEXT)
    statuses = {r["tool"]: r["status"] for r in again["metadata"]["mcp_results"]}
    assert statuses["consultar_pagamentos"] == "ok"
    assert "autorização" not in again["answer"]
