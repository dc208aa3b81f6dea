"""The intent adapter offline: goal and human-friendly entities read from the manifests' hints alone,
memory for follow-ups, what is missing and the question that asks for it."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from mcp_servers.finance.server import MANIFEST
from routing.goals.intent import (
    CONFIDENT,
    FOLLOW_UP,
    INCOMPLETE,
    clarification_question,
    entities_merge,
    intent_read,
    missing_required,
    pattern_values,
)
from routing.goals.manifest import manifest_read
from routing.goals.planner import (
    DEFAULT_CONFIDENCE_THRESHOLD,
    GENERAL_DOMAIN,
    GoalCatalogue,
    GoalSpec,
    IntentOutput,
    goal_resolve,
    plan_build,
)
from routing.router import CompiledRouter
from routing.specs import ProfileSpec


def catalogue_of(*manifests: dict[str, Any]) -> GoalCatalogue:
    """Goals and capabilities read from manifests as the sync will (examples included), without the database."""
    goals, capabilities = {}, {}
    for data in manifests:
        manifest = manifest_read(data)
        examples = {raw["goal"]: tuple(raw.get("examples") or ()) for raw in data["goals"]}
        for goal in manifest.goals.values():
            goals[(goal.domain, goal.name)] = replace(goal, examples=examples[goal.name])
        capabilities.update(manifest.capabilities)
    return GoalCatalogue(goals=goals, capabilities=capabilities)


def profile_serving(catalogue: GoalCatalogue) -> ProfileSpec:
    return ProfileSpec(
        pk=1,
        agent_id="finance_assistente",
        name="Finance",
        domain="finance",
        description="",
        policy="",
        synthesis_prompt="",
        routing_mode="goal",
        fallback_agent="",
        llm_router_enabled=False,
        llm_router_threshold=0.6,
        handoffs_enabled=False,
        hybrid_followup_max_chars=0,
        llm_model="",
        llm_temperature=None,
        guardrails={},
        judges={},
        specialists={},
        intents=(),
        router=CompiledRouter(intents=()),
        goals=catalogue,
    )


FINANCE = catalogue_of(MANIFEST)
GET_QUOTE = FINANCE.goals[("finance", "GET_QUOTE")]
TOP_MOVERS = FINANCE.goals[("finance", "TOP_MOVERS")]


@pytest.fixture(autouse=True)
def offline(settings):
    settings.OPENAI_BASE_URL = ""
    settings.ROUTER_LLM_BASE_URL = ""


def read(text: str, previous: IntentOutput | None = None, catalogue: GoalCatalogue = FINANCE) -> IntentOutput:
    return asyncio.run(intent_read(profile_serving(catalogue), text, previous=previous))


def quote(**entities: Any) -> IntentOutput:
    return IntentOutput("finance", "GET_QUOTE", entities, CONFIDENT, "…")


# -- goal mode's messages ------------------------------------------------------------------------------------------


def test_a_quote_is_read_with_the_name_as_the_user_wrote_it():
    intent = read("qual o preço da Nordea?")

    assert intent.as_dict() == {
        "primary_domain": "finance",
        "goal": "GET_QUOTE",
        "entities": {"symbol_text": "Nordea"},
        "confidence": CONFIDENT,
        "original_query": "qual o preço da Nordea?",
    }
    assert CONFIDENT >= DEFAULT_CONFIDENCE_THRESHOLD


def test_top_gainers_of_a_market_read_the_direction_from_its_aliases_and_the_market_by_its_pattern():
    intent = read("maiores altas do Brasil")

    assert (intent.goal, dict(intent.entities), intent.confidence) == (
        "TOP_MOVERS",
        {"direction": "GAINERS", "market_text": "Brasil"},
        CONFIDENT,
    )


def test_the_stocks_that_fell_most_are_the_losers_with_no_market():
    intent = read("quais ações mais caíram hoje?")

    assert (intent.goal, dict(intent.entities)) == ("TOP_MOVERS", {"direction": "LOSERS"})


def test_the_longest_alias_wins_so_gains_and_losses_together_are_both():
    assert read("maiores altas e baixas do Brasil").entities["direction"] == "BOTH"


def test_asking_to_be_told_sets_the_flag_from_its_keywords():
    intent = read("cotação da PETR4 e me avise")

    assert (intent.goal, dict(intent.entities)) == ("GET_QUOTE", {"symbol_text": "PETR4", "notify": True})


def test_a_message_naming_two_symbols_gives_the_list_that_collects_them_instead_of_one_name():
    intent = read("quanto está a Vale e a Petrobras?")

    assert (intent.goal, dict(intent.entities), intent.confidence) == (
        "GET_QUOTE",
        {"symbols": ["Vale", "Petrobras"]},
        CONFIDENT,
    )
    assert missing_required(GET_QUOTE, intent.entities) == []


def test_a_quote_without_a_symbol_is_found_but_below_the_gate_and_says_what_is_missing():
    intent = read("qual o preço?")

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("GET_QUOTE", {}, INCOMPLETE)
    assert intent.confidence < DEFAULT_CONFIDENCE_THRESHOLD
    assert missing_required(GET_QUOTE, intent.entities) == ["symbol_text"]


def test_small_talk_is_general_with_full_confidence():
    intent = read("bom dia")

    assert (intent.primary_domain, intent.goal, dict(intent.entities), intent.confidence) == (
        GENERAL_DOMAIN,
        "",
        {},
        1.0,
    )


@pytest.mark.parametrize(
    ("text", "goal", "entities"),
    [
        ("what is the price of Nordea?", "GET_QUOTE", {"symbol_text": "Nordea"}),
        ("¿cuál es el precio de Petrobras?", "GET_QUOTE", {"symbol_text": "Petrobras"}),
        ("how much is Vale and Petrobras? notify me", "GET_QUOTE", {"symbols": ["Vale", "Petrobras"], "notify": True}),
        ("show me the top gainers", "TOP_MOVERS", {"direction": "GAINERS"}),
        ("top losers in Brasil today", "TOP_MOVERS", {"direction": "LOSERS", "market_text": "Brasil"}),
        ("mayores subidas de Brasil", "TOP_MOVERS", {"direction": "GAINERS", "market_text": "Brasil"}),
        ("¿cuáles fueron las mayores caídas?", "TOP_MOVERS", {"direction": "LOSERS"}),
    ],
)
def test_english_and_spanish_read_like_portuguese(text, goal, entities):
    intent = read(text)

    assert (intent.goal, dict(intent.entities), intent.confidence) == (goal, entities, CONFIDENT)


# -- follow-ups ----------------------------------------------------------------------------------------------------


def test_a_follow_up_naming_only_a_symbol_keeps_the_previous_goal():
    intent = read("e da Vale?", previous=quote(symbol_text="Nordea"))

    assert (intent.goal, dict(intent.entities)) == ("GET_QUOTE", {"symbol_text": "Vale"})
    assert intent.confidence == FOLLOW_UP >= DEFAULT_CONFIDENCE_THRESHOLD


def test_the_same_words_without_a_conversation_are_general():
    assert (read("e da Vale?").primary_domain, read("e da Vale?").goal) == (GENERAL_DOMAIN, "")


def test_a_bare_name_answers_a_pending_clarification():
    pending = IntentOutput("finance", "GET_QUOTE", {}, INCOMPLETE, "qual o preço?")

    intent = read("Nordea", previous=pending)

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("GET_QUOTE", {"symbol_text": "Nordea"}, 0.95)


def test_thanks_after_a_quote_is_not_read_as_a_name():
    assert read("Obrigado!", previous=quote(symbol_text="Nordea")).primary_domain == GENERAL_DOMAIN


def test_a_message_of_another_goal_changes_the_goal():
    intent = read("e as maiores baixas?", previous=quote(symbol_text="Nordea"))

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("TOP_MOVERS", {"direction": "LOSERS"}, CONFIDENT)


def test_a_found_goal_whose_missing_entity_the_conversation_holds_is_confident():
    assert read("e a cotação?", previous=quote(symbol_text="Nordea")).confidence == CONFIDENT
    assert read("e a cotação?").confidence == INCOMPLETE


# -- memory --------------------------------------------------------------------------------------------------------


def test_new_entities_win_and_the_ones_left_out_come_from_the_previous_turn():
    merged = entities_merge(TOP_MOVERS, {"direction": "GAINERS", "market_text": "Brasil"}, {"direction": "LOSERS"})

    assert merged == {"direction": "LOSERS", "market_text": "Brasil"}


def test_entities_marked_carry_false_are_not_carried_into_a_follow_up():
    previous = {"symbols": ["Vale", "Petrobras"], "notify": True}

    assert entities_merge(GET_QUOTE, previous, {"symbol_text": "Vale"}) == {"symbol_text": "Vale"}


def test_a_list_and_the_name_it_collects_replace_each_other():
    assert entities_merge(GET_QUOTE, {"symbol_text": "Nordea"}, {"symbols": ["Vale", "Petrobras"]}) == {
        "symbols": ["Vale", "Petrobras"]
    }
    assert entities_merge(GET_QUOTE, {"symbols": ["Vale", "Petrobras"]}, {}) == {}  # symbols do not carry


def test_entities_outside_the_goals_schema_are_not_merged():
    assert entities_merge(GET_QUOTE, {"market_text": "Brasil"}, {"symbol_text": "Vale", "ticker": "VALE3.SA"}) == {
        "symbol_text": "Vale"
    }


def test_a_follow_up_after_a_notified_list_asks_for_one_quote_and_notifies_nobody():
    first = read("quanto está a Vale e a Petrobras? me avise")
    assert dict(first.entities) == {"symbols": ["Vale", "Petrobras"], "notify": True}

    second = read("e da Vale?", previous=first)
    entities = entities_merge(GET_QUOTE, first.entities, second.entities)

    assert entities == {"symbol_text": "Vale"}
    plan = plan_build(goal_resolve(replace(second, entities=entities), GET_QUOTE), FINANCE.capabilities)
    capabilities = [step.capability for step in plan.steps]
    assert capabilities.count("get_stock_price") == 1 and "send_message" not in capabilities
    assert "Petrobras" not in json.dumps(plan.as_dict())


def test_a_clarified_reply_merges_into_the_pending_goal():
    pending = read("qual o preço?")
    reply = read("Nordea", previous=pending)

    assert entities_merge(GET_QUOTE, pending.entities, reply.entities) == {"symbol_text": "Nordea"}
    assert missing_required(GET_QUOTE, {"symbol_text": "Nordea"}) == []


# -- what is missing and the question ------------------------------------------------------------------------------


def test_a_required_enum_is_never_missing_the_resolver_fills_it():
    assert missing_required(TOP_MOVERS, {}) == []


def test_empty_values_are_missing_and_a_collecting_list_satisfies_the_name():
    assert missing_required(GET_QUOTE, {"symbol_text": "  "}) == ["symbol_text"]
    assert missing_required(GET_QUOTE, {"symbols": []}) == ["symbol_text"]
    assert missing_required(GET_QUOTE, {"symbols": ["Vale", "Itaú"]}) == []


def test_the_question_names_what_is_missing_by_its_label_in_the_customers_language():
    asked = {language: clarification_question(GET_QUOTE, ["symbol_text"], language) for language in ("pt", "en", "es")}

    assert asked == {"pt": "Qual o ativo?", "en": "Which stock?", "es": "¿Cuál es el activo?"}
    assert clarification_question(GET_QUOTE, ["symbols"], "es") == "¿Cuáles son los activos?"


def test_the_gate_asks_in_the_customers_language_and_a_reply_too_short_to_tell_keeps_it():
    from routing.goals.decide import CLARIFICATION, PLAN, goal_decide

    def decide(text: str, goal_state=None):
        return asyncio.run(goal_decide(profile=profile_serving(FINANCE), text=text, goal_state=goal_state))

    asked = {text: decide(text) for text in ("what's the price?", "¿cuál es el precio?", "qual é o preço?")}
    named = decide("Nordea", goal_state=asked["what's the price?"].goal_state)

    assert {text: (d.status, d.language, d.clarification["question"]) for text, d in asked.items()} == {
        "what's the price?": (CLARIFICATION, "en", "Which stock?"),
        "¿cuál es el precio?": (CLARIFICATION, "es", "¿Cuál es el activo?"),
        "qual é o preço?": (CLARIFICATION, "pt", "Qual o ativo?"),
    }
    assert (named.status, named.language, named.goal_state["language"]) == (PLAN, "en", "en")


# -- a domain the adapter has never seen ---------------------------------------------------------------------------

WEATHER: dict[str, Any] = {
    "domain": "weather",
    "goals": [
        {
            "goal": "FORECAST",
            "examples": ["vai chover em Lisboa amanhã?"],
            "capabilities": ["forecast"],
            "entities_schema": {
                "city_text": {
                    "type": "string",
                    "required": True,
                    "pattern": r"\b(?:em|in)\s+(?P<value>[A-Z][\w-]*)",
                    "description": "a cidade (the city): como o usuário disse",
                },
                "day_text": {"type": "string", "required": True, "description": "o dia (the day)"},
                "period": {
                    "type": "enum",
                    "values": ["TODAY", "WEEK"],
                    "default": "TODAY",
                    "aliases": {"TODAY": ["hoje"], "WEEK": ["semana", "esta semana"]},
                },
                "alert": {"type": "boolean", "keywords": ["alerta"], "carry": False},
            },
        },
        {"goal": "ALERTS", "capabilities": ["alerts"], "entities_schema": {}},
    ],
    "capabilities": [
        {"capability": "forecast", "metadata": {"intent_hints": {"keywords": ["previsão", "tempo"]}}},
        {"capability": "alerts", "metadata": {"intent_hints": {"keywords": ["tempo"]}}},
    ],
}


def test_a_new_domains_manifest_is_read_with_no_code_for_it():
    catalogue = catalogue_of(MANIFEST, WEATHER)

    intent = read("previsão do tempo em Lisboa esta semana, com alerta", catalogue=catalogue)

    assert (intent.primary_domain, intent.goal) == ("weather", "FORECAST")
    assert dict(intent.entities) == {"city_text": "Lisboa", "period": "WEEK", "alert": True}
    assert intent.confidence == INCOMPLETE  # day_text is required and not said
    forecast = catalogue.goals[("weather", "FORECAST")]
    assert missing_required(forecast, intent.entities) == ["day_text"]
    assert clarification_question(forecast, ["city_text", "day_text"]) == "Qual a cidade e o dia?"
    # no label of its own: the description's "<label> (<English label>)" names it in Portuguese and in English
    assert clarification_question(forecast, ["city_text", "day_text"], "en") == "Which city and day?"


def test_an_enum_the_message_does_not_name_is_left_to_the_resolver():
    catalogue = catalogue_of(WEATHER)

    intent = read("vai chover em Lisboa amanhã?", catalogue=catalogue)  # found by its example

    assert intent.goal == "FORECAST" and "period" not in intent.entities


def test_goals_tied_on_their_hints_are_broken_by_the_conversation_then_by_name():
    catalogue = catalogue_of(WEATHER)

    assert read("e o tempo?", catalogue=catalogue).goal == "ALERTS"  # both score "tempo": names in order
    previous = IntentOutput("weather", "FORECAST", {"city_text": "Porto"}, CONFIDENT, "…")
    assert read("e o tempo?", previous=previous, catalogue=catalogue).goal == "FORECAST"


def test_a_disabled_goal_is_never_read():
    goals = dict(FINANCE.goals)
    goals[("finance", "GET_QUOTE")] = replace(GET_QUOTE, enabled=False)

    intent = read("qual o preço da Nordea?", catalogue=GoalCatalogue(goals=goals, capabilities=FINANCE.capabilities))

    assert intent.primary_domain == GENERAL_DOMAIN


def test_a_description_without_a_gloss_still_asks():
    goal = GoalSpec("x", "G", {"period_text": {"type": "string", "required": True, "description": "o período"}})

    assert clarification_question(goal, ["period_text"]) == "Qual o período?"
    assert clarification_question(goal, ["period_text"], "en") == "Which period?"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("tell me Nordea's share price", ["Nordea"]),
        ("What's Nordea’s stock doing?", ["Nordea"]),
        ("¿a cuánto cotiza hoy Nordea?", ["Nordea"]),
        ("quanto vale hoje a Nordea?", ["Nordea"]),
        ("It's fine, that's all", []),
        ("Here's the thing: what's the price of Nordea?", ["Nordea"]),
    ],
)
def test_a_name_said_possessively_or_after_a_word_of_time_is_read(text, names):
    schema = MANIFEST["goals"][0]["entities_schema"]["symbol_text"]

    assert pattern_values(schema, text) == names


# -- names written in lower case -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "entities"),
    [
        ("qual a cotação da equinor?", {"symbol_text": "Equinor"}),
        ("me diga o preço da itau", {"symbol_text": "Itaú"}),
        ("what's the price of ericsson?", {"symbol_text": "Ericsson"}),
        ("what's the price of ERICSSON?", {"symbol_text": "ERICSSON"}),
        ("how much is magazine luiza trading at?", {"symbol_text": "Magazine Luiza"}),
        ("cotización de equinor y de itau", {"symbols": ["Equinor", "Itaú"]}),
        ("¿cuál es el precio de ericsson?", {"symbol_text": "Ericsson"}),
    ],
)
def test_a_name_the_goals_examples_give_is_read_whatever_its_case_and_accents(text, entities):
    intent = read(text)

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("GET_QUOTE", entities, CONFIDENT)


def test_a_lower_case_name_follows_up_or_answers_the_conversations_goal():
    assert read("e da itau?", previous=quote(symbol_text="Nordea")).entities == {"symbol_text": "Itaú"}
    pending = IntentOutput("finance", "GET_QUOTE", {}, INCOMPLETE, "qual o preço?")
    assert read("equinor", previous=pending).entities == {"symbol_text": "Equinor"}


def test_a_name_that_is_also_an_ordinary_word_is_no_company_where_it_is_the_word():
    """ "Vale" is a company of the examples and a verb or a Spanish "ok": read as the name after a word that introduces
    one, never as the verb of a question about another company, nor as a reply, nor outside the goal."""
    assert read("quanto vale a equinor?").entities == {"symbol_text": "Equinor"}
    assert read("¿cuánto vale ericsson hoy?").entities == {"symbol_text": "Ericsson"}
    assert read("cotação da vale").entities == {"symbol_text": "Vale"}
    assert read("cotação da vale e da equinor").entities == {"symbols": ["Vale", "Equinor"]}
    assert read("vale, gracias", previous=quote(symbol_text="Nordea")).primary_domain == GENERAL_DOMAIN
    assert read("vale", previous=quote(symbol_text="Nordea")).primary_domain == GENERAL_DOMAIN
    assert read("vale a pena?").primary_domain == GENERAL_DOMAIN
