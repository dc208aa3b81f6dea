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
    vectoriser = TfidfCharVectoriser()
    matrix = vectoriser.fit(texts)
    reference = vectoriser.sklearn().fit(texts)

    # The same n-grams (scikit-learn numbers them in sorted order, ours as first met: the order changes nothing).
    assert set(reference.vocabulary_) == set(vectoriser.vocabulary)
    order = [vectoriser.vocabulary[gram] for gram in sorted(reference.vocabulary_, key=reference.vocabulary_.get)]
    assert np.allclose(reference.transform(texts).toarray(), matrix.toarray()[:, order], atol=1e-6)
    for text in ("A entrega do modem atrasou!", "cuenta cara", "ok", "Pedido 123 — não chegou?"):
        features, weights = vectoriser.vector(text)
        dense = np.zeros(len(vectoriser.vocabulary), dtype=np.float32)
        dense[features] = weights
        assert np.allclose(reference.transform([text]).toarray()[0], dense[order], atol=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "a conta do telefone chegou cara demais",
        "conta conta conta",  # a word repeated: its n-grams' term frequency is the message's, not the word's
        "contas da conta contadas",  # n-grams shared by different words
        "o pedido pedido do meu pedido não chegou, cadê o pedido?",
        "palavra-que-ninguém-usou xyzzy",  # nothing known
        "",
    ],
)
def test_a_text_scored_word_by_word_gets_its_whole_vectors_similarities(text):
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfCharVectoriser())
    whole = index.similarities(index.vectoriser.vector(text))

    assert np.allclose(index.text_similarities(text), whole, atol=1e-6)
    assert np.allclose(index.text_similarities(text), whole, atol=1e-6)  # again, from the memoised words


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


def _by_hand(index: ExampleIndex, text: str, *, exclude: int | set[int] | None = None) -> dict[str, float]:
    """Each intent's score computed the long way: 0.3 × its nearest example's cosine + 0.7 × its centroid's."""
    rows = index.matrix.toarray().astype(np.float64)
    message = np.zeros(rows.shape[1])
    features, weights = index.vectoriser.vector(text)
    message[features] = weights
    ends = [*index.starts[1:], len(index.texts)]
    scores = {}
    for name, start, end in zip(index.intents, index.starts, ends, strict=True):
        left_out = exclude if isinstance(exclude, set) else {exclude}
        own = [row for row in range(start, end) if row not in left_out]
        centroid = rows[own].sum(axis=0)
        centroid /= np.linalg.norm(centroid)
        scores[name] = 0.3 * max(rows[own] @ message) + 0.7 * centroid @ message
    return scores


def test_an_intents_score_mixes_its_nearest_example_and_the_centroid_of_its_examples():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfCharVectoriser())
    text = "a conta do telefone chegou cara demais"

    expected = _by_hand(index, text)
    assert dict(index.match_text(text).ranking) == pytest.approx(expected, abs=1e-5)


def test_an_example_left_out_is_left_out_of_its_intents_centroid_too():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfCharVectoriser())
    text = index.texts[1]

    left_out = index.match(index.vectoriser.vector(text), exclude=1)

    assert dict(left_out.ranking) == pytest.approx(_by_hand(index, text, exclude=1), abs=1e-5)
    assert dict(left_out.ranking)["billing"] < dict(index.match_text(text).ranking)["billing"]


def test_an_intent_with_many_more_examples_than_the_others_is_scored_the_same_way():
    many = tuple(f"{example} {n}" for n in range(12) for example in INTENTS[0].examples)
    examples = [(INTENTS[0].name, many), *[(i.name, i.examples) for i in INTENTS[1:]]]
    index = ExampleIndex.build(examples, TfidfCharVectoriser())
    text = "a conta do telefone chegou cara demais"

    assert index._column_bounds[-1] > len(index.intents)  # the large intent spans several columns of the grid
    assert dict(index.match_text(text).ranking) == pytest.approx(_by_hand(index, text), abs=1e-5)
    assert index.match_text(text).nearest[0].intent == INTENTS[0].name
    row = len(many) - 1
    left_out = index.match_text(index.texts[row], exclude=row)
    assert dict(left_out.ranking) == pytest.approx(_by_hand(index, index.texts[row], exclude=row), abs=1e-5)


def test_several_examples_left_out_leave_their_intents_centroids_exactly():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfCharVectoriser())
    text = index.texts[1]
    left = {0, 1, 2, len(index.texts) - 1}  # three of one intent's examples and one of another's

    match = index.match_text(text, exclude=sorted(left))

    assert dict(match.ranking) == pytest.approx(_by_hand(index, text, exclude=left), abs=1e-5)
    assert all(neighbour.example not in {index.texts[row] for row in left} for neighbour in match.nearest)


class DenseTfidf(TfidfCharVectoriser):
    """The offline vectoriser's vectors as dense arrays, as an embeddings endpoint gives them."""

    def fit(self, texts):
        return super().fit(texts).toarray()

    def vector(self, text):
        features, weights = super().vector(text)
        dense = np.zeros(len(self.vocabulary), dtype=np.float32)
        dense[features] = weights
        return dense


def test_dense_vectors_are_scored_as_the_sparse_ones_are():
    examples = [(i.name, i.examples) for i in INTENTS]
    sparse, dense = ExampleIndex.build(examples, TfidfCharVectoriser()), ExampleIndex.build(examples, DenseTfidf())

    for text in ("a conta do telefone chegou cara demais", "my router still has not been delivered"):
        assert dict(dense.match_text(text).ranking) == pytest.approx(dict(sparse.match_text(text).ranking), abs=1e-5)
    for row in (0, 5):
        text = sparse.texts[row]
        assert dict(dense.match(dense.vectoriser.vector(text), exclude=row).ranking) == pytest.approx(
            dict(sparse.match(sparse.vectoriser.vector(text), exclude=row).ranking), abs=1e-5
        )


def test_the_compiled_loops_cache_their_code_under_the_platforms_writable_folder():
    """In the image the source folder and the app user's home are read-only: numba must be told where to write, or
    importing the kernel fails."""
    import os

    from django.conf import settings

    import routing.examples_kernel  # noqa: F401 — imported: numba found its cache folder

    assert os.environ["NUMBA_CACHE_DIR"] == str(settings.VAR_DIR / "cache" / "numba")
