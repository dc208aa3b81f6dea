"""Small talk end to end on the demo data: answered by the fallback or the coordinator, moving nothing.

The demo (``seed_demo``) is loaded as shipped, its MCP servers running, the offline model answering: the flows
docs/handoffs.md shows.
"""

from __future__ import annotations

import pytest

from conversations.models import Conversation, Escalation, Message
from handoffs.models import Handoff
from handoffs.tests.test_demo_flows import say

MSISDN = "5511999999999"
DEMO_PROFILES = ("telecom_contas", "retail_orders", "telecom_assistente", "finance_assistente")
GREETINGS = {"pt": "Bom dia, tudo bem?", "en": "Hi there, how are you?", "es": "¡Hola! ¿Qué tal?"}


def conversation_of(body) -> Conversation:
    return Conversation.objects.get(conversation_key=body["conversation_key"])


@pytest.mark.parametrize("agent_id", DEMO_PROFILES)
@pytest.mark.parametrize("language", sorted(GREETINGS))
def test_a_greeting_in_each_language_sets_no_state_on_any_demo_profile(api, served_module_demo, agent_id, language):
    body = say(api, GREETINGS[language], agent_id=agent_id, session=f"greeting-{language}")

    assert body["metadata"]["route_decision"]["method"] == "small_talk"
    assert body["metadata"]["route_decision"]["next_state"] is None
    assert body["metadata"]["handoffs"] == []
    conversation = conversation_of(body)
    assert conversation.state == ""
    assert conversation.sub_conversation is None
    assert not (conversation.goal_state or {}).get("pending")


def test_the_documented_sub_conversation_walk_through_resumes_with_the_coordinator_on_a_greeting(
    api, served_module_demo
):
    """docs/handoffs.md, "A scripted conversation on the demo data": the four messages of session demo-sub."""

    def walk(text, **context):
        return say(api, text, agent_id="telecom_assistente", session="demo-sub", **context)

    bill = walk("Minha fatura veio alta", msisdn=MSISDN, invoice_id="INV001")
    assert bill["agent"] == "billing_agent"
    assert "289,90" in bill["answer"]

    order = walk("Meu pedido P100 atrasou?", order_id="P100")
    assert order["agent"] == "orders_agent"
    assert [(m["from_agent"], m["to_agent"], m["kind"]) for m in order["metadata"]["handoffs"]] == [
        ("billing_agent", "assistente_virtual", "return"),
        ("assistente_virtual", "orders_agent", "delegation"),
    ]
    # A side question: answered by orders_agent, and the delegation to billing_agent resumed after it.
    assert [event["event"] for event in order["metadata"]["conversation"]["events"]] == ["pushed", "resumed"]
    assert order["answer"].endswith("Voltando ao que estávamos vendo: podemos continuar?")
    assert conversation_of(order).sub_conversation["specialist"] == "billing_agent"

    thanks = walk("Obrigado, resolvido!")
    assert thanks["agent"] == "billing_agent"
    assert [(m["from_agent"], m["to_agent"], m["outcome"]) for m in thanks["metadata"]["handoffs"]] == [
        ("billing_agent", "assistente_virtual", "completed")
    ]

    resumed = walk("Bom dia, tudo certo então")
    assert resumed["agent"] == "assistente_virtual"
    assert resumed["metadata"]["route_decision"]["method"] == "small_talk"
    assert resumed["answer"].endswith("Retomando o atendimento: Olá! Como posso ajudar?")  # the greeting, in kind
    assert "billing_agent" not in resumed["answer"]  # a specialist's name is not for the customer
    assert resumed["metadata"]["handoffs"] == []  # no delegation on a greeting
    conversation = conversation_of(resumed)
    assert conversation.pending_result is None  # the return note was delivered, once
    assert conversation.sub_conversation is None


def test_small_talk_in_a_flow_waiting_for_a_reply_leaves_the_flow_waiting(api, served_module_demo):
    def walk(text, **context):
        return say(api, text, agent_id="telecom_contas", session="pay-thanks", **context)

    walk("Quero pagar com pix", msisdn=MSISDN)
    assert conversation_of(walk("obrigado!")).state == "WAITING_PAYMENT_CONFIRMATION"

    thanks = Message.objects.filter(role="assistant").latest("pk")
    assert thanks.agent == "support_agent"
    reply = walk("sim")
    assert reply["agent"] == "billing_agent"
    assert reply["metadata"]["route_decision"]["method"] == "state"


def test_small_talk_keeps_the_active_specialist_and_records_no_handoff(api, served_module_demo):
    def walk(text, **context):
        return say(api, text, agent_id="telecom_contas", session="keeps", **context)

    first = walk("Minha fatura veio alta", msisdn=MSISDN)
    assert first["agent"] == "billing_agent"
    greeting = walk("valeu, até mais")

    assert greeting["agent"] == "support_agent"
    assert greeting["metadata"]["route_decision"]["handoff"] is False
    conversation = conversation_of(greeting)
    assert conversation.active_specialist == "billing_agent"
    assert conversation.active_intent == "billing_invoice_explanation"
    assert not Handoff.objects.filter(conversation=conversation).exists()


@pytest.mark.parametrize(
    ("question", "asking_for_one"),
    [
        ("tô falando com gente ou com robô?", "quero falar com uma pessoa"),
        ("is this a real person or a bot?", "can I talk to a human?"),
        ("¿estoy hablando con una persona o con una máquina?", "pásame con una persona"),
        ("¿eres humano?", "quiero hablar con un asesor"),
    ],
)
def test_asking_whether_a_person_answers_is_answered_and_queues_no_one_until_the_customer_asks_for_one(
    api, served_module_demo, question, asking_for_one
):
    def walk(text):
        return say(api, text, agent_id="telecom_contas", session="who-answers", msisdn=MSISDN)

    asked = walk(question)

    assert asked["metadata"]["route_decision"]["intent"] == "small_talk:bot_question"
    assert asked["agent"] == "support_agent"
    conversation = conversation_of(asked)
    assert not Escalation.objects.filter(conversation=conversation).exists()
    assert conversation.outcome != "escalated"

    queued = walk(asking_for_one)
    assert queued["metadata"]["route_decision"]["intent"] == "small_talk:human_request"
    assert queued["metadata"]["escalation"]["status"] == "queued"
