"""What one request is when a message is cut into clauses (routing.stack's several requests): an order number the
customer names beside a request, or a complaint told in two clauses, is one request; two requests stay two. On the
demo as shipped, through the route preview (the decision the chat would make); on SQLite too."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile
from routing.stack import clauses

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

PREVIEW_URL = "/admin/routing/intent/preview/"


def decided(client, agent_id: str, text: str):
    profile = AgentProfile.objects.get(agent_id=agent_id)
    response = client.get(PREVIEW_URL, {"profile": profile.pk, "text": text})
    assert response.status_code == 200
    return response.context["preview"].decision


@pytest.mark.parametrize(
    ("agent_id", "text", "agent"),
    [
        ("retail_orders", "meu tênis veio com defeito, a sola soltou. quero trocar, pedido P200", "support_agent"),
        ("retail_orders", "the kettle arrived faulty, I want to exchange it. it's order P300", "support_agent"),
        ("retail_orders", "la mochila llegó con el cierre roto, quiero devolverla. es el pedido P200", "support_agent"),
        # A coordinator's profile: its coordinator delegates the one request.
        ("telecom_assistente", "o roteador que comprei não liga, ainda tem garantia? é o pedido P200", ""),
        ("telecom_assistente", "el módem que compré no prende, ¿tiene garantía? es el pedido P200", ""),
    ],
)
def test_an_order_number_beside_a_request_is_no_request_of_its_own(staff_client, module_demo, agent_id, text, agent):
    decision = decided(staff_client, agent_id, text)

    assert decision.intent != "multi_intent", decision.metadata.get("topics")
    assert not agent or decision.agent == agent
    assert "retail_order_tracking" not in {decision.intent, *(step.intent for step in decision.plan or ())}


@pytest.mark.parametrize(
    "text",
    [
        "my home internet is very slow and keeps cutting out every hour",
        "a internet da fibra está muito lenta e desconecta a cada meia hora",
        "my internet is slow and drops all the time",
    ],
)
def test_one_complaint_told_in_two_clauses_is_one_request_for_support(staff_client, module_demo, text):
    assert len(clauses(text)) == 2  # cut in two, read as one
    decision = decided(staff_client, "telecom_contas", text)

    assert (decision.intent, decision.agent) == ("technical_support", "support_agent")


@pytest.mark.parametrize(
    ("agent_id", "text", "intents"),
    [
        (
            "telecom_contas",
            "meu celular está sem sinal desde ontem e a fatura veio alta",
            {"technical_support", "billing_invoice_explanation"},
        ),
        (
            "telecom_contas",
            "my bill came too high. also, my phone has no signal since yesterday",
            {"technical_support", "billing_invoice_explanation"},
        ),
        (
            "retail_orders",
            "minha entrega do pedido P100 está atrasada e o boleto veio com valor errado",
            {"retail_order_tracking", "billing_invoice_explanation"},
        ),
        (
            "retail_orders",
            "mi entrega está atrasada y además me cobraron dos veces la compra",
            {"retail_order_tracking", "billing_invoice_explanation"},
        ),
        (
            "retail_orders",
            "my order P100 is late and I was charged twice for it",
            {"retail_order_tracking", "billing_invoice_explanation"},
        ),
    ],
)
def test_two_requests_stay_two_whatever_order_numbers_they_name(staff_client, module_demo, agent_id, text, intents):
    decision = decided(staff_client, agent_id, text)

    assert decision.intent == "multi_intent"
    assert {step.intent for step in decision.plan} == intents
