"""The examples tier (routing.examples, routing.router): between keywords and the LLM classifier."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

import numpy as np
import pytest

from routing import examples
from routing.examples import ALPHA, ENGINES, TEMPERATURE, ExampleIndex, examples_compile
from routing.router import Classification, CompiledRouter, IntentSpec
from routing.tfidf import TfidfVectoriser

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


@pytest.fixture(autouse=True, params=ENGINES)
def engine(request, monkeypatch):
    """Every test on each engine that scores an offline index: NumPy, the compiled loops and scikit-learn's own."""
    monkeypatch.setattr(examples, "offline_engine", lambda classes: request.param)
    examples._offline_compile.cache_clear()
    yield request.param
    examples._offline_compile.cache_clear()


def router(**settings) -> CompiledRouter:
    rule = {"examples_threshold": 0.2, "examples_margin": 0.05, **settings}
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser())
    return CompiledRouter(intents=INTENTS, fallback_agent="support_agent", examples=index, **rule)


def decide(compiled: CompiledRouter, text: str, **kwargs):
    return asyncio.run(compiled.route(text, **kwargs))


def _assert_sklearn_vectors(texts: list[str], messages: tuple[str, ...]) -> None:
    """Fitted on ``texts``, our matrix and each message's vector equal scikit-learn's two ``TfidfVectorizer``s."""
    vectoriser = TfidfVectoriser()
    matrix = vectoriser.fit(texts).toarray()
    chars, words = (reference.fit(texts) for reference in vectoriser.sklearn())

    # The same features (scikit-learn numbers them in sorted order, ours as first met: the order changes nothing).
    assert set(chars.vocabulary_) == set(vectoriser.vocabulary)
    assert set(words.vocabulary_) == set(vectoriser.words)
    order = [vectoriser.vocabulary[gram] for gram in sorted(chars.vocabulary_, key=chars.vocabulary_.get)]
    order += [
        vectoriser.chars + vectoriser.words[term] for term in sorted(words.vocabulary_, key=words.vocabulary_.get)
    ]
    reference = np.hstack([chars.transform(texts).toarray(), words.transform(texts).toarray()])
    assert np.allclose(reference, matrix[:, order], atol=1e-6)
    for text in messages:
        features, weights = vectoriser.vector(text)
        assert list(features) == sorted(features)
        dense = np.zeros(matrix.shape[1])
        dense[features] = weights
        expected = np.hstack([chars.transform([text]).toarray()[0], words.transform([text]).toarray()[0]])
        assert np.allclose(expected, dense[order], atol=1e-6), text


def test_the_offline_vector_of_a_message_is_scikit_learns_tfidf_vectors_of_n_grams_and_of_words():
    _assert_sklearn_vectors(
        [example for intent in INTENTS for example in intent.examples],
        (
            "A entrega do modem atrasou!",
            "cuenta cara",
            "ok",
            "Pedido 123 — não chegou?",
            "a e o",
            "",
            "do a modem",  # a word of one letter between a pair's words: still the pair
            "do xyzzy modem",  # a word no example has between them: no pair
            "conta conta conta chegou chegou",  # words said again, and their pairs
            "   cobrança\tdo   plano\n",  # spaces, a tab and a new line around the words
        ),
    )


def test_words_in_other_scripts_are_found_as_scikit_learn_finds_them():
    _assert_sklearn_vectors(
        ["Заказ не пришёл домой", "注文が届かない", "Die Straße ist gesperrt", "mój zamówienie nie dotarło"],
        ("заказ пришёл?", "注文が届かない 注文", "straße 🚚 gesperrt", "ЗАКАЗ", "nie dotarło"),
    )


def sklearn_posteriors(index: ExampleIndex, text: str, *, exclude: Collection[int] = frozenset()) -> dict[str, float]:
    """scikit-learn's multinomial naive Bayes fitted on the index's vectors (but ``exclude``), for ``text``: every
    class's joint log-likelihood at the tier's temperature, normalised."""
    from scipy.sparse import csr_matrix
    from scipy.special import softmax
    from sklearn.naive_bayes import MultinomialNB

    kept = [row for row in range(len(index.texts)) if row not in exclude]
    labels = [index.classes[index._row_intent[row]] for row in kept]
    model = MultinomialNB(alpha=ALPHA, fit_prior=False).fit(index.matrix[kept], labels)
    features, weights = index.vectoriser.vector(text)
    message = csr_matrix((weights, features, [0, len(features)]), shape=(1, index.matrix.shape[1]))
    posteriors = softmax(model.predict_joint_log_proba(message)[0] / TEMPERATURE)
    return dict(zip(model.classes_.tolist(), posteriors.tolist(), strict=True))


@pytest.mark.parametrize(
    "text",
    [
        "a conta do telefone chegou cara demais",
        "conta conta conta",  # a word repeated
        "o pedido pedido do meu pedido não chegou, cadê o pedido?",
        "my router still has not been delivered",
    ],
)
def test_the_offline_score_is_the_naive_bayes_posterior_scikit_learn_gives(text):
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser())

    assert dict(index.match_text(text).ranking) == pytest.approx(sklearn_posteriors(index, text), abs=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "a conta do telefone chegou cara demais",
        "conta conta conta",  # a word repeated: its n-grams' term frequency is the message's
        "contas da conta contadas",  # n-grams shared by different words
        "banana nanana nanana",  # an n-gram twice in a word said twice
        "o pedido pedido do meu pedido não chegou, cadê o pedido?",
        "palavra-que-ninguém-usou xyzzy conta",  # words no example has, next to one it has
        "a e o",  # words of one letter: n-grams, but no word-block term
        "",
    ],
)
def test_a_text_scored_from_its_words_scores_as_its_whole_vector_does(text):
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser())

    from_words, whole = index.match_text(text), index.match(index.vectoriser.vector(text))

    assert dict(from_words.ranking) == pytest.approx(dict(whole.ranking), abs=1e-9)
    assert [n.example for n in from_words.nearest] == [n.example for n in whole.nearest]
    assert [n.score for n in from_words.nearest] == pytest.approx([n.score for n in whole.nearest], abs=1e-9)


def test_examples_left_out_leave_their_intents_counts_as_if_fitted_without_them():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser())
    text = index.texts[1]
    left = {0, 1, 2, len(index.texts) - 1}  # three of one intent's examples and one of another's

    match = index.match_text(text, exclude=sorted(left))

    assert dict(match.ranking) == pytest.approx(sklearn_posteriors(index, text, exclude=left), abs=1e-6)
    assert dict(match.ranking)["billing"] < dict(index.match_text(text).ranking)["billing"]
    assert all(neighbour.example not in {index.texts[row] for row in left} for neighbour in match.nearest)


def test_a_message_with_nothing_the_examples_know_ranks_no_intent():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser())

    for text in ("xyzzy qwrtp", "", "?!"):
        match = index.match_text(text)
        assert (match.ranking, match.nearest) == ((), ())
        assert not match.decides(0.05, 0.0)
        assert "No example shares" in match.why(0.2, 0.05)


def test_the_nearest_examples_shown_are_the_best_intents_most_similar():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser())
    text = "o modem da conta não chegou"

    match = index.match_text(text)
    similarities = index.similarities(index.vectoriser.vector(text))
    own = np.flatnonzero(index._row_intent == index.intents.index(match.best[0]))
    order = own[np.argsort(-similarities[own], kind="stable")[: len(match.nearest)]]

    assert len(match.nearest) == 3 and {neighbour.intent for neighbour in match.nearest} == {match.best[0]}

    assert [neighbour.example for neighbour in match.nearest] == [index.texts[row] for row in order]
    assert [neighbour.score for neighbour in match.nearest] == pytest.approx(similarities[order].tolist())
    assert 0 < match.nearest[0].score <= 1


def test_a_paraphrase_without_keywords_is_routed_by_its_examples_with_the_evidence():
    decision = decide(router(), "a conta do telefone chegou cara demais")

    assert (decision.method, decision.intent, decision.agent) == ("examples", "billing", "billing_agent")
    evidence = decision.metadata["examples"]
    assert evidence["nearest"][0]["intent"] == "billing"
    assert evidence["nearest"][0]["example"] == "Minha conta de telefone veio muito cara este mês"
    assert evidence["runner_up"]["intent"] == "delivery"
    assert evidence["score"] == pytest.approx(decision.confidence, abs=0.01)
    assert evidence["score"] - evidence["runner_up"]["score"] >= 0.05
    assert evidence["vectoriser"] == "tfidf"
    assert "billing" in decision.reason and "runner-up delivery" in decision.reason


def test_keywords_decide_before_the_examples():
    decision = decide(router(), "meu pedido da conta do telefone cara")

    assert (decision.method, decision.intent) == ("keyword", "delivery")


def test_a_state_policy_decides_before_keywords_and_examples():
    from routing.router import StatePolicySpec

    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser())
    compiled = CompiledRouter(
        intents=INTENTS,
        state_policies=(StatePolicySpec(state="WAITING", agent="orders_agent"),),
        fallback_agent="support_agent",
        examples=index,
        examples_threshold=0.2,
    )

    assert decide(compiled, "a conta do telefone chegou cara demais", state="WAITING").method == "state"


def test_below_the_threshold_the_examples_do_not_decide_and_the_fallback_says_why():
    decision = decide(router(examples_threshold=1.0), "a conta do telefone chegou cara demais")

    assert (decision.method, decision.agent) == ("fallback", "support_agent")
    assert "below the threshold 1.00" in decision.reason
    assert decision.metadata["examples"]["ranking"][0]["intent"] == "billing"


def test_too_close_a_call_is_left_to_the_classifier():
    calls = []

    async def classifier(text, intents):
        calls.append(text)
        return Classification(intent="delivery", confidence=0.9, reason="scripted")

    compiled = router(examples_margin=1.0, llm_enabled=True, llm_threshold=0.5)
    decision = decide(compiled, "a conta do telefone chegou cara demais", classifier=classifier)

    assert (decision.method, decision.intent) == ("llm", "delivery")
    assert calls == ["a conta do telefone chegou cara demais"]
    assert decision.metadata["examples"]["margin"] == 1.0
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
    assert ExampleIndex.build([("a", ()), ("b", ("", "  "))], TfidfVectoriser()) is None
    bare = tuple(IntentSpec(name=i.name, agent=i.agent, keywords=i.keywords) for i in INTENTS)
    assert decide(CompiledRouter(intents=bare, fallback_agent="support_agent"), "conta cara").method == "fallback"


def test_compiling_the_same_examples_twice_reuses_the_index():
    examples = tuple((i.name, i.examples) for i in INTENTS)

    assert examples_compile(examples) is examples_compile(tuple((name, tuple(own)) for name, own in examples))


def test_an_example_left_out_is_scored_against_the_others_only():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser())
    text = index.texts[0]

    assert index.match_text(text).nearest[0].example == text
    left_out = index.match(index.vectoriser.vector(text), exclude=0)
    assert all(neighbour.example != text for neighbour in left_out.nearest)
    assert left_out.best[0] == "billing"


class DenseTfidf(TfidfVectoriser):
    """The offline vectoriser's vectors as dense arrays, as an embeddings endpoint gives them."""

    def fit(self, texts):
        return super().fit(texts).toarray()

    def vector(self, text):
        features, weights = super().vector(text)
        dense = np.zeros(len(self.vocabulary) + len(self.words), dtype=np.float32)
        dense[features] = weights
        return dense


def _by_hand(index: ExampleIndex, text: str, *, exclude: int | set[int] | None = None) -> dict[str, float]:
    """Each intent's embeddings score computed the long way: 0.3 × its nearest example's cosine + 0.7 × its
    centroid's."""
    rows = index.matrix.astype(np.float64)
    message = index.vectoriser.vector(text).astype(np.float64)
    ends = [*index.starts[1:], len(index.texts)]
    scores = {}
    for name, start, end in zip(index.intents, index.starts, ends, strict=True):
        left_out = exclude if isinstance(exclude, set) else {exclude}
        own = [row for row in range(start, end) if row not in left_out]
        centroid = rows[own].sum(axis=0)
        centroid /= np.linalg.norm(centroid)
        scores[name] = 0.3 * max(0.0, max(rows[own] @ message)) + 0.7 * centroid @ message
    return {name: score for name, score in scores.items() if score > 0}


def test_with_embeddings_an_intents_score_mixes_its_nearest_example_and_the_centroid_of_its_examples():
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], DenseTfidf())
    text = "a conta do telefone chegou cara demais"

    assert dict(index.match_text(text).ranking) == pytest.approx(_by_hand(index, text), abs=1e-5)
    assert index.match_text(text).nearest[0].example == "Minha conta de telefone veio muito cara este mês"


def test_with_embeddings_examples_left_out_leave_their_intents_centroids_exactly():
    many = tuple(f"{example} {n}" for n in range(12) for example in INTENTS[0].examples)
    examples = [(INTENTS[0].name, many), *[(i.name, i.examples) for i in INTENTS[1:]]]
    index = ExampleIndex.build(examples, DenseTfidf())
    text = index.texts[1]

    left_out = index.match(index.vectoriser.vector(text), exclude=1)
    assert dict(left_out.ranking) == pytest.approx(_by_hand(index, text, exclude=1), abs=1e-5)
    left = {0, 1, 2, len(index.texts) - 1}
    match = index.match_text(text, exclude=sorted(left))
    assert dict(match.ranking) == pytest.approx(_by_hand(index, text, exclude=left), abs=1e-5)
    assert all(neighbour.example not in {index.texts[row] for row in left} for neighbour in match.nearest)


def test_the_compiled_loops_cache_their_code_under_the_platforms_writable_folder():
    """In the image the source folder and the app user's home are read-only: numba must be told where to write, or
    importing the kernel fails."""
    import os

    from django.conf import settings

    import routing.examples_kernel  # noqa: F401 — imported: numba found its cache folder

    assert os.environ["NUMBA_CACHE_DIR"] == str(settings.VAR_DIR / "cache" / "numba")


def test_a_version_calibrated_for_the_earlier_cosine_score_keeps_its_offline_tier_off():
    from routing.documents import examples_index
    from routing.examples import OFFLINE_SCORE

    old = {"examples_enabled": True, "examples_vectoriser": "offline", "examples_threshold": 0.16}

    assert examples_index(INTENTS, old, set()) is None  # 0.16 on a posterior would let most messages through
    assert examples_index(INTENTS, {**old, "examples_score": OFFLINE_SCORE}, set()) is not None
    assert examples_index(INTENTS, {**old, "examples_score": OFFLINE_SCORE, "examples_enabled": False}, set()) is None


@pytest.mark.parametrize("text", ["minha fatura veio muito cara este mês", "o pedido do TCC que o professor fez"])
def test_the_keyword_check_reads_no_nearest_example_and_the_tier_after_it_adds_them_without_scoring_again(
    engine, monkeypatch, text
):
    """The keyword check reads a message's scores alone (:meth:`ExampleIndex.match_text` with ``nearest=0``): NumPy's
    and scikit-learn's engines find no nearest examples for it, and the examples tier asking after it in the same
    turn (a hit set aside) gets the same match as a fresh score, the message scored once."""
    import contextvars

    compiled = router(keyword_check=0.5)
    scored: list[str] = []

    def counted(name: str):
        method = getattr(ExampleIndex, name)

        def call(index, *args):
            scored.append(name)
            return method(index, *args)

        return call

    monkeypatch.setattr(ExampleIndex, "_bayes_match", counted("_bayes_match"))
    monkeypatch.setattr(ExampleIndex, "_nearest", counted("_nearest"))

    def check_then_tier():
        compiled.checked_keyword_match(text)
        checked = list(scored)
        return checked, compiled.examples.match_text(text)

    checked, match = contextvars.Context().run(check_then_tier)
    turn = list(scored)
    fresh = contextvars.Context().run(compiled.examples.match_text, text)

    assert match == fresh and match.nearest
    if engine != examples.COMPILED:  # the compiled loops score and find the nearest examples in one call
        assert checked == ["_bayes_match"]
        assert turn == ["_bayes_match", "_nearest"]
