"""Handing a conversation to a person through the graph: the customer asks, an intent that people answer wins, a
specialist calls ``request_human``, or a profile's rule holds; then the conversation's messages go to the desk until
a person hands it back (docs/desk.md)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.escalation import EscalationSettings
from common.config_version import config_version_bump
from conversations.desk.escalations import Person, desk_reply, escalation_hand_back, escalation_take
from conversations.models import (
    Conversation,
    ConversationOutcome,
    Escalation,
    EscalationStatus,
    Message,
    MessageRole,
)
from handoffs.models import PERSON, Handoff, HandoffKind
from routing.models import Intent

ANA = Person(name="Ana", user_id=None, ref="ana@desk")


def say(api, text, *, session="esc-1", agent_id="telecom_contas", **context):
    response = api.post(
        "/api/gateway/message",
        {"channel": "api", "agent_id": agent_id, "payload": {"text": text, "session_id": session, "context": context}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def people(profile, **settings):
    profile.escalation = EscalationSettings.from_json({**profile.escalation, **settings}).as_json()
    profile.save(update_fields=["escalation"])
    config_version_bump()


def conversation(body) -> Conversation:
    return Conversation.objects.get(conversation_key=body["conversation_key"])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("quero falar com um atendente humano", "Você é o 1º da fila"),
        ("I want to talk to a real person", "You are number 1 in line"),
        ("quiero hablar con una persona", "Usted es el número 1 en la fila"),
    ],
)
def test_a_customer_who_asks_for_a_person_is_queued_and_told_their_place_in_their_language(api, telecom, text, words):
    body = say(api, text)

    escalation = body["metadata"]["escalation"]
    assert escalation["status"] == "queued"
    assert escalation["queue"] == "support"
    assert escalation["position"] == 1
    assert escalation["reason"] == "customer_request"
    assert words in body["answer"]
    assert body["agent"] == PERSON
    stored = conversation(body)
    assert str(stored.escalation_id) == escalation["id"]
    assert stored.outcome == "escalated"
    move = Handoff.objects.get(conversation=stored)
    assert (move.kind, move.to_agent, move.outcome) == (HandoffKind.HUMAN, PERSON, "customer_request")
    assert "asked for a person" in move.context_summary
    assert ConversationOutcome.objects.get(conversation=stored).outcome == "escalated"


def test_a_second_conversation_waits_behind_the_first(api, telecom):
    say(api, "quero falar com um atendente", session="first")
    second = say(api, "quero falar com um atendente", session="second")

    assert second["metadata"]["escalation"]["position"] == 2


def test_while_in_line_the_customer_is_told_their_place_and_no_assistant_answers(api, telecom):
    say(api, "quero falar com um atendente")
    body = say(api, "minha fatura veio alta")

    assert body["metadata"]["route_decision"]["method"] == "human"
    assert body["metadata"]["escalation"]["status"] == "queued"
    assert "continua na fila" in body["answer"]
    assert body["metadata"]["agents"] == []


def test_a_person_takes_answers_and_hands_back_and_the_next_message_is_routed_again(api, telecom):
    opened = say(api, "quero falar com um atendente")
    escalation_id = opened["metadata"]["escalation"]["id"]

    escalation_take(escalation_id=escalation_id, person=ANA)
    reply = desk_reply(escalation_id=escalation_id, person=ANA, text="Olá, sou a Ana. Como posso ajudar?")
    assert reply.role == MessageRole.HUMAN
    assert reply.metadata["author"] == {"kind": "human", "name": "Ana", "id": "ana@desk"}

    held = say(api, "minha fatura veio alta")
    assert held["answer"] == ""
    assert held["message_id"] is None
    assert held["metadata"]["escalation"]["status"] == "assigned"
    assert held["metadata"]["escalation"]["person"] == "Ana"
    assert (
        not Message.objects.filter(conversation=conversation(held), role=MessageRole.ASSISTANT)
        .exclude(pk=opened["message_id"])
        .exists()
    )

    escalation_hand_back(escalation_id=escalation_id, person=ANA)
    assert Escalation.objects.get(pk=escalation_id).status == EscalationStatus.RETURNED
    back = say(api, "minha fatura veio alta")
    assert back["metadata"]["route_decision"]["method"] == "keyword"
    assert back["agent"] == "billing_agent"
    assert back["metadata"]["escalation"] is None
    returned = Handoff.objects.filter(conversation=conversation(back), from_agent=PERSON).get()
    assert returned.kind == HandoffKind.HUMAN


def test_the_sessions_api_shows_who_wrote_each_message(api, telecom):
    opened = say(api, "quero falar com um atendente")
    escalation_id = opened["metadata"]["escalation"]["id"]
    desk_reply(escalation_id=escalation_id, person=ANA, text="Oi! Aqui é a Ana.")

    messages = api.get(f"/api/sessions/{opened['conversation_key']}/messages").json()["messages"]

    assert [m["author"]["kind"] for m in messages] == ["customer", "assistant", "human"]
    assert messages[-1]["author"]["name"] == "Ana"
    assert messages[-1]["content"] == "Oi! Aqui é a Ana."


def test_an_intent_that_people_answer_hands_the_conversation_to_its_team(api, telecom):
    people(telecom, teams=["support", "retention"])
    Intent.objects.filter(profile=telecom, name="support_request").update(escalate_to="retention")
    config_version_bump()

    body = say(api, "quero fazer a troca do aparelho com defeito")

    assert body["metadata"]["escalation"]["queue"] == "retention"
    assert body["metadata"]["escalation"]["reason"] == "intent"
    assert conversation(body).active_specialist == ""  # nobody of the assistants took it


def test_a_specialist_hands_over_when_the_message_asks_for_a_person_among_other_words(api, telecom):
    body = say(api, "minha fatura veio alta e quero falar com um atendente")

    assert body["metadata"]["escalation"]["reason"] == "specialist"
    move = Handoff.objects.get(conversation=conversation(body), kind=HandoffKind.HUMAN)
    assert move.from_agent == "billing_agent"


def test_after_fallbacks_in_a_row_the_rule_hands_over_and_keeps_the_last_answer(api, telecom):
    people(telecom, after_fallbacks=2)

    first = say(api, "xyzzy plugh")
    assert first["metadata"]["escalation"] is None
    second = say(api, "frobnicate the quux")

    assert second["metadata"]["escalation"]["reason"] == "fallbacks"
    assert second["metadata"]["escalation"]["priority"] == "high"
    assert second["answer"].startswith("Support Agent (offline model)")
    assert second["answer"].endswith("You are number 1 in line; someone will be with you shortly.")
    assert second["agent"] == "support_agent"


def test_a_profile_without_people_answers_a_request_for_a_person_with_its_assistants(api, telecom):
    people(telecom, enabled=False)

    body = say(api, "quero falar com um atendente")

    assert body["metadata"]["escalation"] is None
    assert body["metadata"]["route_decision"]["method"] == "small_talk"
    assert not Escalation.objects.exists()


def test_a_profile_without_people_offers_its_specialists_no_request_for_a_person(api, telecom, scripted_llm):
    people(telecom, enabled=False)
    scripted_llm.reply("Vou verificar a sua fatura.")

    say(api, "Minha fatura veio alta e quero falar com um atendente", msisdn="5511999999999")

    (request,) = scripted_llm.requests
    offered = {tool["function"]["name"] for tool in request["tools"]}
    assert offered and "request_human" not in offered


def test_a_profile_without_people_reads_no_request_for_a_person_no_rule_and_no_escalation_row(
    api, telecom, monkeypatch
):
    """Its rules stay as they were (the demo's ``on_loop_stop``), switched off with the rest."""
    people(telecom, enabled=False, on_loop_stop=True, after_fallbacks=2)
    read = work_of_people(monkeypatch)
    say(api, "Minha fatura veio alta")

    with CaptureQueriesContext(connection) as captured:
        body = say(api, "Minha fatura veio alta de novo")

    assert body["metadata"]["llm"] == "offline"
    assert body["metadata"]["escalation"] is None
    assert read == []
    table = f'"{Escalation._meta.db_table}"'
    assert [query["sql"] for query in captured.captured_queries if table in query["sql"]] == []


def test_a_profile_with_people_reads_the_request_for_a_person_and_its_rules_on_every_message(api, telecom, monkeypatch):
    """The counterpart of the test above: what switching people off saves a message."""
    people(telecom, enabled=True, on_loop_stop=True)
    read = work_of_people(monkeypatch)

    say(api, "Minha fatura veio alta")

    assert read == ["person asked: Minha fatura veio alta", "rules"]


def work_of_people(monkeypatch) -> list[str]:
    """What a message reads for people in the loop beside its routing: whether it asks for a person (the specialist
    runtime, for the offline model's ``request_human``) and the profile's rules (the escalation node)."""
    from conversations import graph, runtime

    read: list[str] = []
    asked, after = runtime.person_asked_in, graph.escalation_after
    monkeypatch.setattr(runtime, "person_asked_in", lambda text: read.append(f"person asked: {text}") or asked(text))
    monkeypatch.setattr(
        graph, "escalation_after", lambda *args, **kwargs: read.append("rules") or after(*args, **kwargs)
    )
    return read


def test_a_model_that_calls_request_human_hands_over_to_the_team_it_names_with_its_summary(api, telecom, scripted_llm):
    people(telecom, teams=["support", "billing"])
    scripted_llm.reply_tool_call(
        "request_human",
        {
            "reason": "Contestação acima do meu limite",
            "context_summary": "Fatura de 289,90 contestada",
            "team": "billing",
        },
    )

    body = say(api, "Minha fatura veio alta", msisdn="5511999999999")

    escalation = body["metadata"]["escalation"]
    assert (escalation["reason"], escalation["queue"]) == ("specialist", "billing")
    (request,) = scripted_llm.requests
    offered = {tool["function"]["name"]: tool["function"] for tool in request["tools"]}
    assert offered["request_human"]["parameters"]["properties"]["team"]["enum"] == ["support", "billing"]
    stored = Escalation.objects.get(pk=escalation["id"])
    assert stored.reason_text == "Contestação acima do meu limite"
    assert "Fatura de 289,90 contestada" in stored.summary
    assert "Você é o 1º da fila" in body["answer"]
