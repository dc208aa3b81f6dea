"""The intent adapter over a model: structured output through langchain-openai against the scripted
OpenAI-compatible server; what the model is shown, and what of its answer is kept."""

from __future__ import annotations

import asyncio
from typing import Any

from agents.llm import reset_clients
from routing.goals.intent import CONFIDENT, INCOMPLETE, GoalIntent, intent_read
from routing.goals.planner import GENERAL_DOMAIN, IntentOutput
from routing.tests.test_goal_intent import FINANCE, profile_serving


def read(text: str, previous: IntentOutput | None = None) -> IntentOutput:
    return asyncio.run(intent_read(profile_serving(FINANCE), text, previous=previous))


def answer(server, goal: str, entities: dict[str, Any], confidence: float = 0.96, domain: str = "finance") -> None:
    arguments = {"domain": domain, "goal": goal, "entities": entities, "confidence": confidence}
    server.reply_tool_call(GoalIntent.__name__, arguments)


def intent_requests(server) -> list[dict[str, Any]]:
    return [
        request
        for request in server.requests
        if any(tool["function"]["name"] == GoalIntent.__name__ for tool in request.get("tools", []))
    ]


def test_the_models_function_call_is_read_into_an_intent_output(scripted_llm):
    answer(scripted_llm, "TOP_MOVERS", {"direction": "GAINERS", "market_text": "Brasil"}, 0.98)

    intent = read("maiores altas do Brasil")

    assert intent.as_dict() == {
        "primary_domain": "finance",
        "goal": "TOP_MOVERS",
        "entities": {"direction": "GAINERS", "market_text": "Brasil"},
        "confidence": 0.98,
        "original_query": "maiores altas do Brasil",
    }


def test_a_clear_question_the_manifests_hints_name_alike_is_not_asked_back_whatever_the_models_doubt(scripted_llm):
    answer(scripted_llm, "TOP_MOVERS", {"direction": "GAINERS", "market_text": "Brazilian"}, 0.8)
    answer(scripted_llm, "TOP_MOVERS", {"direction": "GAINERS"}, 0.8)

    clear = read("which Brazilian stocks went up the most today?")
    vague = read("how did the day go?")

    assert (clear.goal, clear.confidence, clear.reading) == (
        "TOP_MOVERS",
        CONFIDENT,
        {"method": "model", "corroborated": "hints"},
    )
    assert (vague.confidence, vague.reading) == (0.8, {"method": "model"})  # no hint of it: the gate asks


def test_the_model_is_shown_the_goal_catalogue_and_each_goals_entities_schema(scripted_llm):
    answer(scripted_llm, "GET_QUOTE", {"symbol_text": "Nordea"})

    read("qual o preço da Nordea?")

    (request,) = intent_requests(scripted_llm)
    system = request["messages"][0]["content"]
    assert "- domain finance, goal GET_QUOTE: O preço de uma ou mais ações" in system
    assert "- domain finance, goal TOP_MOVERS: As maiores altas ou baixas do dia" in system
    assert '"qual o preço da Nordea?"; "cotação da PETR4"' in system  # the goal's examples
    assert "- symbol_text (string; required): o ativo (the stock): nome ou código como o usuário disse" in system
    assert "- symbols (list of strings; instead of symbol_text when the message names several)" in system
    assert "- direction (enum, one of GAINERS | LOSERS | BOTH; required): a direção" in system
    assert "- notify (boolean)" in system
    assert "never a code, ticker or id you inferred" in system
    assert request["messages"][-1] == {"role": "user", "content": "qual o preço da Nordea?"}
    (tool,) = request["tools"]
    assert set(tool["function"]["parameters"]["properties"]) == {"domain", "goal", "entities", "confidence"}


def test_the_conversations_goal_is_shown_so_a_follow_up_keeps_it(scripted_llm):
    answer(scripted_llm, "GET_QUOTE", {"symbol_text": "Vale"}, 0.95)
    previous = IntentOutput("finance", "GET_QUOTE", {"symbol_text": "Nordea"}, 0.97, "qual o preço da Nordea?")

    intent = read("e da Vale?", previous=previous)

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("GET_QUOTE", {"symbol_text": "Vale"}, 0.95)
    system = intent_requests(scripted_llm)[0]["messages"][0]["content"]
    assert 'current goal is finance GET_QUOTE, with entities {"symbol_text": "Nordea"}' in system


def test_a_goal_outside_the_catalogue_is_general(scripted_llm):
    answer(scripted_llm, "BUY_STOCK", {"symbol_text": "Nordea"}, 0.9)

    intent = read("compre Nordea para mim")

    assert (intent.primary_domain, intent.goal, dict(intent.entities)) == (GENERAL_DOMAIN, "", {})


def test_an_enum_value_outside_its_values_and_an_entity_outside_the_schema_are_dropped(scripted_llm):
    answer(scripted_llm, "TOP_MOVERS", {"direction": "UP", "market_text": "Brasil", "limit": 3})
    answer(scripted_llm, "TOP_MOVERS", {"direction": "losers"})

    assert dict(read("maiores altas do Brasil").entities) == {"market_text": "Brasil"}
    assert dict(read("maiores baixas").entities) == {"direction": "LOSERS"}  # matched to a value, any case


def test_a_ticker_the_user_did_not_write_is_dropped_and_the_missing_name_keeps_the_gate_shut(scripted_llm):
    answer(scripted_llm, "GET_QUOTE", {"symbol_text": "NDA-SE.ST"}, 0.99)

    intent = read("qual o preço da Nordea?")

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("GET_QUOTE", {}, INCOMPLETE)


def test_several_names_go_to_the_list_and_a_list_of_one_to_the_name(scripted_llm):
    answer(scripted_llm, "GET_QUOTE", {"symbols": ["Vale", "Petrobras"], "symbol_text": "Vale", "notify": "true"})
    answer(scripted_llm, "GET_QUOTE", {"symbols": ["PETR4"]})

    several = read("quanto está a Vale e a Petrobras? me avise")
    one = read("cotação da PETR4")

    assert dict(several.entities) == {"symbols": ["Vale", "Petrobras"], "notify": True}
    assert dict(one.entities) == {"symbol_text": "PETR4"}


def test_a_model_error_gives_a_zero_confidence_output_for_the_gate_to_ask(scripted_llm):
    scripted_llm.reply_error(500)

    intent = read("qual o preço da Nordea?")

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("", {}, 0.0)
    assert intent.primary_domain != GENERAL_DOMAIN  # general would skip the gate
    assert len(intent_requests(scripted_llm)) == 1


def test_a_routing_endpoint_of_its_own_is_asked_instead_of_the_answering_one(scripted_llm, settings):
    settings.ROUTER_LLM_BASE_URL, settings.ROUTER_LLM_MODEL = scripted_llm.base_url, "router-model"
    settings.OPENAI_BASE_URL = ""
    reset_clients()
    answer(scripted_llm, "GET_QUOTE", {"symbol_text": "Nordea"})

    assert read("qual o preço da Nordea?").goal == "GET_QUOTE"
    assert intent_requests(scripted_llm)[0]["model"] == "router-model"
