"""Handoffs, delegation and the permission gate end to end on the demo data, with the offline model.

The demo configuration (``seed_demo``) is loaded as shipped and its MCP
servers run as real processes, so these are the flows docs/handoffs.md shows.
"""

from __future__ import annotations

import pytest

from conversations.models import Conversation, Message, ToolCall
from handoffs.models import Handoff
from releases.models import ConversationTest

MSISDN = "5511999999999"


@pytest.fixture
def demo(served_module_demo):
    """The demo as shipped, seeded once for this module (``module_demo``: each test's writes rolled back after it),
    its MCP servers the running ones."""


def say(api, text, *, agent_id="telecom_assistente", session="demo-1", **context):
    response = api.post(
        "/api/gateway/message",
        {"channel": "api", "agent_id": agent_id, "payload": {"text": text, "session_id": session, "context": context}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def moves(body) -> list[tuple[str, str, str, str, str]]:
    return [
        (m["from_agent"], m["to_agent"], m["kind"], m["status"], m["outcome"]) for m in body["metadata"]["handoffs"]
    ]


def session(api, key):
    response = api.get(f"/api/sessions/{key}/messages")
    assert response.status_code == 200
    return response.json()


# --- sub-conversations ------------------------------------------------------------


def test_the_coordinator_delegates_and_the_specialist_answers_the_same_message_at_once(api, demo):
    body = say(api, "Minha fatura veio alta", msisdn=MSISDN)

    assert body["agent"] == "billing_agent"
    assert body["metadata"]["agents"] == ["assistente_virtual", "billing_agent"]
    assert moves(body) == [("assistente_virtual", "billing_agent", "delegation", "completed", "")]
    # The specialist answered the user's own message, from the tools it ran over MCP.
    assert {r["tool"]: r["status"] for r in body["metadata"]["mcp_results"]} == {
        "consultar_fatura": "ok",
        "consultar_pagamentos": "ok",
    }
    assert "289,90" in body["answer"]
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.active_specialist == "billing_agent"
    assert conversation.sub_conversation["specialist"] == "billing_agent"
    assert conversation.sub_conversation["coordinator"] == "assistente_virtual"


def test_the_transfer_is_never_announced_to_the_user(api, demo):
    body = say(api, "Minha fatura veio alta", msisdn=MSISDN)

    stored = session(api, body["conversation_key"])
    shown = [m for m in stored["messages"] if m["role"] == "assistant"]
    assert len(shown) == 1 and shown[0]["agent"] == "billing_agent"
    assert "assistente" not in body["answer"].lower() and "transfer" not in body["answer"].lower()


def test_follow_ups_go_to_the_delegated_specialist_without_the_router(api, demo):
    first = say(api, "Minha fatura veio alta", msisdn=MSISDN)
    second = say(api, "e quando vence?")

    assert second["agent"] == "billing_agent"
    assert second["metadata"]["route_decision"]["method"] == "sub_conversation"
    assert second["metadata"]["handoffs"] == []
    assert second["conversation_key"] == first["conversation_key"]


def test_ending_the_sub_conversation_returns_control_and_the_result_reaches_the_coordinator_once(api, demo):
    say(api, "Minha fatura veio alta", msisdn=MSISDN)
    closing = say(api, "Obrigado, resolvido!")

    assert closing["agent"] == "billing_agent"  # the specialist says goodbye itself
    assert moves(closing) == [("billing_agent", "assistente_virtual", "return", "completed", "completed")]
    conversation = Conversation.objects.get(conversation_key=closing["conversation_key"])
    assert conversation.sub_conversation is None
    assert conversation.active_specialist == "assistente_virtual"
    assert conversation.pending_result["status"] == "completed"
    assert conversation.pending_result["last_user_message"] == "Obrigado, resolvido!"

    nxt = say(api, "Oi, tudo bem?")
    assert nxt["agent"] == "assistente_virtual"
    assert nxt["answer"].endswith("Retomando o atendimento: Olá! Como posso ajudar?")  # the greeting, in kind
    assert "billing_agent" not in nxt["answer"]  # a specialist's name is not for the customer
    assert nxt["metadata"]["route_decision"]["method"] == "small_talk"  # a greeting: the coordinator answers it
    conversation.refresh_from_db()
    assert conversation.pending_result is None
    notes = Message.objects.filter(conversation=conversation, role="system")
    assert notes.count() == 1
    assert notes.get().content.startswith(
        "[SYSTEM_NOTE: the sub-conversation with billing_agent ended. status: completed"
    )

    later = say(api, "Mais uma dúvida geral")
    assert "Retomando" not in later["answer"]
    assert Message.objects.filter(conversation=conversation, role="system").count() == 1  # delivered once


def test_an_out_of_scope_message_is_re_delegated_to_the_right_specialist_in_the_same_turn(api, demo):
    say(api, "Minha fatura veio alta", msisdn=MSISDN)
    body = say(api, "Meu pedido P100 atrasou", order_id="P100")

    assert body["agent"] == "orders_agent"
    assert moves(body) == [
        ("billing_agent", "assistente_virtual", "return", "completed", "out_of_scope"),
        ("assistente_virtual", "orders_agent", "delegation", "completed", ""),
    ]
    assert body["metadata"]["agents"] == ["billing_agent", "assistente_virtual", "orders_agent"]
    assert {r["tool"] for r in body["metadata"]["mcp_results"]} == {"consultar_pedido", "consultar_entrega"}
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.sub_conversation["specialist"] == "orders_agent"
    assert conversation.pending_result is None  # the coordinator used it at once
    rows = list(Handoff.objects.filter(conversation=conversation).values_list("kind", "outcome"))
    assert rows == [("delegation", ""), ("return", "out_of_scope"), ("delegation", "")]


def test_a_message_that_hits_no_specialist_stays_with_the_coordinator(api, demo):
    body = say(api, "Bom dia!")

    assert body["agent"] == "assistente_virtual"
    assert body["metadata"]["handoffs"] == []
    assert Conversation.objects.get(conversation_key=body["conversation_key"]).sub_conversation is None


# --- agent-to-agent handoff (router mode) ---------------------------------------------------


def test_another_specialists_request_inside_a_flow_goes_to_it_and_the_flow_waits(api, demo):
    say(api, "Quero pagar com pix", agent_id="telecom_contas", session="h-1", msisdn=MSISDN)
    body = say(api, "Na verdade meu pedido P100 atrasou", agent_id="telecom_contas", session="h-1", order_id="P100")

    assert body["metadata"]["route_decision"]["method"] in ("keyword", "examples")
    assert body["agent"] == "orders_agent"
    assert [event["event"] for event in body["metadata"]["conversation"]["events"]] == ["pushed", "resumed"]
    row = Handoff.objects.get(conversation__conversation_key=body["conversation_key"])
    assert (row.from_agent, row.to_agent, row.kind) == ("billing_agent", "orders_agent", "routing_handoff")
    stored = session(api, body["conversation_key"])
    assert stored["active_specialist"] == "orders_agent"
    assert Conversation.objects.get(conversation_key=body["conversation_key"]).state == "WAITING_PAYMENT_CONFIRMATION"


# --- permission gate ------------------------------------------------------------------------


def test_a_tool_needing_permission_is_asked_for_and_not_run(api, demo):
    body = say(api, "Estou sem sinal no celular", agent_id="telecom_contas", session="p-1", msisdn=MSISDN)

    assert body["agent"] == "support_agent"
    assert "autorização" in body["answer"] and "diagnosticar_linha" in body["answer"]
    assert [r["status"] for r in body["metadata"]["mcp_results"]] == ["permission_required"]
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.pending_permission["tool"] == "diagnosticar_linha"
    assert conversation.granted_permissions == []
    assert list(ToolCall.objects.filter(conversation=conversation).values_list("status", flat=True)) == [
        "permission_required"
    ]


def test_a_confirmation_grants_the_tool_runs_it_and_the_grant_is_remembered(api, demo):
    say(api, "Estou sem sinal no celular", agent_id="telecom_contas", session="p-2", msisdn=MSISDN)
    granted = say(api, "Sim, pode", agent_id="telecom_contas", session="p-2")

    assert granted["metadata"]["route_decision"]["method"] == "permission"
    assert granted["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "granted"}
    assert [(r["tool"], r["status"]) for r in granted["metadata"]["mcp_results"]] == [("diagnosticar_linha", "ok")]
    stored = session(api, granted["conversation_key"])
    assert stored["granted_permissions"] == ["diagnosticar_linha"]
    assert stored["pending_permission"] is None

    again = say(api, "Continuo sem sinal", agent_id="telecom_contas", session="p-2", msisdn=MSISDN)
    assert [(r["tool"], r["status"]) for r in again["metadata"]["mcp_results"]] == [("diagnosticar_linha", "ok")]
    assert "autorização" not in again["answer"]


def test_a_refusal_keeps_the_tool_unrun_and_ungranted(api, demo):
    say(api, "Estou sem sinal no celular", agent_id="telecom_contas", session="p-3", msisdn=MSISDN)
    denied = say(api, "Não, prefiro não", agent_id="telecom_contas", session="p-3")

    assert denied["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "denied"}
    assert denied["metadata"]["mcp_results"] == []
    assert "diagnosticar_linha" not in denied["metadata"]["mcp_tools"]
    conversation = Conversation.objects.get(conversation_key=denied["conversation_key"])
    assert conversation.granted_permissions == [] and conversation.pending_permission is None

    # Asked again next time: a refusal is not remembered as a grant.
    asked = say(api, "Estou sem sinal de novo", agent_id="telecom_contas", session="p-3", msisdn=MSISDN)
    assert [r["status"] for r in asked["metadata"]["mcp_results"]] == ["permission_required"]


def test_another_specialists_request_keeps_the_permission_question_waiting_and_asks_it_again(api, demo):
    say(api, "Estou sem sinal no celular", agent_id="telecom_contas", session="p-4", msisdn=MSISDN)
    body = say(api, "Minha fatura veio alta", agent_id="telecom_contas", session="p-4", msisdn=MSISDN)

    assert body["agent"] == "billing_agent"
    assert body["metadata"]["route_decision"]["method"] == "keyword"
    assert "diagnosticar_linha" in body["answer"].split("\n\n")[-1]  # asked again after the answer
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.pending_permission["tool"] == "diagnosticar_linha" and conversation.granted_permissions == []
    granted = say(api, "sim", agent_id="telecom_contas", session="p-4", msisdn=MSISDN)
    assert granted["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "granted"}


def test_a_new_request_to_the_specialist_that_asked_drops_the_permission_question(api, demo):
    say(api, "Estou sem sinal no celular", agent_id="telecom_contas", session="p-4b", msisdn=MSISDN)
    body = say(api, "meu chip parou de funcionar", agent_id="telecom_contas", session="p-4b", msisdn=MSISDN)

    assert body["agent"] == "support_agent"
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.granted_permissions == []
    assert "closed" in [event["event"] for event in body["metadata"]["conversation"]["events"]] or (
        conversation.pending_permission is not None  # the specialist asked again, for the new request
    )


def test_the_confirmation_words_are_the_profiles_own(api, demo):
    from agents.models import AgentProfile
    from releases.versions import version_publish

    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    profile.confirmation_words = ["manda ver"]
    profile.save()
    # The demo's conversation tests expect the question to end 'Responda "sim"': this test changes that on purpose.
    ConversationTest.objects.filter(profile=profile).update(enabled=False)
    version_publish(profile=profile, note="manda ver confirms")

    say(api, "Estou sem sinal no celular", agent_id="telecom_contas", session="p-5", msisdn=MSISDN)
    body = say(api, "manda ver", agent_id="telecom_contas", session="p-5")

    assert body["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "granted"}


# --- a reply to a pending question is read as a reply before routing ----------------------------------------------


def ask_permission(api, session):
    asked = say(api, "Estou sem sinal no celular", agent_id="telecom_contas", session=session, msisdn=MSISDN)
    assert [r["status"] for r in asked["metadata"]["mcp_results"]] == ["permission_required"]
    return asked


def test_a_grant_with_more_words_runs_the_tool_for_the_specialist_that_asked_and_hands_nothing_off(api, demo):
    # The walk-through of docs/handoffs.md: the examples tier scores "sim, pode diagnosticar" as billing's payment
    # request, which used to make support_agent hand the grant to billing_agent.
    ask_permission(api, "r-1")
    body = say(api, "sim, pode diagnosticar", agent_id="telecom_contas", session="r-1")

    decision = body["metadata"]["route_decision"]
    assert decision["method"] == "permission"
    assert body["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "granted"}
    assert body["metadata"]["handoffs"] == []
    assert not Handoff.objects.filter(conversation__conversation_key=body["conversation_key"]).exists()
    assert body["agent"] == "support_agent"
    assert [(r["tool"], r["status"]) for r in body["metadata"]["mcp_results"]] == [("diagnosticar_linha", "ok")]
    assert session(api, body["conversation_key"])["active_specialist"] == "support_agent"
    assert decision["metadata"]["reply"] == {"reads_as": "yes", "words": "sim"}


@pytest.mark.parametrize(
    ("text", "words"),
    [("pode verificar sim", "pode"), ("yes, go ahead", "yes"), ("sí, adelante", "si"), ("dale, revisa", "dale")],
)
def test_a_grant_in_any_of_the_three_languages_is_read_as_a_reply(api, demo, text, words):
    ask_permission(api, f"r-{words}")
    body = say(api, text, agent_id="telecom_contas", session=f"r-{words}")

    assert body["metadata"]["route_decision"]["metadata"]["reply"] == {"reads_as": "yes", "words": words}
    assert body["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "granted"}
    assert (body["agent"], body["metadata"]["handoffs"]) == ("support_agent", [])
    assert [(r["tool"], r["status"]) for r in body["metadata"]["mcp_results"]] == [("diagnosticar_linha", "ok")]


def test_a_refusal_with_thanks_is_a_denial_answered_by_the_specialist_that_asked(api, demo):
    ask_permission(api, "r-no")
    body = say(api, "não, obrigado", agent_id="telecom_contas", session="r-no")

    assert body["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "denied"}
    assert body["metadata"]["route_decision"]["metadata"]["reply"] == {"reads_as": "no", "words": "não"}
    assert (body["agent"], body["metadata"]["handoffs"], body["metadata"]["mcp_results"]) == ("support_agent", [], [])
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.granted_permissions == [] and conversation.pending_permission is None


@pytest.mark.parametrize(
    ("asked", "refused", "declined", "article"),
    [
        (
            "minha internet de casa não conecta desde a chuva",
            "não, deixa a minha linha como está",
            "não usei diagnosticar_linha",
            "Internet fibra sem conexão ou lenta",
        ),
        (
            "my fibre internet is slow and the modem won't connect",
            "no, leave my line as it is",
            "I did not use diagnosticar_linha",
            "Fibre internet down or slow",
        ),
        (
            "el internet de casa no conecta desde la tormenta",
            "no, deja mi línea como está",
            "no usé diagnosticar_linha",
            "Internet de fibra sin conexión o lenta",
        ),
    ],
)
def test_a_refusal_is_answered_on_the_request_it_was_asked_for_and_says_what_was_not_checked(
    api, demo, asked, refused, declined, article
):
    session_id = "r-declined-" + asked.split()[0]
    first = say(api, asked, agent_id="telecom_contas", session=session_id, msisdn=MSISDN)
    assert [r["status"] for r in first["metadata"]["mcp_results"]] == ["permission_required"]
    body = say(api, refused, agent_id="telecom_contas", session=session_id)

    assert body["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "denied"}
    assert (body["agent"], body["metadata"]["handoffs"]) == ("support_agent", [])
    assert declined in body["answer"]
    # The help centre was searched for the request, not for the refusal's words about the line.
    assert [c["title"] for c in body["metadata"]["knowledge"]["citations"]] == [article]
    assert refused not in body["answer"]


def test_a_question_holding_a_yes_word_is_no_grant_and_is_routed_as_usual(api, demo):
    ask_permission(api, "r-q")
    body = say(api, "você pode me dizer o valor da fatura?", agent_id="telecom_contas", session="r-q", msisdn=MSISDN)

    assert body["metadata"]["permission"] is None
    assert (body["agent"], body["metadata"]["route_decision"]["method"]) == ("billing_agent", "keyword")
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    # A side question: the permission question waits, ungranted.
    assert conversation.granted_permissions == [] and conversation.pending_permission["tool"] == "diagnosticar_linha"


def test_a_yes_or_no_in_a_state_flow_is_recorded_and_stays_with_the_flow_that_asked(api, demo):
    say(api, "Quero pagar com pix", agent_id="telecom_contas", session="r-state", msisdn=MSISDN)
    # The examples tier scores "no, not yet" as order tracking: billing_agent used to hand it to orders_agent.
    body = say(api, "no, not yet", agent_id="telecom_contas", session="r-state")

    decision = body["metadata"]["route_decision"]
    assert decision["method"] == "state"
    assert (body["agent"], body["metadata"]["handoffs"]) == ("billing_agent", [])
    assert not Handoff.objects.filter(conversation__conversation_key=body["conversation_key"]).exists()
    assert decision["metadata"]["reply"] == {"reads_as": "no", "words": "no"}


def test_a_message_in_a_state_flow_that_is_no_reply_records_none_and_goes_to_its_own_specialist(api, demo):
    say(api, "Quero pagar com pix", agent_id="telecom_contas", session="r-state-2", msisdn=MSISDN)
    body = say(
        api, "Na verdade, meu pedido P100 atrasou", agent_id="telecom_contas", session="r-state-2", order_id="P100"
    )

    decision = body["metadata"]["route_decision"]
    assert decision["method"] != "state" and "reply" not in decision["metadata"]
    assert decision["metadata"]["digression_from"] == "WAITING_PAYMENT_CONFIRMATION"
    assert body["agent"] == "orders_agent"
    assert [move[:4] for move in moves(body)] == [("billing_agent", "orders_agent", "routing_handoff", "completed")]


def test_what_follows_a_reply_in_a_long_message_still_moves_the_conversation(api, demo):
    say(api, "Quero pagar com pix", agent_id="telecom_contas", session="r-state-3", msisdn=MSISDN)
    body = say(
        api, "Não, na verdade meu pedido P100 atrasou", agent_id="telecom_contas", session="r-state-3", order_id="P100"
    )

    assert body["metadata"]["route_decision"]["metadata"]["reply"] == {"reads_as": "no", "words": "não"}
    assert body["agent"] == "orders_agent"
    assert moves(body) == [("billing_agent", "orders_agent", "handoff", "completed", "")]


def test_a_refusal_to_a_delegated_specialist_does_not_end_its_sub_conversation(api, demo):
    # "obrigado" is a closing word: read as part of the reply, it no longer ends the sub-conversation.
    from agents.models import AgentProfile, McpTool
    from releases.versions import version_publish

    McpTool.objects.filter(name="consultar_pagamentos").update(needs_permission=True)
    profile = AgentProfile.objects.get(agent_id="telecom_assistente")
    # The demo's conversation tests expect the payments read at once: this test changes that on purpose.
    ConversationTest.objects.filter(profile=profile).update(enabled=False)
    version_publish(profile=profile, note="payments need permission")
    asked = say(api, "Minha fatura veio alta", session="r-sub", msisdn=MSISDN)
    assert asked["agent"] == "billing_agent"
    assert {r["tool"]: r["status"] for r in asked["metadata"]["mcp_results"]} == {
        "consultar_fatura": "ok",
        "consultar_pagamentos": "permission_required",
    }

    body = say(api, "não, obrigado", session="r-sub")

    assert body["metadata"]["permission"] == {"tool": "consultar_pagamentos", "reply": "denied"}
    assert body["metadata"]["handoffs"] == []
    assert body["agent"] == "billing_agent"
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.sub_conversation["specialist"] == "billing_agent"


def test_a_paraphrase_without_keywords_is_delegated_by_the_examples(api, demo):
    body = say(api, "why was I charged so much this month?", msisdn=MSISDN)  # no keyword, no example

    assert body["agent"] == "billing_agent"
    assert moves(body) == [("assistente_virtual", "billing_agent", "delegation", "completed", "")]
    [candidate] = body["metadata"]["route_decision"]["metadata"]["candidates"]
    assert candidate["intent"] == "billing_invoice_explanation" and candidate["examples"]["nearest"]
