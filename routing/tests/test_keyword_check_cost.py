"""What the keyword check costs a message (routing.router.CompiledRouter.checked_keyword_match): the message's
vector and naive Bayes scores, each cut of them holding the result bit for bit to the NumPy code it replaced, over
thousands of texts; and a profile with the check off (``keyword_check`` = 1) computing nothing of the tier."""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pytest

from common.text import normalize
from routing import examples
from routing.background import corpus
from routing.examples import NUMPY, ExampleIndex
from routing.router import CompiledRouter, IntentSpec
from routing.tfidf import NO_FEATURES, NO_WEIGHTS, TfidfVectoriser, index_ranges

INTENTS = (
    IntentSpec(
        name="billing",
        agent="billing_agent",
        keywords=("fatura", "conta"),
        examples=(
            "Minha conta de telefone veio muito cara este mês",
            "Quero entender a cobrança do meu plano",
            "Why is my phone bill so expensive this month?",
            "¿Por qué mi cuenta de teléfono llegó tan cara?",
            "banana bandana: a fatura veio com um valor que não reconheço",
        ),
    ),
    IntentSpec(
        name="delivery",
        agent="orders_agent",
        keywords=("pedido", "entrega"),
        examples=(
            "Meu chip ainda não chegou, já faz uma semana",
            "Onde está a entrega do meu modem?",
            "My new router has not been delivered yet",
            "Mi módem todavía no ha llegado a casa",
        ),
    ),
)


def numpy_vector(vectoriser: TfidfVectoriser, text: str) -> tuple[np.ndarray, np.ndarray]:
    """The message's vector as ``TfidfVectoriser.vector`` computed it in NumPy before its features were counted in
    Python: the reference the cut is held to."""
    words = normalize(text).split()
    rows = vectoriser._rows
    fitted = [rows[word] for word in words if word in rows]
    extra = [
        column
        for word in words
        if word not in rows
        for column in map(vectoriser.vocabulary.get, vectoriser.grams(word))
        if column is not None
    ]
    tokens = [word for word in words if len(word) > 1]
    terms = [*tokens, *(f"{first} {second}" for first, second in itertools.pairwise(tokens))]
    extra.extend(vectoriser.chars + column for column in map(vectoriser.words.get, terms) if column is not None)
    starts, grams, counts = vectoriser._table
    said = np.asarray(fitted, np.int64)
    entries = index_ranges(starts[said], starts[said + 1])
    features, inverse = np.unique(np.concatenate([grams[entries], np.asarray(extra, np.int64)]), return_inverse=True)
    if not len(features):
        return NO_FEATURES, NO_WEIGHTS
    frequency = np.bincount(inverse, np.concatenate([counts[entries], np.ones(len(extra))]), len(features))
    weights = (1.0 + np.log(frequency)) * vectoriser._idf[features]
    words_block = features >= vectoriser.chars
    norms = np.sqrt(
        [np.dot(weights[~words_block], weights[~words_block]), np.dot(weights[words_block], weights[words_block])]
    )
    divisor = norms[words_block.astype(np.int64)]
    return features, weights / np.where(divisor > 0, divisor, 1.0)


@pytest.fixture(scope="module")
def index() -> ExampleIndex:
    """The two intents against the shipped "none of these" corpus: thousands of examples in three languages."""
    built = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser(), corpus(), engine=NUMPY)
    assert built is not None
    return built


def texts(index: ExampleIndex) -> list[str]:
    """The index's own examples, and 3,000 messages of 1–30 words drawn from them, from words no example has, from
    other scripts and from words holding an n-gram twice, in a seeded order."""
    own = list(index.texts)
    words = [*" ".join(own).split(), "xyzzyq", "cobranças!!", "ananas", "bananabanana", "데이터", "данные", "ok", "a"]
    draw = random.Random(60)
    drawn = [" ".join(draw.choice(words) for _ in range(draw.randint(1, 30))) for _ in range(3000)]
    return [*own, *drawn, "", "!!!", "1234"]


def test_the_message_vector_counted_in_python_is_the_numpy_vector_bit_for_bit(index):
    vectoriser = index.vectoriser
    assert isinstance(vectoriser, TfidfVectoriser)
    assert vectoriser._repeated  # words holding an n-gram more than once are among the texts
    for text in texts(index):
        features, weights = vectoriser.vector(text)
        expected_features, expected_weights = numpy_vector(vectoriser, text)
        assert features.dtype == expected_features.dtype and weights.dtype == expected_weights.dtype
        assert features.tolist() == expected_features.tolist(), text
        assert weights.tobytes() == expected_weights.tobytes(), text


def test_a_profile_with_the_keyword_check_off_computes_nothing_of_the_examples_tier_for_a_keyword(index, monkeypatch):
    """``keyword_check`` = 1 is the switch's off position: a message holding one keyword is neither vectorised nor
    scored, whatever the examples would say of it."""
    computed: list[str] = []

    def counted(owner: Any, name: str) -> None:
        method = getattr(owner, name)

        def call(*args, **kwargs):
            computed.append(name)
            return method(*args, **kwargs)

        monkeypatch.setattr(owner, name, call)

    counted(TfidfVectoriser, "vector")
    counted(ExampleIndex, "match_text")
    counted(ExampleIndex, "match")
    counted(examples, "_bayes_scores")
    checked = {"on": 0.5, "off": 1.0}
    routers = {
        state: CompiledRouter(intents=INTENTS, fallback_agent="support_agent", examples=index, keyword_check=bar)
        for state, bar in checked.items()
    }
    message = "o pedido do TCC que o professor fez"  # one keyword, in another sense

    found = routers["off"].checked_keyword_match(message)
    assert [hit.intent.name for hit in found.hits] == ["delivery"]
    assert computed == []

    routers["on"].checked_keyword_match(message)
    assert "vector" in computed and "match_text" in computed  # the same message with the check on is read
