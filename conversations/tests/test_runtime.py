"""Specialists that really work: tool calls over MCP through the gateway, with both models."""

from __future__ import annotations

import pytest

from agents.llm import TOOL_DATA_NOTE, tool_data_read
from agents.models import McpServer, McpTool
from common.config_version import config_version_bump
from conversations.models import ToolCall
from handoffs.tools import REQUEST_HUMAN

pytestmark = pytest.mark.django_db

INVOICE_CONTEXT = {"msisdn": "5511999999999", "invoice_id": "INV001"}


def send(api, text, *, agent_id="telecom_contas", context=None, session_id="s-tools"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": agent_id, "payload": {"text": text, "session_id": session_id, "context": context or {}}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def results_by_tool(body):
    return {result["tool"]: result for result in body["metadata"]["mcp_results"]}


# -- the offline model ------------------------------------------------------------------


def test_the_invoice_question_calls_both_billing_tools_and_answers_from_their_results(api, live_mcp):
    body = send(api, "Minha fatura veio alta. Pode consultar?", context=INVOICE_CONTEXT)

    results = results_by_tool(body)
    assert set(results) == {"consultar_fatura", "consultar_pagamentos"}
    assert all(result["status"] == "ok" for result in results.values())
    assert results["consultar_fatura"]["result"]["invoice_id"] == "INV001"
    assert "R$ 289,90" in body["answer"]
    assert "duplicidade" in body["answer"]
    assert body["metadata"]["mcp_tools"] == ["consultar_fatura", "consultar_pagamentos"]
    assert body["metadata"]["prompt_version"] == 1
    assert ToolCall.objects.filter(status="ok").count() == 2


def test_the_order_question_calls_the_retail_tools(api, live_mcp):
    body = send(api, "Onde está meu pedido?", context={"order_id": "P100", "customer_id": "C001"})

    results = results_by_tool(body)
    assert {name: r["status"] for name, r in results.items()} == {"consultar_entrega": "ok", "consultar_pedido": "ok"}
    assert "RL123456789BR" in body["answer"]


def test_a_tool_whose_required_arguments_are_missing_is_not_called(api, live_mcp):
    body = send(api, "Minha fatura veio alta", context={"invoice_id": "INV001"})

    assert body["metadata"]["mcp_results"] == []
    assert body["metadata"]["mcp_tools"] == ["consultar_fatura", "consultar_pagamentos"]


def test_only_tools_the_specialist_is_allowed_are_offered(api, live_mcp, telecom):
    telecom.specialists.get(name="billing_agent").allowed_tools.remove(McpTool.objects.get(name="consultar_pagamentos"))

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert body["metadata"]["mcp_tools"] == ["consultar_fatura"]
    assert set(results_by_tool(body)) == {"consultar_fatura"}


def test_a_disabled_tool_is_not_offered(api, live_mcp):
    McpTool.objects.filter(name="consultar_fatura").update(enabled=False)
    config_version_bump()

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert body["metadata"]["mcp_tools"] == ["consultar_pagamentos"]


def test_a_server_that_is_down_is_recorded_and_the_specialist_still_answers(api, live_mcp):
    McpServer.objects.filter(name="telecom").update(endpoint="http://127.0.0.1:9/mcp", timeout=2)
    config_version_bump()

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert {r["status"] for r in body["metadata"]["mcp_results"]} == {"unavailable"}
    assert "não consegui consultar" in body["answer"]
    assert ToolCall.objects.filter(status="unavailable").count() == 2


def test_a_slow_server_times_out_and_the_answer_goes_on(api, live_mcp, slow_telecom_server):
    McpServer.objects.filter(name="telecom").update(endpoint=slow_telecom_server, timeout=1)
    config_version_bump()

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert {r["status"] for r in body["metadata"]["mcp_results"]} == {"timeout"}
    assert all(r["latency_ms"] < 2500 for r in body["metadata"]["mcp_results"])


def test_a_tool_error_is_recorded_with_its_message(api, live_mcp):
    body = send(api, "Minha fatura veio alta", context={"msisdn": "5500000000000"})

    results = results_by_tool(body)
    assert results["consultar_fatura"]["status"] == "error"
    assert "não encontrada" in results["consultar_fatura"]["error"]


# -- a real model over HTTP (scripted OpenAI-compatible server) ------------------------------


def tool_messages(request):
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_a_models_tool_call_is_run_over_mcp_and_the_model_sees_the_result(api, live_mcp, scripted_llm):
    scripted_llm.reply_tool_call("consultar_fatura", {"msisdn": "5511999999999", "invoice_id": "INV001"})
    scripted_llm.reply("Sua fatura INV001 está em R$ 289,90 por causa do roaming.")

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert body["answer"] == "Sua fatura INV001 está em R$ 289,90 por causa do roaming."
    assert results_by_tool(body)["consultar_fatura"]["status"] == "ok"
    first, second = scripted_llm.requests
    # The intent's tools, and the person the demo profile lets its specialists hand over to.
    assert {tool["function"]["name"] for tool in first["tools"]} == {
        "consultar_fatura",
        "consultar_pagamentos",
        REQUEST_HUMAN,
    }
    (tool_message,) = tool_messages(second)
    assert tool_message["content"].startswith('<tool_output tool="consultar_fatura">\n')
    assert tool_data_read(tool_message["content"])["invoice_id"] == "INV001"
    assert TOOL_DATA_NOTE in first["messages"][0]["content"]  # the system prompt: tool output is data


def person_asked_reads(monkeypatch) -> list[str]:
    """The messages the specialist runtime reads for a request for a person (what only the offline model reads)."""
    from conversations import runtime

    read: list[str] = []
    asked = runtime.person_asked_in
    monkeypatch.setattr(runtime, "person_asked_in", lambda text: read.append(text) or asked(text))
    return read


def test_the_offline_models_turn_reads_whether_the_message_asks_for_a_person_once(api, live_mcp, monkeypatch):
    read = person_asked_reads(monkeypatch)

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert body["metadata"]["llm"] == "offline"
    assert read == ["Minha fatura veio alta"]


def test_a_real_models_turn_works_out_nothing_that_only_the_offline_model_reads(
    api, live_mcp, scripted_llm, monkeypatch
):
    """The specialists the message hits, its closing words, whether it asks for a person: the offline model's rules
    read them, a real model reads its prompt (and is offered ``request_human`` all the same)."""
    read = person_asked_reads(monkeypatch)
    scripted_llm.reply("Vou verificar a sua fatura.")

    body = send(api, "Minha fatura veio alta e quero falar com um atendente", context=INVOICE_CONTEXT)

    assert body["answer"] == "Vou verificar a sua fatura."
    assert read == []
    (request,) = scripted_llm.requests
    assert REQUEST_HUMAN in {tool["function"]["name"] for tool in request["tools"]}


def test_only_the_offered_tools_are_sent_to_the_model(api, live_mcp, scripted_llm):
    send(api, "Onde está meu pedido?", context={"order_id": "P100"})

    names = {tool["function"]["name"] for tool in scripted_llm.requests[0]["tools"]}
    assert names == {"consultar_pedido", "consultar_entrega", REQUEST_HUMAN}


def test_a_tool_the_model_was_not_offered_is_refused_not_called(api, live_mcp, scripted_llm):
    scripted_llm.reply_tool_call("consultar_pedido", {"order_id": "P100"})
    scripted_llm.reply("Ok.")

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    result = results_by_tool(body)["consultar_pedido"]
    assert result["status"] == "not_offered"
    assert "not_offered" in tool_messages(scripted_llm.requests[1])[0]["content"]


def test_the_tool_loop_stops_at_the_specialists_step_limit(api, live_mcp, scripted_llm, telecom):
    billing = telecom.specialists.get(name="billing_agent")
    billing.step_limit = 2
    billing.save()
    for _ in range(2):
        scripted_llm.reply_tool_call("consultar_pagamentos", {"msisdn": "5511999999999"})
    scripted_llm.reply("Resumo final.")

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert body["answer"] == "Resumo final."
    assert body["metadata"]["model"]["stopped"] == "step_limit"
    assert len(scripted_llm.requests) == 3
    assert scripted_llm.requests[-1]["tool_choice"] == "none"


def test_the_request_context_reaches_the_model_with_the_tools(api, live_mcp, scripted_llm):
    send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    system = scripted_llm.requests[0]["messages"][0]["content"]
    assert "invoice_id" in system


# -- the model's history ------------------------------------------------------------------


def test_a_stored_message_becomes_one_model_message_for_the_turns_that_follow_never_for_another_conversation(
    monkeypatch,
):
    from langchain_core.messages import AIMessage, HumanMessage

    from conversations import runtime

    first = runtime.history_message("user", "Minha fatura veio alta", 41)
    answer = runtime.history_message("assistant", "Faturas (offline model): recebi.", 42)

    assert isinstance(first, HumanMessage) and isinstance(answer, AIMessage)
    assert runtime.history_message("user", "Minha fatura veio alta", 41) is first  # the next turn's history
    assert runtime.history_message("user", "Minha fatura veio alta", 97) is not first  # another stored message
    assert runtime.history_message("user", "texto mudado", 41).content == "texto mudado"  # the row's text decides
    assert runtime.history_message("user", "sem id") is not runtime.history_message("user", "sem id")

    for n in range(300):  # the process's earlier turns left more than the bound below
        runtime.history_message("assistant", f"earlier {n}", 500 + n)
    monkeypatch.setattr(runtime, "HISTORY_MESSAGES_KEPT", 8)
    for n in range(100):
        runtime.history_message("user", f"m{n}", 1000 + n)
    assert len(runtime._history_messages) <= 8
    assert runtime.history_message("user", "m99", 1099) is runtime.history_message("user", "m99", 1099)


def offline_bindings(monkeypatch) -> list[dict[str, str]]:
    """Each binding of tools to the offline model in this test: the tools' descriptions by name (none kept from
    another test's profile)."""
    from agents.llm import OfflineChatModel
    from conversations import runtime

    monkeypatch.setattr(runtime, "_bound_tools", {})
    bindings: list[dict[str, str]] = []
    bind = OfflineChatModel.bind_tools

    def counted(model, tools, **options):
        bindings.append({tool["function"]["name"]: tool["function"].get("description", "") for tool in tools})
        return bind(model, tools, **options)

    monkeypatch.setattr(OfflineChatModel, "bind_tools", counted)
    return bindings


def test_a_specialists_tools_are_bound_once_and_every_turn_hands_the_model_its_own_context(api, live_mcp, monkeypatch):
    bindings = offline_bindings(monkeypatch)

    first = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT, session_id="s-first")
    other = send(api, "Minha fatura veio alta", context={"msisdn": "5500000000000"}, session_id="s-other")

    assert [set(tools) for tools in bindings] == [{"consultar_fatura", "consultar_pagamentos", REQUEST_HUMAN}]
    assert results_by_tool(first)["consultar_fatura"]["status"] == "ok"
    assert results_by_tool(other)["consultar_fatura"]["status"] == "error"  # its own line, not the first turn's


def test_a_tool_changed_and_published_is_bound_again_as_it_now_reads(api, live_mcp, monkeypatch):
    bindings = offline_bindings(monkeypatch)
    send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT, session_id="s-before")
    McpTool.objects.filter(name="consultar_fatura").update(description="A fatura do mês, item por item.")
    config_version_bump()

    send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT, session_id="s-after")

    assert len(bindings) == 2
    assert bindings[1]["consultar_fatura"] == "A fatura do mês, item por item."
    assert bindings[0]["consultar_fatura"] != bindings[1]["consultar_fatura"]


def test_a_specialists_model_is_called_with_its_tools_and_turn_without_a_binding_in_between(api, live_mcp, monkeypatch):
    from langchain_core.runnables import RunnableBinding

    bindings = offline_bindings(monkeypatch)
    through: list[object] = []
    call = RunnableBinding.ainvoke

    async def counted(binding, *args, **kwargs):
        through.append(binding)
        return await call(binding, *args, **kwargs)

    monkeypatch.setattr(RunnableBinding, "ainvoke", counted)

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT, session_id="s-through")

    assert len(bindings) == 1
    assert through == []
    assert results_by_tool(body)["consultar_fatura"]["status"] == "ok"  # the tools and the turn's context reached it
