"""The examples tier (routing.examples, routing.router): between keywords and the LLM classifier."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from routing.examples import ExampleIndex, TfidfCharVectoriser, examples_compile
from routing.router import Classification, CompiledRouter, IntentSpec

INTENTS = (
    IntentSpec(
        name="billing",
        agent="billing_agent",
        priority=10,
        keywords=("fatura",),
        examples=(
            "Minha conta de telefone veio muito cara este mês",
            "Quero entender a cobrança do meu plano",
            "Why is my phone bill so expensive this month?",
            "¿Por qué mi cuenta de teléfono llegó tan cara?",
        ),
    ),
    IntentSpec(
        name="delivery",
        agent="orders_agent",
        priority=20,
        keywords=("pedido",),
        examples=(
            "Meu chip ainda não chegou, já faz uma semana",
            "Onde está a entrega do meu modem?",
            "My new router has not been delivered yet",
            "Mi módem todavía no ha llegado a casa",
        ),
    ),
    IntentSpec(name="no_examples", agent="support_agent", priority=30, keywords=("suporte",)),
)


def router(**settings) -> CompiledRouter:
    rule = {"examples_threshold": 0.2, "examples_margin": 0.05, **settings}
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfCharVectoriser())
    return CompiledRouter(intents=INTENTS, fallback_agent="support_agent", examples=index, **rule)


def decide(compiled: CompiledRouter, text: str, **kwargs):
    return asyncio.run(compiled.route(text, **kwargs))


def test_the_offline_vector_of_a_message_is_scikit_learns_tfidf_vector():
    texts = [example for intent in INTENTS for example in intent.examples]
    vectoriser = TfidfCharVectoriser(max_df=0.5)
    matrix = vectoriser.fit(texts)
    reference = vectoriser.sklearn(len(texts)).fit(texts)

    assert reference.vocabulary_ == vectoriser.vocabulary
    assert np.allclose(reference.transform(texts).toarray(), matrix.toarray(), atol=1e-6)
    for text in ("A entrega do modem atrasou!", "cuenta cara", "ok", "Pedido 123 — não chegou?"):
        features, weights = vectoriser.vector(text)
        dense = np.zeros(len(vectoriser.vocabulary), dtype=np.float32)
        dense[features] = weights
        assert np.allclose(reference.transform([text]).toarray()[0], dense, atol=1e-6)


def test_a_paraphrase_without_keywords_is_routed_by_its_examples_with_the_evidence():
    decision = decide(router(), "a conta do telefone chegou cara demais")

    assert (decision.method, decision.intent, decision.agent) == ("examples", "billing", "billing_agent")
    evidence = decision.metadata["examples"]
    assert evidence["nearest"][0]["intent"] == "billing"
    assert evidence["nearest"][0]["example"] == "Minha conta de telefone veio muito cara este mês"
    assert evidence["runner_up"]["intent"] == "delivery"
    assert evidence["score"] == pytest.approx(decision.confidence, abs=0.01)
    assert evidence["score"] - evidence["runner_up"]["score"] >= 0.05
    assert evidence["vectoriser"] == "tfidf-char"
    assert "billing" in decision.reason and "runner-up delivery" in decision.reason


def test_keywords_decide_before_the_examples():
    decision = decide(router(), "meu pedido da conta do telefone cara")

    assert (decision.method, decision.intent) == ("keyword", "delivery")


def test_a_state_policy_decides_before_keywords_and_examples():
    from routing.router import StatePolicySpec

    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfCharVectoriser())
    compiled = CompiledRouter(
        intents=INTENTS,
        state_policies=(StatePolicySpec(state="WAITING", agent="orders_agent"),),
        fallback_agent="support_agent",
        examples=index,
        examples_threshold=0.2,
    )

    assert decide(compiled, "a conta do telefone chegou cara demais", state="WAITING").method == "state"


def test_below_the_threshold_the_examples_do_not_decide_and_the_fallback_says_why():
    decision = decide(router(examples_threshold=0.99), "a conta do telefone chegou cara demais")

    assert (decision.method, decision.agent) == ("fallback", "support_agent")
    assert "below the threshold 0.99" in decision.reason
    assert decision.metadata["examples"]["ranking"][0]["intent"] == "billing"


def test_too_close_a_call_is_left_to_the_classifier():
    calls = []

    async def classifier(text, intents):
        calls.append(text)
        return Classification(intent="delivery", confidence=0.9, reason="scripted")

    compiled = router(examples_margin=0.99, llm_enabled=True, llm_threshold=0.5)
    decision = decide(compiled, "a conta do telefone chegou cara demais", classifier=classifier)

    assert (decision.method, decision.intent) == ("llm", "delivery")
    assert calls == ["a conta do telefone chegou cara demais"]
    assert decision.metadata["examples"]["margin"] == 0.99
    assert decision.metadata["examples"]["ranking"][0]["intent"] == "billing"


def test_an_examples_decision_spares_the_classifier_its_call():
    calls = []

    async def classifier(text, intents):
        calls.append(text)
        return Classification(intent="delivery", confidence=0.9)

    compiled = router(llm_enabled=True)
    decision = decide(compiled, "my router still has not been delivered", classifier=classifier)

    assert (decision.method, decision.intent) == ("examples", "delivery")
    assert calls == []


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("why is the bill so expensive", "billing"),
        ("por qué la cuenta llegó tan cara", "billing"),
        ("el módem no llegó todavía", "delivery"),
        ("o modem ainda nao chegou", "delivery"),
    ],
)
def test_examples_in_three_languages_route_their_language(text, intent):
    assert decide(router(), text).intent == intent


def test_an_intent_without_examples_is_never_chosen_by_the_tier():
    match = router().examples_match("suporte técnico por favor")

    assert all(name != "no_examples" for name, _ in match.ranking)


def test_a_profile_without_examples_has_no_tier():
    assert ExampleIndex.build([("a", ()), ("b", ("", "  "))], TfidfCharVectoriser()) is None
    bare = tuple(IntentSpec(name=i.name, agent=i.agent, keywords=i.keywords) for i in INTENTS)
    assert decide(CompiledRouter(intents=bare, fallback_agent="support_agent"), "conta cara").method == "fallback"


def test_compiling_the_same_examples_twice_reuses_the_index():
    examples = tuple((i.name, i.examples) for i in INTENTS)

    assert examples_compile(examples) is examples_compile(tuple((name, tuple(own)) for name, own in examples))


def test_an_example_left_out_is_scored_against_the_others_only():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfCharVectoriser())
    text = index.texts[0]

    assert index.match_text(text).nearest[0].example == text
    left_out = index.match(index.vectoriser.vector(text), exclude=0)
    assert all(neighbour.example != text for neighbour in left_out.nearest)
    assert left_out.best[0] == "billing"
