"""Agent-to-agent handoffs and loop safety with a real model path.

The model is the scripted OpenAI-compatible server (``scripted_llm``):
langchain-openai talks to it over HTTP, so every handoff here is a real
``request_handoff`` tool call the runtime receives, and every assertion about
what a specialist was given reads the request body the server got.
"""

from __future__ import annotations

import json

import pytest

from agents.models import Specialist
from conversations.runtime import STEP_LIMIT_NOTE
from handoffs.models import Handoff

pytestmark = pytest.mark.django_db

SESSION = "handoff-001"
KEY = f"tenant_a:telecom_contas:{SESSION}"
INVOICE_CONTEXT = {"msisdn": "5511999999999", "invoice_id": "INV001"}
REASON = "O cliente pergunta pelo pedido, não pela fatura."
SUMMARY = "Fatura INV001 conferida; o cliente quer saber do pedido P100."
STOPPED = "Vou parar por aqui"


def send(api, text, *, context=None):
    response = api.post(
        "/api/gateway/message",
        {
            "channel": "api",
            "agent_id": "telecom_contas",
            "payload": {"text": text, "session_id": SESSION, "context": context or {}},
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def targets(profile, name, *others):
    """Let ``name`` hand the conversation to ``others`` (an M2M edit: the routing config follows)."""
    Specialist.objects.get(profile=profile, name=name).handoff_targets.set(
        Specialist.objects.filter(profile=profile, name__in=others)
    )


def hand_off(llm, target, *, reason=REASON, summary=SUMMARY):
    llm.reply_tool_call("request_handoff", {"target_agent": target, "reason": reason, "context_summary": summary})


def tool_names(request):
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def tool_definition(request, name):
    return next(tool["function"] for tool in request["tools"] if tool["function"]["name"] == name)


def system_texts(request):
    return [m["content"] for m in request["messages"] if m["role"] == "system"]


def tool_messages(request):
    return [m for m in request["messages"] if m["role"] == "tool"]


def agent_rows():
    """The agent handoffs stored (routing handoffs left out), oldest first."""
    return list(
        Handoff.objects.filter(kind="handoff")
        .order_by("created_at", "id")
        .values_list("from_agent", "to_agent", "status", "outcome")
    )


def set_limits(profile, **fields):
    for name, value in fields.items():
        setattr(profile, name, value)
    profile.save(update_fields=list(fields))  # post_save bumps the routing config version


# -- the happy path ---------------------------------------------------------------------------


def test_a_handoff_moves_the_turn_to_the_target_which_answers_the_user(api, telecom, scripted_llm):
    targets(telecom, "billing_agent", "orders_agent")
    hand_off(scripted_llm, "orders_agent")
    scripted_llm.reply("Seu pedido P100 sai para entrega amanhã.")

    body = send(api, "Minha fatura veio alta")

    assert body["agent"] == "orders_agent"
    assert body["answer"] == "Seu pedido P100 sai para entrega amanhã."
    assert body["metadata"]["agents"] == ["billing_agent", "orders_agent"]
    assert body["metadata"]["handoffs"] == [
        {
            "from_agent": "billing_agent",
            "to_agent": "orders_agent",
            "kind": "handoff",
            "status": "completed",
            "reason": REASON,
            "context_summary": SUMMARY,
            "outcome": "",
        }
    ]
    row = Handoff.objects.get()
    assert (row.from_agent, row.to_agent, row.kind, row.status) == (
        "billing_agent",
        "orders_agent",
        "handoff",
        "completed",
    )
    assert (row.reason, row.context_summary, row.outcome) == (REASON, SUMMARY, "")
    assert row.conversation.conversation_key == KEY


def test_only_the_allowed_targets_are_offered_in_the_handoff_tool(api, telecom, scripted_llm):
    targets(telecom, "billing_agent", "orders_agent", "support_agent")

    send(api, "Minha fatura veio alta")

    (request,) = scripted_llm.requests
    # request_human too: the profile lets its specialists hand the conversation to a person (docs/desk.md).
    assert tool_names(request) == {"consultar_fatura", "consultar_pagamentos", "request_handoff", "request_human"}
    handoff = tool_definition(request, "request_handoff")
    assert handoff["parameters"]["properties"]["target_agent"]["enum"] == ["orders_agent", "support_agent"]
    assert set(handoff["parameters"]["required"]) == {"target_agent", "reason", "context_summary"}


def test_the_target_gets_the_users_message_the_handoff_note_and_its_own_intents_tools(api, telecom, scripted_llm):
    targets(telecom, "billing_agent", "orders_agent")
    hand_off(scripted_llm, "orders_agent")
    scripted_llm.reply("Seu pedido está a caminho.")

    send(api, "Minha fatura veio alta")

    first, second = scripted_llm.requests
    assert "You are billing_agent" in first["messages"][0]["content"]
    assert "You are orders_agent" in second["messages"][0]["content"]
    note = f"[SYSTEM_NOTE: billing_agent handed this conversation to you. Reason: {REASON} Summary: {SUMMARY}]"
    assert second["messages"][-2:] == [
        {"role": "system", "content": note},
        {"role": "user", "content": "Minha fatura veio alta"},
    ]
    # The orders intent's tools, not billing's; orders has no targets, so no handoff tool either.
    assert tool_names(second) == {"consultar_pedido", "consultar_entrega", "request_human"}
    assert not tool_messages(second)  # what billing did is in the note, not in a tool exchange


def test_the_sessions_api_shows_the_target_as_active_and_the_handoff(api, telecom, scripted_llm):
    targets(telecom, "billing_agent", "orders_agent")
    hand_off(scripted_llm, "orders_agent")
    scripted_llm.reply("Seu pedido está a caminho.")
    send(api, "Minha fatura veio alta")

    body = api.get(f"/api/sessions/{KEY}/messages").json()

    assert body["active_specialist"] == "orders_agent"
    assert [(m["role"], m["agent"]) for m in body["messages"]] == [("user", ""), ("assistant", "orders_agent")]
    (handoff,) = body["handoffs"]
    assert (handoff["from_agent"], handoff["to_agent"], handoff["kind"], handoff["status"]) == (
        "billing_agent",
        "orders_agent",
        "handoff",
        "completed",
    )
    assert handoff["reason"] == REASON
    assert handoff["created_at"]


# -- refused -----------------------------------------------------------------------------------------


def test_a_handoff_to_an_agent_not_allowed_is_refused_and_the_specialist_goes_on(api, telecom, scripted_llm):
    targets(telecom, "billing_agent", "orders_agent")
    hand_off(scripted_llm, "product_agent", reason="Quer trocar de plano.")
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")

    body = send(api, "Minha fatura veio alta")

    assert body["agent"] == "billing_agent"
    assert body["answer"] == "Sua fatura subiu por causa do roaming."
    assert body["metadata"]["agents"] == ["billing_agent"]
    assert agent_rows() == [("billing_agent", "product_agent", "refused", "not_allowed")]
    assert Handoff.objects.get().reason == "Quer trocar de plano."
    (refusal,) = tool_messages(scripted_llm.requests[1])
    assert json.loads(refusal["content"]) == {"error": "not allowed: product_agent; you may reach: orders_agent"}
    assert "You are billing_agent" in scripted_llm.requests[1]["messages"][0]["content"]
    assert api.get(f"/api/sessions/{KEY}/messages").json()["active_specialist"] == "billing_agent"


# -- loop safety ----------------------------------------------------------------------------------


def test_ping_pong_is_stopped_with_what_was_found_so_far(api, telecom, live_mcp, scripted_llm):
    targets(telecom, "billing_agent", "orders_agent")
    targets(telecom, "orders_agent", "billing_agent")
    scripted_llm.reply_tool_call("consultar_fatura", INVOICE_CONTEXT)
    hand_off(scripted_llm, "orders_agent")
    hand_off(scripted_llm, "billing_agent", reason="Isso é de fatura.", summary="Nada de pedido aqui.")

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert body["answer"].startswith(STOPPED)
    assert "O que encontrei até agora" in body["answer"]
    assert "- consultar_fatura: " in body["answer"]
    assert body["metadata"]["agents"] == ["billing_agent", "orders_agent"]
    assert len(scripted_llm.requests) == 3  # billing never runs a second time
    assert agent_rows() == [
        ("billing_agent", "orders_agent", "completed", ""),
        ("orders_agent", "billing_agent", "stopped", "ping_pong"),
    ]
    assert [(h["status"], h["outcome"]) for h in body["metadata"]["handoffs"]] == [
        ("completed", ""),
        ("stopped", "ping_pong"),
    ]


def test_with_ping_pong_blocking_off_the_conversation_may_go_back(api, telecom, scripted_llm):
    set_limits(telecom, block_ping_pong=False)
    targets(telecom, "billing_agent", "orders_agent")
    targets(telecom, "orders_agent", "billing_agent")
    hand_off(scripted_llm, "orders_agent")
    hand_off(scripted_llm, "billing_agent", reason="Isso é de fatura.", summary="Nada de pedido aqui.")
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")

    body = send(api, "Minha fatura veio alta")

    assert (body["agent"], body["answer"]) == ("billing_agent", "Sua fatura subiu por causa do roaming.")
    assert body["metadata"]["agents"] == ["billing_agent", "orders_agent", "billing_agent"]
    assert agent_rows() == [
        ("billing_agent", "orders_agent", "completed", ""),
        ("orders_agent", "billing_agent", "completed", ""),
    ]
    note = (
        "[SYSTEM_NOTE: orders_agent handed this conversation to you. "
        "Reason: Isso é de fatura. Summary: Nada de pedido aqui.]"
    )
    assert note in system_texts(scripted_llm.requests[2])


def test_a_path_repeated_across_turns_is_stopped_the_third_time(api, telecom, scripted_llm):
    targets(telecom, "billing_agent", "orders_agent")
    for turn in (1, 2):
        hand_off(scripted_llm, "orders_agent")
        scripted_llm.reply(f"Resposta do pedido {turn}.")
        assert send(api, "Minha fatura veio alta")["answer"] == f"Resposta do pedido {turn}."
    hand_off(scripted_llm, "orders_agent")

    body = send(api, "Minha fatura veio alta")

    assert body["answer"].startswith(STOPPED)
    assert body["agent"] == "billing_agent"
    assert len(scripted_llm.requests) == 5  # the third turn's target never ran
    assert agent_rows() == [
        ("billing_agent", "orders_agent", "completed", ""),
        ("billing_agent", "orders_agent", "completed", ""),
        ("billing_agent", "orders_agent", "stopped", "path_repeated"),
    ]
    # The router's moves back to billing in turns 2 and 3 are stored but are not counted as a loop.
    assert Handoff.objects.filter(kind="routing_handoff").count() == 2


@pytest.mark.parametrize(
    ("window", "third"), [(2, "completed"), (5, "stopped")], ids=["outside a window of 2", "inside a window of 5"]
)
def test_the_repeated_path_check_looks_only_at_the_loop_window(api, telecom, scripted_llm, window, third):
    set_limits(telecom, loop_window=window, loop_max_repeats=2)
    targets(telecom, "billing_agent", "orders_agent", "product_agent")
    for target in ("orders_agent", "product_agent"):
        hand_off(scripted_llm, target)
        scripted_llm.reply(f"Resposta de {target}.")
        assert send(api, "Minha fatura veio alta")["agent"] == target
    hand_off(scripted_llm, "orders_agent")
    scripted_llm.reply("Resposta de orders_agent.")

    body = send(api, "Minha fatura veio alta")

    # billing → orders happened two handoffs ago: inside a window of 5, outside a window of 2.
    assert agent_rows()[-1][:3] == ("billing_agent", "orders_agent", third)
    if third == "completed":
        assert body["answer"] == "Resposta de orders_agent."
    else:
        assert agent_rows()[-1][3] == "path_repeated"
        assert body["answer"].startswith(STOPPED)


def test_more_handoffs_than_the_profile_allows_in_one_turn_are_stopped(api, telecom, scripted_llm):
    set_limits(telecom, max_handoffs_per_turn=1)
    targets(telecom, "billing_agent", "orders_agent")
    targets(telecom, "orders_agent", "product_agent")
    hand_off(scripted_llm, "orders_agent")
    hand_off(scripted_llm, "product_agent", reason="É sobre o plano.", summary="Pedido sem atraso.")

    body = send(api, "Minha fatura veio alta")

    assert body["answer"].startswith(STOPPED)
    assert "o limite de transferências por mensagem" in body["answer"]  # in the conversation's language
    assert body["agent"] == "orders_agent"
    assert body["metadata"]["agents"] == ["billing_agent", "orders_agent"]
    assert len(scripted_llm.requests) == 2  # product_agent never ran
    assert agent_rows() == [
        ("billing_agent", "orders_agent", "completed", ""),
        ("orders_agent", "product_agent", "stopped", "handoff_limit"),
    ]
    stopped = Handoff.objects.get(status="stopped")
    assert (stopped.reason, stopped.context_summary) == ("É sobre o plano.", "Pedido sem atraso.")


@pytest.mark.parametrize(
    ("specialist_limit", "profile_limit"),
    [(2, 10), (10, 2)],
    ids=["the specialist's own limit", "the profile's max steps per agent"],
)
def test_a_specialist_out_of_steps_answers_without_tools_and_the_stop_is_recorded(
    api, live_mcp, scripted_llm, telecom, specialist_limit, profile_limit
):
    billing = telecom.specialists.get(name="billing_agent")
    billing.step_limit = specialist_limit
    billing.save(update_fields=["step_limit"])
    set_limits(telecom, max_steps_per_agent=profile_limit)
    for _ in range(2):
        scripted_llm.reply_tool_call("consultar_fatura", INVOICE_CONTEXT)
    scripted_llm.reply("Sua fatura INV001 está em R$ 289,90.")

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert body["answer"] == "Sua fatura INV001 está em R$ 289,90."
    assert [r["status"] for r in body["metadata"]["mcp_results"]] == ["ok", "ok"]
    assert body["metadata"]["model"]["stopped"] == "step_limit"
    assert len(scripted_llm.requests) == 3
    final = scripted_llm.requests[-1]
    assert final["tool_choice"] == "none"
    assert STEP_LIMIT_NOTE in system_texts(final)
    assert agent_rows() == [("billing_agent", "", "stopped", "step_limit")]
    assert body["metadata"]["handoffs"][0]["outcome"] == "step_limit"


def test_the_step_limit_counts_a_specialists_steps_across_the_whole_turn(api, telecom, live_mcp, scripted_llm):
    set_limits(telecom, block_ping_pong=False)
    billing = telecom.specialists.get(name="billing_agent")
    billing.step_limit = 2
    billing.save(update_fields=["step_limit"])
    targets(telecom, "billing_agent", "orders_agent")
    targets(telecom, "orders_agent", "billing_agent")
    hand_off(scripted_llm, "orders_agent")  # billing's first step
    hand_off(scripted_llm, "billing_agent", reason="Isso é de fatura.", summary="Nada de pedido aqui.")
    scripted_llm.reply_tool_call("consultar_fatura", INVOICE_CONTEXT)  # billing's second and last step
    scripted_llm.reply("Sua fatura INV001 está em R$ 289,90.")

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT)

    assert (body["agent"], body["answer"]) == ("billing_agent", "Sua fatura INV001 está em R$ 289,90.")
    assert len(scripted_llm.requests) == 4
    assert scripted_llm.requests[-1]["tool_choice"] == "none"
    assert agent_rows() == [
        ("billing_agent", "orders_agent", "completed", ""),
        ("orders_agent", "billing_agent", "completed", ""),
        ("billing_agent", "", "stopped", "step_limit"),
    ]


def test_a_handoff_to_a_specialist_with_no_steps_left_is_stopped(api, telecom, scripted_llm):
    set_limits(telecom, block_ping_pong=False)
    billing = telecom.specialists.get(name="billing_agent")
    billing.step_limit = 1
    billing.save(update_fields=["step_limit"])
    targets(telecom, "billing_agent", "orders_agent")
    targets(telecom, "orders_agent", "billing_agent")
    hand_off(scripted_llm, "orders_agent")  # billing's only step
    hand_off(scripted_llm, "billing_agent", reason="Isso é de fatura.", summary="Nada de pedido aqui.")

    body = send(api, "Minha fatura veio alta")

    assert body["answer"].startswith(STOPPED)
    assert "o limite de passos do especialista" in body["answer"]
    assert len(scripted_llm.requests) == 2  # billing is not asked again
    assert agent_rows() == [
        ("billing_agent", "orders_agent", "completed", ""),
        ("orders_agent", "billing_agent", "stopped", "step_limit"),
    ]


# -- routing handoffs and the switch -------------------------------------------------------------


def test_the_router_moving_the_conversation_between_turns_records_a_routing_handoff(api, telecom, scripted_llm):
    scripted_llm.reply("Sua fatura subiu.")
    scripted_llm.reply("Seu pedido está a caminho.")
    send(api, "Minha fatura veio alta")

    body = send(api, "Meu pedido atrasou")

    assert body["agent"] == "orders_agent"
    row = Handoff.objects.get()
    assert (row.from_agent, row.to_agent, row.kind, row.status) == (
        "billing_agent",
        "orders_agent",
        "routing_handoff",
        "completed",
    )
    assert row.reason and row.reason == body["metadata"]["route_decision"]["reason"]
    assert [(h["from_agent"], h["to_agent"], h["kind"]) for h in body["metadata"]["handoffs"]] == [
        ("billing_agent", "orders_agent", "routing_handoff")
    ]


def test_with_handoffs_disabled_no_handoff_tool_is_offered_and_a_call_moves_nothing(api, telecom, scripted_llm):
    set_limits(telecom, handoffs_enabled=False)
    targets(telecom, "billing_agent", "orders_agent")
    hand_off(scripted_llm, "orders_agent")
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")

    body = send(api, "Minha fatura veio alta")

    assert tool_names(scripted_llm.requests[0]) == {"consultar_fatura", "consultar_pagamentos", "request_human"}
    assert (body["agent"], body["answer"]) == ("billing_agent", "Sua fatura subiu por causa do roaming.")
    assert [(r["tool"], r["status"]) for r in body["metadata"]["mcp_results"]] == [("request_handoff", "not_offered")]
    assert Handoff.objects.count() == 0


def test_in_hybrid_mode_a_short_follow_up_after_a_handoff_stays_with_the_target(api, telecom, scripted_llm):
    set_limits(telecom, routing_mode="hybrid")
    targets(telecom, "billing_agent", "orders_agent")
    hand_off(scripted_llm, "orders_agent")
    scripted_llm.reply("Seu pedido está a caminho.")
    send(api, "Minha fatura veio alta")
    scripted_llm.reply("Chega amanhã.")

    body = send(api, "E quando chega?")

    assert (body["agent"], body["answer"]) == ("orders_agent", "Chega amanhã.")
    assert body["metadata"]["route_decision"]["handoff"] is False
    assert body["metadata"]["handoffs"] == []
    assert "You are orders_agent" in scripted_llm.requests[-1]["messages"][0]["content"]
