"""Sub-conversations driven by a real model path: the scripted OpenAI-compatible server.

The coordinator and the specialists are the ``telecom`` fixture's, with a
coordinator added; the model's replies are scripted, and what it received is
read back from the server.
"""

from __future__ import annotations

import pytest

from conversations.models import Conversation, Message
from handoffs.models import Handoff
from tests.factories import SpecialistFactory

NOTE = "[SYSTEM_NOTE: the sub-conversation with"


@pytest.fixture
def coordinated(telecom):
    coordinator = SpecialistFactory(profile=telecom, name="assistente")
    telecom.coordinator = coordinator
    telecom.save()
    return telecom


def say(api, text, session="d-1", **context):
    response = api.post(
        "/api/gateway/message",
        {
            "channel": "api",
            "agent_id": "telecom_contas",
            "payload": {"text": text, "session_id": session, "context": context},
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def tool_names(request) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def tool_enum(request, name: str, argument: str) -> list[str]:
    tool = next(t for t in request["tools"] if t["function"]["name"] == name)
    return tool["function"]["parameters"]["properties"][argument]["enum"]


def notes_in(request) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system" and NOTE in (m["content"] or "")]


def delegate(scripted_llm, role="billing_agent", *, content=None):
    scripted_llm.reply_tool_call(
        "request_specialist_sub_conversation",
        {"specialist_role": role, "initial_context": "Cliente acha a fatura alta."},
        content=content,
    )


def end(scripted_llm, status="completed", *, content=None):
    scripted_llm.reply_tool_call(
        "end_specialist_sub_conversation",
        {
            "status": status,
            "final_result": {"diagnostico": "fatura com roaming"},
            "last_user_message": "ok, entendi",
            "message_to_coordinator": "Cliente satisfeito.",
        },
        content=content,
    )


def test_the_coordinator_is_offered_delegation_to_the_profiles_specialists(api, coordinated, scripted_llm):
    scripted_llm.reply("Olá! Como posso ajudar?")

    body = say(api, "Oi")

    assert body["agent"] == "assistente"
    request = scripted_llm.requests[0]
    assert tool_names(request) == {"request_specialist_sub_conversation", "request_human"}
    assert tool_enum(request, "request_specialist_sub_conversation", "specialist_role") == [
        "billing_agent",
        "orders_agent",
        "product_agent",
        "support_agent",
    ]


def test_the_delegated_specialist_answers_the_same_message_and_the_coordinators_text_is_dropped(
    api, coordinated, scripted_llm
):
    delegate(scripted_llm, content="Vou transferir você para o especialista financeiro.")
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")

    body = say(api, "Minha fatura veio alta")

    assert body["answer"] == "Sua fatura subiu por causa do roaming."
    assert body["agent"] == "billing_agent"
    specialist_request = scripted_llm.requests[1]
    assert specialist_request["messages"][-1] == {"role": "user", "content": "Minha fatura veio alta"}
    assert any("Cliente acha a fatura alta." in (m["content"] or "") for m in specialist_request["messages"])
    assert "end_specialist_sub_conversation" in tool_names(specialist_request)
    assert "request_specialist_sub_conversation" not in tool_names(specialist_request)
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert "transferir" not in " ".join(conversation.messages.values_list("content", flat=True))


def test_follow_ups_reach_the_specialist_until_it_ends_and_the_result_reaches_the_coordinator_exactly_once(
    api, coordinated, scripted_llm
):
    delegate(scripted_llm)
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")
    say(api, "Minha fatura veio alta")

    scripted_llm.reply("O roaming foi usado em 3 de junho.")
    follow_up = say(api, "Quando foi isso?")
    assert follow_up["agent"] == "billing_agent"
    assert len(scripted_llm.requests) == 3  # the specialist alone, no coordinator in between

    end(scripted_llm, content="Que bom que ajudei!")
    closing = say(api, "ok, entendi")
    assert closing["answer"] == "Que bom que ajudei!"
    assert closing["metadata"]["handoffs"][0]["kind"] == "return"
    assert closing["metadata"]["handoffs"][0]["outcome"] == "completed"
    assert notes_in(scripted_llm.requests[-1]) == []  # the coordinator was not called in this turn

    scripted_llm.reply("Claro, e sobre a fatura: era roaming. Algo mais?")
    say(api, "Tenho outra dúvida")
    (note,) = notes_in(scripted_llm.requests[-1])
    assert "status: completed" in note
    assert '"diagnostico": "fatura com roaming"' in note
    assert 'last_user_message: "ok, entendi"' in note
    assert 'message_to_coordinator: "Cliente satisfeito."' in note
    # The note comes with the new message: it sits right before it.
    assert scripted_llm.requests[-1]["messages"][-1]["content"] == "Tenho outra dúvida"

    scripted_llm.reply("Certo.")
    say(api, "E mais uma")
    assert notes_in(scripted_llm.requests[-1]) == []


def test_out_of_scope_makes_the_coordinator_re_delegate_the_same_message(api, coordinated, scripted_llm):
    delegate(scripted_llm)
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")
    say(api, "Minha fatura veio alta")

    end(scripted_llm, "out_of_scope")  # the billing specialist does not answer it
    delegate(scripted_llm, "orders_agent")  # the coordinator, seeing the note, re-delegates at once
    scripted_llm.reply("Seu pedido P100 saiu para entrega.")
    body = say(api, "E meu pedido P100?")

    # A side question inside the delegation: answered by orders_agent, then the delegation to billing resumed.
    assert body["answer"].startswith("Seu pedido P100 saiu para entrega.\n\nVoltando ao que estávamos vendo")
    assert body["agent"] == "orders_agent"
    coordinator_request = scripted_llm.requests[-2]
    (note,) = notes_in(coordinator_request)
    assert "status: out_of_scope" in note
    assert coordinator_request["messages"][-1]["content"] == "E meu pedido P100?"
    assert scripted_llm.requests[-1]["messages"][-1]["content"] == "E meu pedido P100?"
    assert [(h["kind"], h["from_agent"], h["to_agent"]) for h in body["metadata"]["handoffs"]] == [
        ("return", "billing_agent", "assistente"),
        ("delegation", "assistente", "orders_agent"),
    ]
    assert [event["event"] for event in body["metadata"]["conversation"]["events"]] == ["pushed", "resumed"]
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.sub_conversation["specialist"] == "billing_agent"
    assert conversation.pending_result is None


def test_a_new_request_that_asks_nothing_moves_the_delegation_to_the_other_specialist(api, coordinated, scripted_llm):
    delegate(scripted_llm)
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")
    say(api, "Minha fatura veio alta")

    end(scripted_llm, "out_of_scope")
    delegate(scripted_llm, "orders_agent")
    scripted_llm.reply("Vou acompanhar o pedido P100.")
    body = say(api, "Agora quero acompanhar meu pedido P100")

    assert body["answer"] == "Vou acompanhar o pedido P100."
    assert [(e["event"], e["frame"]["name"]) for e in body["metadata"]["conversation"]["events"]] == [
        ("closed", "billing_agent"),
        ("opened", "orders_agent"),
    ]
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.sub_conversation["specialist"] == "orders_agent"


def test_a_specialist_that_ends_without_a_word_hands_the_message_to_the_coordinator_at_once(
    api, coordinated, scripted_llm
):
    delegate(scripted_llm)
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")
    say(api, "Minha fatura veio alta")

    end(scripted_llm)
    scripted_llm.reply("Fico feliz que esteja resolvido!")
    body = say(api, "ok, entendi")

    assert body["answer"] == "Fico feliz que esteja resolvido!"
    assert body["agent"] == "assistente"
    assert len(notes_in(scripted_llm.requests[-1])) == 1
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert conversation.pending_result is None and conversation.active_specialist == "assistente"


def test_delegating_to_an_unknown_role_is_refused_and_the_coordinator_answers(api, coordinated, scripted_llm):
    delegate(scripted_llm, "especialista_inexistente")
    scripted_llm.reply("Posso ajudar com sua fatura por aqui mesmo.")

    body = say(api, "Minha fatura veio alta")

    assert body["agent"] == "assistente"
    assert body["answer"] == "Posso ajudar com sua fatura por aqui mesmo."
    row = Handoff.objects.get()
    assert (row.kind, row.status, row.outcome, row.to_agent) == (
        "delegation",
        "refused",
        "not_allowed",
        "especialista_inexistente",
    )
    refusal = scripted_llm.requests[1]["messages"][-1]
    assert refusal["role"] == "tool" and "billing_agent" in refusal["content"]


def test_ending_and_clearing_the_session_through_the_api(api, coordinated, scripted_llm):
    delegate(scripted_llm)
    scripted_llm.reply("Sua fatura subiu por causa do roaming.")
    key = say(api, "Minha fatura veio alta")["conversation_key"]

    assert api.delete(f"/api/sessions/{key}").status_code == 200
    conversation = Conversation.objects.get(conversation_key=key)
    assert conversation.sub_conversation is None and conversation.active_specialist == ""

    scripted_llm.reply("Olá de novo!")
    body = say(api, "Oi")
    assert body["agent"] == "assistente"  # the session starts afresh with the coordinator
    assert [m["role"] for m in scripted_llm.requests[-1]["messages"]] == ["system", "user"]  # no earlier history

    cleared = api.post(f"/api/sessions/{key}/clear").json()
    assert cleared["cleared"]["messages"] == 4
    assert Message.objects.filter(conversation=conversation).count() == 0
    assert Handoff.objects.filter(conversation=conversation).count() == 1  # analytics keep the delegation
