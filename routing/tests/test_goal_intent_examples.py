"""The intent adapter offline with the goals' examples tier: a paraphrase of a goal's examples that no hint matches
is read as that goal when its posterior clears the profile's examples threshold and margin; the hints and the
conversation's goal keep their say, and the evidence is recorded with the decision."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from routing.background import corpus
from routing.documents import goals_examples_index
from routing.examples import OFFLINE_SCORE
from routing.goals.decide import CLARIFICATION, GENERAL, LOW_CONFIDENCE, MISSING_ENTITY, PLAN, goal_decide
from routing.goals.intent import CONFIDENT, FOLLOW_UP, INCOMPLETE, intent_read
from routing.goals.planner import GENERAL_DOMAIN, GoalCatalogue, IntentOutput
from routing.router import CompiledRouter
from routing.specs import ProfileSpec
from routing.tests.test_goal_intent import FINANCE, catalogue_of, profile_serving

TIER_ON = {"examples_enabled": True, "examples_vectoriser": "offline", "examples_score": OFFLINE_SCORE}

# A domain of the adapter's own, with a dozen examples a goal so that a posterior means something. Its hints are few
# on purpose: the paraphrases below use none of them.
CARDS: dict[str, Any] = {
    "domain": "cards",
    "goals": [
        {
            "goal": "BLOCK_CARD",
            "description": "Bloquear um cartão perdido ou roubado (block a lost or stolen card).",
            "examples": [
                "perdi meu cartão, quero bloquear",
                "fui assaltado e levaram meu cartão",
                "meu cartão foi roubado",
                "bloqueie meu cartão por favor",
                "roubaram minha carteira com o cartão",
                "não encontro meu cartão de crédito",
                "acho que perdi o cartão no shopping",
                "meu cartão sumiu",
                "levaram minha bolsa com os cartões",
                "esqueci o cartão no restaurante e não achei mais",
                "I lost my card",
                "my card was stolen",
            ],
            "capabilities": ["block_card"],
            "entities_schema": {
                "last_digits": {
                    "type": "string",
                    "pattern": r"\b(?P<value>\d{4})\b",
                    "description": "o final do cartão (the card's last digits)",
                }
            },
        },
        {
            "goal": "RAISE_LIMIT",
            "description": "Aumentar o limite do cartão (raise the card's limit).",
            "examples": [
                "quero aumentar o limite do cartão para 5000",
                "meu limite está muito baixo",
                "preciso de mais limite para as compras",
                "como faço para subir meu limite?",
                "pode aumentar meu limite de crédito?",
                "o limite não dá para minhas compras do mês",
                "quero um limite maior",
                "dá para liberar mais limite?",
                "meu limite é pequeno demais",
                "subir o limite para 3000 reais",
                "I need a higher credit limit",
                "can you raise my limit to 2000",
            ],
            "capabilities": ["raise_limit"],
            "entities_schema": {
                "amount_text": {
                    "type": "string",
                    "required": True,
                    "pattern": r"\b(?P<value>\d{3,}(?:[.,]\d+)?)\b",
                    "description": "o novo limite (the new limit): o valor como o usuário disse",
                }
            },
        },
        {
            "goal": "CARD_BILL",
            "description": "A fatura do cartão (the card's bill).",
            "examples": [
                "quanto veio minha fatura este mês?",
                "quero ver a fatura do cartão",
                "qual o valor da fatura?",
                "quando vence minha fatura?",
                "me mande a fatura",
                "a fatura veio alta",
                "onde vejo minha fatura",
                "qual a data de vencimento da fatura",
                "fatura do mês passado",
                "quanto devo no cartão este mês",
                "show me my card bill",
                "when is my bill due",
            ],
            "capabilities": ["card_bill"],
            "entities_schema": {},
        },
    ],
    "capabilities": [
        {
            "capability": "block_card",
            "tool": "block_card",
            "metadata": {
                "intent_hints": {"keywords": ["bloquear o cartão"], "examples": ["quero bloquear o cartão 1234"]}
            },
        },
        {
            "capability": "raise_limit",
            "tool": "raise_limit",
            "metadata": {"intent_hints": {"keywords": ["aumento de limite"]}},
        },
        {"capability": "card_bill", "tool": "card_bill", "metadata": {"intent_hints": {"keywords": ["segunda via"]}}},
    ],
}
CARD_GOALS = catalogue_of(CARDS)
STOLEN = "alguém furtou meu cartão ontem à noite"  # BLOCK_CARD's examples say "roubado", "levaram", "meu cartão"


@pytest.fixture(autouse=True)
def offline(settings):
    settings.OPENAI_BASE_URL = ""
    settings.ROUTER_LLM_BASE_URL = ""
    settings.ROUTER_EMBEDDINGS_BASE_URL = ""


def serving(
    catalogue: GoalCatalogue = CARD_GOALS,
    *,
    tier: dict[str, Any] | None = None,
    threshold: float = 0.8,
    margin: float = 0.7,
    goal_threshold: float = 0.94,
) -> ProfileSpec:
    """A goal-mode profile whose catalogue carries the goals' examples tier as ``profile_compile`` compiles it."""
    compiled = replace(catalogue, examples=goals_examples_index(catalogue, TIER_ON if tier is None else tier))
    router = CompiledRouter(intents=(), examples_threshold=threshold, examples_margin=margin)
    return replace(profile_serving(compiled), router=router, goal_threshold=goal_threshold)


def read(text: str, profile: ProfileSpec, previous: IntentOutput | None = None) -> IntentOutput:
    return asyncio.run(intent_read(profile, text, previous=previous))


def decide(text: str, profile: ProfileSpec, goal_state: dict[str, Any] | None = None):
    return asyncio.run(goal_decide(profile=profile, text=text, goal_state=goal_state))


# -- the index -----------------------------------------------------------------------------------------------------


def test_the_goals_examples_are_compiled_with_their_capabilities_examples_labelled_by_domain_and_goal():
    index = serving().goals.examples

    assert index.intents == ("cards.BLOCK_CARD", "cards.RAISE_LIMIT", "cards.CARD_BILL")
    assert "quero bloquear o cartão 1234" in index.texts  # block_card's intent_hints.examples
    assert index._ends[len(index.intents) - 1] == 12 + 1 + 12 + 12
    assert index.classes[len(index.intents) :] == tuple(label for label, _ in corpus())  # then "none of these"


def test_a_disabled_goal_and_a_disabled_capabilitys_examples_are_left_out():
    goals = dict(CARD_GOALS.goals)
    goals[("cards", "CARD_BILL")] = replace(goals[("cards", "CARD_BILL")], enabled=False)
    capabilities = dict(CARD_GOALS.capabilities)
    capabilities["block_card"] = replace(capabilities["block_card"], enabled=False)

    index = serving(GoalCatalogue(goals=goals, capabilities=capabilities)).goals.examples

    assert index.intents == ("cards.BLOCK_CARD", "cards.RAISE_LIMIT")
    assert "quero bloquear o cartão 1234" not in index.texts


def test_a_single_goal_with_examples_is_read_against_none_of_these():
    goals = {key: replace(goal, enabled=key[1] == "BLOCK_CARD") for key, goal in CARD_GOALS.goals.items()}

    profile = serving(replace(CARD_GOALS, goals=goals))

    assert profile.goals.examples.intents == ("cards.BLOCK_CARD",)
    assert read(STOLEN, profile).goal == "BLOCK_CARD"
    assert read("qual o resultado do jogo de ontem?", profile).primary_domain == GENERAL_DOMAIN


def test_the_tier_switched_off_or_a_document_from_before_naive_bayes_compiles_no_goals_index():
    assert goals_examples_index(CARD_GOALS, {**TIER_ON, "examples_enabled": False}) is None
    assert goals_examples_index(CARD_GOALS, {"examples_enabled": True, "examples_vectoriser": "offline"}) is None
    assert goals_examples_index(CARD_GOALS, {}) is None


def test_embeddings_asked_for_with_no_endpoint_compile_the_offline_index():
    index = goals_examples_index(CARD_GOALS, {**TIER_ON, "examples_vectoriser": "embeddings"})

    assert index is not None and not index.vectoriser.remote


# -- the reader ----------------------------------------------------------------------------------------------------


def test_a_paraphrase_that_no_hint_matches_is_read_as_the_goal_whose_examples_it_resembles():
    assert read(STOLEN, serving(tier={})).primary_domain == GENERAL_DOMAIN  # no hint: today's reading

    intent = read(STOLEN, serving())

    assert (intent.primary_domain, intent.goal, dict(intent.entities)) == ("cards", "BLOCK_CARD", {})
    assert intent.reading["method"] == "examples"
    assert intent.confidence == pytest.approx(intent.reading["examples"]["score"], abs=1e-3)
    assert 0.8 <= intent.confidence <= 1.0


@pytest.mark.parametrize(
    ("text", "goal", "entities"),
    [
        ("minha carteira sumiu com tudo dentro", "BLOCK_CARD", {}),
        ("meu crédito é curto demais, quero 5000", "RAISE_LIMIT", {"amount_text": "5000"}),
        ("preciso ver quanto devo na fatura do cartão", "CARD_BILL", {}),
    ],
)
def test_paraphrases_of_each_goal_are_read_by_its_examples_with_their_entities(text, goal, entities):
    intent = read(text, serving())

    assert (intent.goal, dict(intent.entities), intent.reading["method"]) == (goal, entities, "examples")


def test_a_message_unlike_any_goals_examples_stays_general():
    intent = read("bom dia", serving())

    assert (intent.primary_domain, intent.goal, intent.confidence) == (GENERAL_DOMAIN, "", 1.0)
    assert intent.reading["method"] == "none"
    assert intent.reading["examples"]["none_of_these"]["kind"] == "none:greeting"


def test_function_words_alone_do_not_make_small_talk_a_goal():
    # "o" is the only thing "o que você sabe fazer?" shares with finance's "qual o preço da Nordea?"
    intent = read("o que você sabe fazer?", serving(FINANCE))

    assert intent.primary_domain == GENERAL_DOMAIN and intent.reading["method"] == "none"


def test_goals_too_close_to_tell_apart_are_not_taken():
    twin = replace(CARD_GOALS.goals[("cards", "BLOCK_CARD")], name="LOCK_CARD", capabilities=())
    catalogue = replace(CARD_GOALS, goals={**CARD_GOALS.goals, ("cards", "LOCK_CARD"): twin})

    intent = read(STOLEN, serving(catalogue))

    assert intent.primary_domain == GENERAL_DOMAIN
    evidence = intent.reading["examples"]
    assert {evidence["ranking"][0]["intent"], evidence["runner_up"]["intent"]} == {
        "cards.BLOCK_CARD",
        "cards.LOCK_CARD",
    }
    assert evidence["score"] - evidence["runner_up"]["score"] < evidence["margin"]


def test_a_goals_hints_win_over_the_examples():
    intent = read(f"segunda via, {STOLEN}", serving())  # CARD_BILL's keyword, BLOCK_CARD's paraphrase

    assert (intent.goal, intent.confidence, dict(intent.reading)) == ("CARD_BILL", CONFIDENT, {"method": "hints"})


def test_a_goal_read_by_its_examples_without_a_required_entity_is_capped_below_the_gate_which_asks_for_it():
    profile = serving()

    intent = read("dá para ampliar o limite?", profile)
    decision = decide("dá para ampliar o limite?", profile)

    assert (intent.goal, intent.confidence, intent.reading["method"]) == ("RAISE_LIMIT", INCOMPLETE, "examples")
    assert decision.status == CLARIFICATION and decision.clarification["reason"] == MISSING_ENTITY
    assert decision.clarification["missing"] == ["amount_text"]


def test_a_posterior_below_the_goal_threshold_makes_the_gate_ask_before_acting():
    # A lenient examples rule lets a near tie through; the gate (0.94) then asks "is this what you want?".
    profile = serving(threshold=0.5, margin=0.0)

    decision = decide("não sei onde deixei o cartão", profile)

    read_as = decision.intent_output
    assert read_as.reading["method"] == "examples" and 0.5 <= read_as.confidence < 0.94
    assert decision.status == CLARIFICATION and decision.clarification["reason"] == LOW_CONFIDENCE


def test_the_decision_records_how_the_goal_was_read_with_the_score_the_runner_up_and_the_nearest_examples():
    decision = decide(STOLEN, serving(goal_threshold=0.8))

    assert decision.status == PLAN
    reading = decision.as_dict()["reading"]
    assert reading["method"] == "examples"
    evidence = reading["examples"]
    assert evidence["score"] >= evidence["threshold"] == 0.8 and evidence["margin"] == 0.7
    assert evidence["runner_up"]["intent"] in ("cards.RAISE_LIMIT", "cards.CARD_BILL")
    assert evidence["nearest"] and {near["intent"] for near in evidence["nearest"]} == {"cards.BLOCK_CARD"}
    block_card = [*CARDS["goals"][0]["examples"], *CARDS["capabilities"][0]["metadata"]["intent_hints"]["examples"]]
    assert all(near["example"] in block_card for near in evidence["nearest"])
    assert evidence["vectoriser"] == "tfidf"


def test_a_message_the_examples_leave_general_records_why():
    decision = decide("quero pagar menos juros", serving())

    assert decision.status == GENERAL
    reading = decision.as_dict()["reading"]
    assert reading["method"] == "none" and reading["examples"]["ranking"]


# -- the conversation's goal ---------------------------------------------------------------------------------------


def test_a_follow_up_keeps_the_conversations_goal_as_before_with_the_tier_on():
    previous = IntentOutput("finance", "GET_QUOTE", {"symbol_text": "Nordea"}, CONFIDENT, "…")

    intent = read("e da Vale?", serving(FINANCE), previous=previous)

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("GET_QUOTE", {"symbol_text": "Vale"}, FOLLOW_UP)
    assert intent.reading["method"] == "follow_up"


def test_a_bare_name_still_answers_a_pending_clarification():
    pending = IntentOutput("finance", "GET_QUOTE", {}, INCOMPLETE, "qual o preço?")

    intent = read("Nordea", serving(FINANCE), previous=pending)

    assert (intent.goal, dict(intent.entities), intent.confidence) == ("GET_QUOTE", {"symbol_text": "Nordea"}, 0.95)


def test_a_paraphrase_of_another_goal_leaves_the_conversations_goal():
    previous = IntentOutput("cards", "BLOCK_CARD", {"last_digits": "1234"}, CONFIDENT, "bloquear o cartão 1234")
    text = "meu crédito é curto demais, quero 5000"  # "5000" would read as BLOCK_CARD's last digits

    assert read(text, serving(tier={}), previous=previous).goal == "BLOCK_CARD"  # today: a follow-up

    intent = read(text, serving(), previous=previous)

    assert (intent.goal, dict(intent.entities), intent.reading["method"]) == (
        "RAISE_LIMIT",
        {"amount_text": "5000"},
        "examples",
    )


def test_small_talk_between_a_question_and_its_answer_leaves_the_pending_goal_pending():
    profile = serving()
    asked = decide("dá para ampliar o limite?", profile)
    assert asked.status == CLARIFICATION and asked.goal_state["pending"]

    greeted = decide("bom dia!", profile, goal_state=asked.goal_state)
    answered = decide("quero 5000", profile, goal_state=greeted.goal_state)

    assert greeted.status == GENERAL and greeted.goal_state == asked.goal_state
    assert greeted.intent_output.reading["method"] == "small_talk"
    assert (answered.status, answered.intent_output.goal) == (PLAN, "RAISE_LIMIT")
