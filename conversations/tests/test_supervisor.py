"""Supervisor planning, plans run through the gateway, and hybrid follow-ups."""

from __future__ import annotations

import asyncio

import pytest

from agents.llm import reset_clients
from agents.models import McpServer
from common.config_version import config_version_bump
from common.i18n import say as say_in
from conversations.runtime import SpecialistOutcome
from conversations.supervisor import (
    CONSOLIDATION_HEADER,
    STATUS_OK,
    STATUS_TIMEOUT,
    Partial,
    PlanResult,
    consolidate_join,
    joined_agents,
)
from handoffs.models import Handoff
from routing.router import MULTI_INTENT, SUPERVISOR_ROUTE, CompiledRouter, IntentSpec

BILLING = IntentSpec(name="billing", agent="billing_agent", priority=10, keywords=("fatura", "cobrança"))
BILLING_2 = IntentSpec(name="billing_second", agent="billing_agent", priority=12, keywords=("duplicada",))
ORDERS = IntentSpec(name="orders", agent="orders_agent", priority=20, keywords=("pedido", "entrega"))
SUPPORT = IntentSpec(name="support", agent="support_agent", priority=40, keywords=("troca",))


def router() -> CompiledRouter:
    return CompiledRouter(intents=(ORDERS, BILLING, BILLING_2, SUPPORT), fallback_agent="support_agent")


def plan(text: str, **kwargs):
    return asyncio.run(router().route(text, mode="supervisor", **kwargs))


# -- planning (pure) ------------------------------------------------------------------------


def test_a_multi_topic_message_plans_every_specialist_it_hits_in_priority_order():
    decision = plan("Meu pedido atrasou e minha fatura veio duplicada")

    assert (decision.route, decision.intent, decision.method) == (SUPERVISOR_ROUTE, MULTI_INTENT, "keyword")
    assert decision.agents == ["billing_agent", "orders_agent"]
    assert [step.intent for step in decision.plan] == ["billing", "orders"]


def test_a_specialist_hit_by_two_intents_appears_once():
    assert plan("fatura duplicada, e o pedido?").agents == ["billing_agent", "orders_agent"]


def test_a_single_topic_plan_is_that_specialist_alone():
    decision = plan("Minha fatura veio alta")
    assert (decision.route, decision.agent, decision.intent) == ("billing_agent", "billing_agent", "billing")
    assert decision.agents == ["billing_agent"]
    assert not decision.is_plan


def test_a_message_hitting_nothing_falls_back():
    decision = plan("qual a capital da França?")
    assert (decision.method, decision.agent, decision.agents) == ("fallback", "support_agent", ["support_agent"])


def test_a_plan_is_not_a_handoff_from_the_active_specialist():
    assert plan("fatura e pedido", active_agent="billing_agent").handoff is False


# -- hybrid follow-ups (pure) ------------------------------------------------------------------


def hybrid(text, **kwargs):
    options = {"mode": "hybrid", "followup_max_chars": 40, "active_agent": "billing_agent", "active_intent": "billing"}
    return asyncio.run(router().route(text, **{**options, **kwargs}))


def test_a_short_follow_up_stays_with_the_active_specialist():
    decision = hybrid("e esse valor?")
    assert (decision.method, decision.agent, decision.intent) == ("followup", "billing_agent", "billing")
    assert decision.handoff is False


def test_a_follow_up_longer_than_the_threshold_routes_as_router_mode():
    assert hybrid("e esse valor? " * 5).method == "fallback"


def test_a_short_message_that_hits_an_intent_routes_normally():
    decision = hybrid("e o pedido?")
    assert (decision.method, decision.agent, decision.handoff) == ("keyword", "orders_agent", True)


def test_without_an_active_specialist_there_is_nothing_to_follow():
    assert hybrid("e esse valor?", active_agent="", active_intent="").method == "fallback"


# -- through the gateway ----------------------------------------------------------------------------

SEED_MESSAGE = "Meu pedido atrasou e minha fatura veio duplicada"


def send(api, text, *, context=None, session_id="s-sup"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session_id, "context": context or {}}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def supervisor(telecom):
    telecom.routing_mode = "supervisor"
    telecom.save()
    return telecom


@pytest.mark.django_db
def test_the_debug_route_answers_the_plan_in_supervisor_mode(debug_api, supervisor):
    body = debug_api.post(
        "/api/debug/route",
        {"agent_id": "telecom_contas", "payload": {"text": SEED_MESSAGE, "session_id": "s-supervisor-1"}},
        format="json",
    ).json()

    assert body["mode"] == "supervisor"
    assert body["route"] == "supervisor_agent"
    assert body["agents"] == ["billing_agent", "orders_agent"]
    assert body["intent"] == "multi_intent"


@pytest.mark.django_db
def test_the_routing_mode_variable_overrides_the_profile(debug_api, telecom, settings):
    settings.ROUTING_MODE = "supervisor"
    body = debug_api.post(
        "/api/debug/route", {"agent_id": "telecom_contas", "payload": {"text": SEED_MESSAGE}}, format="json"
    ).json()
    assert (body["mode"], body["intent"]) == ("supervisor", "multi_intent")


@pytest.mark.django_db
def test_a_plan_answers_with_every_specialists_part_and_records_the_fan_out(api, supervisor):
    body = send(api, SEED_MESSAGE)

    assert body["agent"] == "supervisor_agent"
    assert body["metadata"]["intent"] == "multi_intent"
    assert body["answer"].startswith(say_in(body["metadata"]["language"], CONSOLIDATION_HEADER))
    assert "billing_agent:" in body["answer"] and "orders_agent:" in body["answer"]
    assert [(p["agent"], p["status"]) for p in body["metadata"]["supervisor"]] == [
        ("billing_agent", "ok"),
        ("orders_agent", "ok"),
    ]
    fanout = Handoff.objects.filter(kind="supervisor_fanout").order_by("id")
    assert [(h.from_agent, h.to_agent) for h in fanout] == [
        ("supervisor_agent", "billing_agent"),
        ("supervisor_agent", "orders_agent"),
    ]


@pytest.mark.django_db
def test_a_plans_specialists_call_their_own_tools(api, supervisor, live_mcp):
    body = send(api, SEED_MESSAGE, context={"msisdn": "5511999999999", "order_id": "P100"})

    statuses = {r["tool"]: r["status"] for r in body["metadata"]["mcp_results"]}
    assert statuses == {
        "consultar_fatura": "ok",
        "consultar_pagamentos": "ok",
        "consultar_pedido": "ok",
        "consultar_entrega": "ok",
    }
    assert "R$ 289,90" in body["answer"] and "RL123456789BR" in body["answer"]


@pytest.mark.django_db
def test_a_specialist_that_times_out_leaves_a_marked_gap(api, supervisor, live_mcp, slow_telecom_server, settings):
    McpServer.objects.filter(name="telecom").update(endpoint=slow_telecom_server, timeout=10)
    config_version_bump()
    settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = 1.5

    body = send(api, SEED_MESSAGE, context={"msisdn": "5511999999999", "order_id": "P100"})

    parts = {p["agent"]: p for p in body["metadata"]["supervisor"]}
    assert parts["billing_agent"]["status"] == "timeout"
    assert parts["orders_agent"]["status"] == "ok"
    assert "billing_agent: [sem resposta: timeout" in body["answer"]
    assert "RL123456789BR" in body["answer"]


# -- hybrid through the gateway ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_hybrid_follow_up_is_kept_without_any_model_call(api, telecom, scripted_llm, settings):
    """Routing has its own (scripted) model; specialists answer offline: the follow-up asks no model."""
    settings.ROUTER_LLM_BASE_URL, settings.ROUTER_LLM_MODEL = scripted_llm.base_url, "router-model"
    settings.OPENAI_BASE_URL = settings.LLM_MODEL = ""
    reset_clients()
    telecom.routing_mode = "hybrid"
    telecom.llm_router_enabled = True
    telecom.hybrid_followup_max_chars = 40
    telecom.save()

    first = send(api, "Minha fatura veio alta")
    assert first["agent"] == "billing_agent"

    follow_up = send(api, "e esse valor?")

    decision = follow_up["metadata"]["route_decision"]
    assert (decision["method"], decision["agent"], decision["intent"]) == (
        "followup",
        "billing_agent",
        "billing_invoice_explanation",
    )
    assert scripted_llm.requests == []

    scripted_llm.reply_tool_call("IntentChoice", {"intent": "retail_order_tracking", "confidence": 0.9, "reason": "."})
    send(api, "cadê minha encomenda que não chegou ainda até hoje?")
    assert len(scripted_llm.requests) == 1  # a long message with no keyword does ask the router's model


@pytest.mark.django_db
def test_without_a_model_the_parts_are_joined(api, supervisor):
    assert send(api, SEED_MESSAGE)["metadata"]["consolidation"] == {"method": "join"}


@pytest.mark.django_db
def test_with_a_model_the_synthesis_prompt_merges_the_parts(api, supervisor, scripted_llm):
    supervisor.synthesis_prompt = "Merge the parts into one friendly answer."
    supervisor.save()
    scripted_llm.reply("Parte de faturas.")
    scripted_llm.reply("Parte de pedidos.")
    scripted_llm.reply_tool_call("Coverage", {"uncovered_intents": []})
    scripted_llm.reply("Sua fatura foi cobrada em duplicidade e seu pedido está atrasado; já verificamos ambos.")

    body = send(api, SEED_MESSAGE)

    assert body["answer"] == ("Sua fatura foi cobrada em duplicidade e seu pedido está atrasado; já verificamos ambos.")
    assert body["metadata"]["consolidation"] == {"method": "llm"}
    synthesis = scripted_llm.requests[-1]
    assert synthesis["messages"][0]["content"] == "Merge the parts into one friendly answer."
    assert "Parte de faturas." in synthesis["messages"][1]["content"]
    assert "Parte de pedidos." in synthesis["messages"][1]["content"]
    assert "judges" in body["metadata"] and body["metadata"]["guardrails"]["output"]["passed"] in (True, False)


@pytest.mark.django_db
def test_a_failed_synthesis_falls_back_to_the_join(api, supervisor, scripted_llm):
    scripted_llm.reply("Parte A.")
    scripted_llm.reply("Parte B.")
    scripted_llm.reply_tool_call("Coverage", {"uncovered_intents": []})
    scripted_llm.reply_error(500)

    body = send(api, SEED_MESSAGE)

    assert body["answer"].startswith(say_in(body["metadata"]["language"], CONSOLIDATION_HEADER))
    assert body["metadata"]["consolidation"]["method"] == "join"
    assert "500" in body["metadata"]["consolidation"]["error"]


# -- the review loop ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_each_specialists_part_is_in_the_history_with_role_agent_and_step(api, supervisor):
    send(api, SEED_MESSAGE, session_id="s-history")

    messages = api.get("/api/sessions/tenant_a:telecom_contas:s-history/messages").json()["messages"]
    assert [(m["role"], m["agent"], m["step"]) for m in messages] == [
        ("user", "", 0),
        ("agent", "billing_agent", 1),
        ("agent", "orders_agent", 1),
        ("assistant", "supervisor_agent", 0),
    ]


@pytest.mark.django_db
def test_a_failed_part_is_sent_on_again_at_most_three_rounds(api, supervisor, live_mcp, slow_telecom_server, settings):
    McpServer.objects.filter(name="telecom").update(endpoint=slow_telecom_server, timeout=10)
    config_version_bump()
    settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = 0.5

    body = send(api, SEED_MESSAGE, context={"msisdn": "5511999999999", "order_id": "P100"})

    rounds = body["metadata"]["review_rounds"]
    assert [r["round"] for r in rounds] == [1, 2, 3]
    assert all(r["sent_to"] == ["billing_agent"] and r["covered"] == [] for r in rounds)
    billing = [p for p in body["metadata"]["supervisor"] if p["agent"] == "billing_agent"]
    assert [p["round"] for p in billing] == [0, 1, 2, 3]
    assert "billing_agent: [sem resposta: timeout" in body["answer"]


@pytest.mark.django_db
def test_the_model_finds_an_uncovered_part_and_its_specialist_answers_it(api, supervisor, scripted_llm):
    scripted_llm.reply("Parte de faturas.")
    scripted_llm.reply("Parte de pedidos.")
    scripted_llm.reply_tool_call("Coverage", {"uncovered_intents": ["support_request"]})
    scripted_llm.reply("Parte de suporte: a troca pode ser feita na loja.")
    scripted_llm.reply_tool_call("Coverage", {"uncovered_intents": []})
    scripted_llm.reply("Resposta final consolidada.")

    body = send(api, SEED_MESSAGE + ", e quero saber das regras")

    assert body["metadata"]["review_rounds"] == [
        {"round": 1, "uncovered": ["support_request"], "sent_to": ["support_agent"], "covered": ["support_agent"]}
    ]
    assert [p["agent"] for p in body["metadata"]["supervisor"]] == ["billing_agent", "orders_agent", "support_agent"]
    assert "Parte de suporte" in scripted_llm.requests[-1]["messages"][1]["content"]
    assert body["answer"] == "Resposta final consolidada."


@pytest.mark.parametrize(
    ("language", "header", "gap"),
    [
        ("en", "[Supervisor] The answers of the specialists", "[no answer: timeout]"),
        ("es", "[Supervisor] Las respuestas de los especialistas", "[sin respuesta: timeout]"),
        ("pt", "[Supervisor] As respostas dos especialistas", "[sem resposta: timeout]"),
    ],
)
def test_a_joined_answer_says_its_header_and_gaps_in_the_conversations_language_alone(language, header, gap):
    answered = SpecialistOutcome(answer="Your bill is R$ 289,90.", llm="offline", model="offline")
    result = PlanResult(
        partials=[
            Partial(agent="billing_agent", intent="billing", status=STATUS_OK, outcome=answered),
            Partial(agent="support_agent", intent="support", status=STATUS_TIMEOUT),
        ]
    )

    joined = consolidate_join(result, language)

    assert joined.startswith(header) and f"support_agent: {gap}" in joined
    assert joined_agents(joined) == {"billing_agent"}  # read back in any language, the gap left out
