"""The supervisor plans with the model , the keyword plan standing in when the model
cannot plan; and the review of single-specialist turns, which reads the conversation's history."""

from __future__ import annotations

import pytest

from agents.models import Specialist
from common.i18n import say as say_in
from conversations.supervisor import CONSOLIDATION_HEADER, HISTORY_HEADER
from conversations.tests.test_supervisor import SEED_MESSAGE, send
from handoffs.models import Handoff
from routing.planner import NO_ENDPOINT, NOTHING_PLANNED

NO_KEYWORD_MESSAGE = "Preciso resolver duas coisas hoje, por favor"


def route(debug_api, text):
    response = debug_api.post(
        "/api/debug/route", {"agent_id": "telecom_contas", "payload": {"text": text}}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def plan_reply(scripted_llm, *items, delay: float = 0.0):
    scripted_llm.reply_tool_call("SupervisorPlan", {"specialists": list(items)}, delay=delay)


@pytest.fixture
def model_planner(telecom):
    telecom.routing_mode = "supervisor"
    telecom.supervisor_planner = "model"
    telecom.save()
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    billing.description = "Explains invoices and charges."
    billing.save()
    return telecom


# -- the model's plan ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_models_plan_of_two_specialists_runs_both_in_process_and_records_the_fan_out(
    api, model_planner, scripted_llm
):
    plan_reply(
        scripted_llm,
        {"specialist": "billing_agent", "intent": "billing_invoice_explanation", "reason": "A conta."},
        {"specialist": "orders_agent", "reason": "O pedido."},
    )

    body = send(api, NO_KEYWORD_MESSAGE, session_id="s-planner")

    decision = body["metadata"]["route_decision"]
    assert (decision["method"], decision["route"], decision["intent"]) == (
        "llm_plan",
        "supervisor_agent",
        "multi_intent",
    )
    assert decision["agents"] == ["billing_agent", "orders_agent"]
    assert [step["intent"] for step in decision["plan"]] == ["billing_invoice_explanation", "retail_order_tracking"]
    assert decision["metadata"]["plan_source"] == "model"
    assert [(p["agent"], p["status"]) for p in body["metadata"]["supervisor"]] == [
        ("billing_agent", "ok"),
        ("orders_agent", "ok"),
    ]
    fanout = Handoff.objects.filter(kind="supervisor_fanout").order_by("id")
    assert sorted(h.to_agent for h in fanout) == ["billing_agent", "orders_agent"]
    # What the planner asked: the schema as a function, every enabled specialist with its intents.
    asked = scripted_llm.requests[0]
    function = asked["tools"][0]["function"]
    assert function["name"] == "SupervisorPlan"
    assert "specialists" in function["parameters"]["properties"]
    system = asked["messages"][0]["content"]
    for name in ("billing_agent", "orders_agent", "product_agent", "support_agent"):
        assert f"- {name} (" in system
    assert "- billing_agent (Billing Agent): Explains invoices and charges." in system
    assert "intent retail_order_tracking:" in system
    assert asked["messages"][1]["content"] == NO_KEYWORD_MESSAGE


@pytest.mark.django_db
def test_one_specialist_planned_by_the_model_answers_as_telecom_would(debug_api, model_planner, scripted_llm):
    plan_reply(scripted_llm, {"specialist": "orders_agent", "reason": "Onde está a compra."})

    body = route(debug_api, NO_KEYWORD_MESSAGE)

    assert (body["method"], body["agent"], body["intent"]) == ("llm_plan", "orders_agent", "retail_order_tracking")
    assert body["mcp_tools"] == ["consultar_entrega", "consultar_pedido"]
    assert "Onde está a compra." in body["reason"]


@pytest.mark.parametrize(
    "items",
    [
        pytest.param([{"specialist": "ghost_agent", "reason": "?"}], id="an unknown specialist"),
        pytest.param([], id="an empty plan"),
    ],
)
@pytest.mark.django_db
def test_a_plan_naming_no_specialist_of_the_profile_gives_the_keyword_plan(
    debug_api, model_planner, scripted_llm, items
):
    plan_reply(scripted_llm, *items)

    body = route(debug_api, SEED_MESSAGE)

    assert (body["method"], body["agents"]) == ("keyword", ["billing_agent", "orders_agent"])
    assert body["metadata"]["plan_source"] == "keywords"
    assert body["metadata"]["planner_error"].startswith(NOTHING_PLANNED)
    assert ("ghost_agent" in body["metadata"]["planner_error"]) == bool(items)


@pytest.mark.django_db
def test_a_model_answering_500_gives_the_keyword_plan_and_says_why(debug_api, model_planner, scripted_llm):
    scripted_llm.reply_error(500)

    body = route(debug_api, SEED_MESSAGE)

    assert (body["method"], body["agents"]) == ("keyword", ["billing_agent", "orders_agent"])
    assert body["metadata"]["plan_source"] == "keywords"
    assert "Error code: 500" in body["metadata"]["planner_error"]


@pytest.mark.django_db
def test_a_model_too_slow_to_plan_gives_the_keyword_plan_and_says_why(debug_api, model_planner, scripted_llm, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.5
    plan_reply(scripted_llm, {"specialist": "product_agent"}, delay=2)

    body = route(debug_api, SEED_MESSAGE)

    assert (body["method"], body["agents"]) == ("keyword", ["billing_agent", "orders_agent"])
    assert "timed out" in body["metadata"]["planner_error"]


@pytest.mark.django_db
def test_without_a_model_endpoint_the_keyword_plan_stands_and_says_why(debug_api, model_planner):
    body = route(debug_api, SEED_MESSAGE)

    assert (body["method"], body["agents"]) == ("keyword", ["billing_agent", "orders_agent"])
    assert body["metadata"] == {**body["metadata"], "plan_source": "keywords", "planner_error": NO_ENDPOINT}


@pytest.mark.django_db
def test_the_route_preview_shows_the_models_plan(admin_client, model_planner, scripted_llm):
    plan_reply(scripted_llm, {"specialist": "billing_agent"}, {"specialist": "support_agent"})

    page = admin_client.get(
        "/admin/routing/intent/preview/", {"profile": model_planner.pk, "text": NO_KEYWORD_MESSAGE}
    ).content.decode()

    assert "Supervisor plan by the model" in page
    assert "billing_agent (billing_invoice_explanation), support_agent (support_request)" in page


# -- the review of single-specialist turns ---------------------------------------------------------------

TWO_PART_MESSAGE = "Minha fatura veio alta e meu pedido atrasou"


def review_on(profile):
    profile.review_single_turns = True
    profile.multi_topic = "off"  # the review is what sends the second request on, not the fan-out of requests
    profile.save()


def one_request_at_a_time(profile):
    profile.multi_topic = "off"
    profile.save()


def script_review(scripted_llm, *, first: str, sent_on: str) -> None:
    """The model's part in a reviewed turn: the first answer, a verdict naming the order's part open, that part's
    answer, a verdict with nothing open, the synthesis."""
    scripted_llm.reply(first)
    scripted_llm.reply_tool_call("Coverage", {"uncovered_intents": ["retail_order_tracking"]})
    scripted_llm.reply(sent_on)
    scripted_llm.reply_tool_call("Coverage", {"uncovered_intents": []})
    scripted_llm.reply("Resposta consolidada.")


@pytest.mark.django_db
def test_the_single_turn_review_sends_the_open_part_on_only_when_switched_on(api, telecom):
    one_request_at_a_time(telecom)
    off = send(api, TWO_PART_MESSAGE, session_id="s-off")

    assert off["agent"] == "billing_agent"
    assert "single_turn" not in off["metadata"]["review"] and off["metadata"]["review_rounds"] == []
    assert not off["answer"].startswith(say_in(off["metadata"]["language"], CONSOLIDATION_HEADER))

    review_on(telecom)
    body = send(api, TWO_PART_MESSAGE, session_id="s-on")

    assert body["metadata"]["review"]["single_turn"]["source"] == "keywords"
    assert body["metadata"]["review_rounds"] == [
        {"round": 1, "uncovered": ["retail_order_tracking"], "sent_to": ["orders_agent"], "covered": ["orders_agent"]}
    ]
    assert body["answer"].startswith(say_in(body["metadata"]["language"], CONSOLIDATION_HEADER))
    assert "billing_agent:" in body["answer"] and "orders_agent:" in body["answer"]
    fanout = Handoff.objects.filter(kind="supervisor_fanout")
    assert [(h.from_agent, h.to_agent) for h in fanout] == [("supervisor_agent", "orders_agent")]


@pytest.mark.django_db
def test_with_a_model_the_review_asks_its_verdict_and_sends_the_open_part_on(api, telecom, scripted_llm):
    review_on(telecom)
    script_review(scripted_llm, first="Parte de faturas.", sent_on="Parte de pedidos.")

    body = send(api, "Minha fatura veio alta e também quero saber onde anda minha compra")

    assert body["metadata"]["review"]["single_turn"]["source"] == "model"
    assert body["metadata"]["review_rounds"][0]["sent_to"] == ["orders_agent"]
    assert body["answer"] == "Resposta consolidada."
    verdict = scripted_llm.requests[1]
    assert verdict["tools"][0]["function"]["name"] == "Coverage"
    assert "[billing_agent] Parte de faturas." in verdict["messages"][1]["content"]
    synthesis = scripted_llm.requests[-1]["messages"][1]["content"]
    assert "Parte de faturas." in synthesis and "Parte de pedidos." in synthesis


@pytest.mark.django_db
def test_the_review_reads_the_history_for_a_follow_up_offline(api, telecom):
    one_request_at_a_time(telecom)
    send(api, TWO_PART_MESSAGE, session_id="s-history")  # reviewed by no one: the order was left open
    review_on(telecom)

    body = send(api, "e o outro assunto?", session_id="s-history")

    assert body["metadata"]["route_decision"]["method"] == "fallback"
    assert body["metadata"]["review_rounds"][0]["sent_to"] == ["orders_agent"]


@pytest.mark.django_db
def test_a_follow_up_after_a_reviewed_turn_sends_nothing_on_again_offline(api, telecom):
    review_on(telecom)
    first = send(api, TWO_PART_MESSAGE, session_id="s-covered")
    assert first["metadata"]["review_rounds"][0]["sent_to"] == ["orders_agent"]

    body = send(api, "e o outro assunto?", session_id="s-covered")

    assert body["metadata"]["review"]["single_turn"] == {"source": "keywords", "open": []}


@pytest.mark.django_db
def test_with_a_model_the_review_reads_the_history_in_its_prompt(api, telecom, scripted_llm):
    one_request_at_a_time(telecom)
    scripted_llm.reply("Parte de faturas.")
    send(api, TWO_PART_MESSAGE, session_id="s-model-history")
    review_on(telecom)
    script_review(scripted_llm, first="Posso ajudar com o que faltou.", sent_on="Seu pedido está a caminho.")

    body = send(api, "e o outro assunto?", session_id="s-model-history")

    verdict = scripted_llm.requests[2]["messages"][1]["content"]
    assert verdict.startswith(HISTORY_HEADER)
    assert f"user: {TWO_PART_MESSAGE}" in verdict and "assistant: Parte de faturas." in verdict
    assert body["metadata"]["review_rounds"][0]["sent_to"] == ["orders_agent"]
    assert body["answer"] == "Resposta consolidada."
