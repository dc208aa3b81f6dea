"""The permission gate with a real model path (scripted OpenAI-compatible server, tools over real MCP)."""

from __future__ import annotations

import json

import pytest

from agents.llm import tool_data_read
from agents.models import McpTool
from conversations.models import Conversation, ToolCall

pytestmark = pytest.mark.django_db

CONTEXT = {"msisdn": "5511999999999"}


@pytest.fixture
def gated(live_mcp):
    tool = McpTool.objects.get(name="consultar_pagamentos")
    tool.needs_permission = True
    tool.save()
    return tool


def send(api, text, *, session="perm-1", context=None):
    response = api.post(
        "/api/gateway/message",
        {
            "channel": "api",
            "agent_id": "telecom_contas",
            "payload": {"text": text, "session_id": session, "context": context or {}},
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def ask_payments(llm):
    llm.reply_tool_call("consultar_pagamentos", {"msisdn": "5511999999999"})


def test_the_model_calling_a_gated_tool_gets_the_user_asked_and_nothing_runs(api, gated, scripted_llm):
    ask_payments(scripted_llm)

    body = send(api, "Minha conta foi paga?", context=CONTEXT)

    assert "autorização" in body["answer"] and "consultar_pagamentos" in body["answer"]
    assert len(scripted_llm.requests) == 1  # the run stopped at the call: the model is not asked again
    assert [(r["tool"], r["status"]) for r in body["metadata"]["mcp_results"]] == [
        ("consultar_pagamentos", "permission_required")
    ]
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.pending_permission["tool"] == "consultar_pagamentos"
    assert conversation.pending_permission["context"] == {"msisdn": "5511999999999"}


def test_a_grant_reaches_the_model_runs_the_tool_and_is_remembered(api, gated, scripted_llm):
    ask_payments(scripted_llm)
    send(api, "Minha conta foi paga?", context=CONTEXT)

    ask_payments(scripted_llm)
    scripted_llm.reply("Sim: a fatura INV000 foi paga duas vezes.")
    body = send(api, "Pode sim")  # the context is not sent again: the waiting request kept it

    assert body["answer"] == "Sim: a fatura INV000 foi paga duas vezes."
    request = scripted_llm.requests[1]
    notes = [m["content"] for m in request["messages"] if m["role"] == "system"][1:]
    assert notes == [
        "The user agreed to let you use consultar_pagamentos for their request above. "
        "Use it now and answer the request."
    ]
    assert request["messages"][-1] == {"role": "user", "content": "Pode sim"}
    ((result,),) = [body["metadata"]["mcp_results"]]
    assert (result["tool"], result["status"]) == ("consultar_pagamentos", "ok")
    tool_message = tool_data_read(scripted_llm.requests[2]["messages"][-1]["content"])
    assert "pagamentos" in json.dumps(tool_message, ensure_ascii=False)

    ask_payments(scripted_llm)
    scripted_llm.reply("Nenhum pagamento novo.")
    later = send(api, "E a conta deste mês, foi paga?", context=CONTEXT)
    assert later["answer"] == "Nenhum pagamento novo."
    assert [r["status"] for r in later["metadata"]["mcp_results"]] == ["ok"]
    assert Conversation.objects.get(conversation_key=later["conversation_key"]).granted_permissions == [
        "consultar_pagamentos"
    ]


def test_a_denial_keeps_the_tool_from_the_model_and_from_running(api, gated, scripted_llm):
    ask_payments(scripted_llm)
    send(api, "Minha conta foi paga?", context=CONTEXT)

    scripted_llm.reply("Tudo bem, sem consultar não consigo confirmar o pagamento.")
    body = send(api, "Não, obrigado")

    assert body["answer"] == "Tudo bem, sem consultar não consigo confirmar o pagamento."
    request = scripted_llm.requests[1]
    offered = {tool["function"]["name"] for tool in request.get("tools", [])}
    assert "consultar_pagamentos" not in offered
    assert any("did not agree" in (m["content"] or "") for m in request["messages"] if m["role"] == "system")
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.granted_permissions == []
    assert not ToolCall.objects.filter(conversation=conversation, status="ok").exists()
