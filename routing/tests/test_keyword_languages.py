"""Keywords limited to languages: the matching (compiled and the reference loop), the decision's metadata and the
language read once per message, only when a limited keyword occurs. The admin, the document, the diff, YAML and the
route preview: ``test_keyword_languages_admin.py``."""

from __future__ import annotations

import random

import pytest

from common import language as language_module
from routing.keywords import KeywordLoopMatcher, KeywordOffLanguage
from routing.router import CompiledRouter, IntentSpec

ORDERS = IntentSpec(
    name="retail_order_tracking",
    agent="orders_agent",
    priority=20,
    keywords=("pedido", "entrega", "where is my order"),
    keyword_languages=(("pedido", ("pt",)), ("where is my order", ("en",))),
)
CANCELLATION = IntentSpec(
    name="retail_order_cancellation",
    agent="orders_agent",
    priority=15,
    keywords=("cancelar", "anular"),
    keyword_languages=(("anular", ("es",)),),
)
SUPPORT = IntentSpec(name="support_request", agent="support_agent", priority=40, keywords=("troca", "defeito"))


def make_router(*intents: IntentSpec) -> CompiledRouter:
    return CompiledRouter(intents=intents or (ORDERS, CANCELLATION, SUPPORT), fallback_agent="support_agent")


@pytest.fixture
def readings(monkeypatch) -> list[str]:
    """The texts whose language the router read (the one seam: the detector the router calls)."""
    read: list[str] = []
    detect = language_module.detect_language

    def counting(text: str) -> str | None:
        read.append(text)
        return detect(text)

    monkeypatch.setattr("routing.keywords.detect_language", counting)
    return read


def test_a_keyword_limited_to_portuguese_does_not_count_in_a_spanish_message():
    found = make_router().keyword_match("quiero saber dónde está el pedido P300, ¿ya salió?")

    assert found.hits == []
    assert found.off_language == (KeywordOffLanguage("retail_order_tracking", "pedido", ("pt",), "es"),)


def test_a_keyword_limited_to_portuguese_counts_in_a_portuguese_message():
    hits = make_router().match("meu pedido P300 ainda não chegou")

    assert [(hit.intent.name, hit.keywords) for hit in hits] == [("retail_order_tracking", ("pedido",))]


def test_a_message_whose_language_cannot_be_told_counts_every_keyword():
    hits = make_router().match("pedido P300")

    assert [hit.intent.name for hit in hits] == ["retail_order_tracking"]


def test_a_spanish_cancellation_that_names_the_order_goes_to_cancellation_not_tracking():
    decision = make_router().route_sync("quiero anular el pedido P300 que hice ayer")

    assert decision.intent == "retail_order_cancellation"
    assert decision.metadata["matched_keywords"] == ["anular"]
    assert decision.metadata["keywords_off_language"] == [
        {"intent": "retail_order_tracking", "keyword": "pedido", "languages": ["pt"], "language": "es"}
    ]


def test_the_other_keywords_of_an_intent_still_count_when_one_is_left_out():
    hits = make_router().match("la entrega del pedido P300 viene con retraso")

    assert [(hit.intent.name, hit.keywords) for hit in hits] == [("retail_order_tracking", ("entrega",))]


def test_a_limited_keyword_with_exclusions_is_left_out_before_its_exclusions_are_read():
    orders = IntentSpec(
        name="retail_order_tracking",
        agent="orders_agent",
        keywords=("pedido", "entrega"),
        keyword_exclusions=(("pedido", ("pedido de casamento",)),),
        keyword_languages=(("pedido", ("pt",)),),
    )
    router = make_router(orders, SUPPORT)

    spanish = router.keyword_match("¿dónde está mi pedido? la entrega no llegó")
    assert [(hit.intent.name, hit.keywords) for hit in spanish.hits] == [("retail_order_tracking", ("entrega",))]
    assert [item.keyword for item in spanish.off_language] == ["pedido"]
    assert spanish.excluded == ()
    portuguese = router.keyword_match("o pedido de casamento foi lindo")
    assert portuguese.hits == [] and [item.exclusion for item in portuguese.excluded] == ["pedido de casamento"]


def test_the_language_is_read_once_per_message_and_only_when_a_limited_keyword_occurs(readings):
    router = make_router()

    router.match("a troca do aparelho com defeito")
    assert readings == []
    router.route_sync("quiero anular el pedido P300")
    assert readings == ["quiero anular el pedido P300"]


def test_a_router_without_limited_keywords_never_reads_the_language(readings):
    router = make_router(SUPPORT, IntentSpec(name="orders", agent="orders_agent", keywords=("pedido",)))

    router.route_sync("quiero anular el pedido P300")
    assert readings == []


def test_a_limit_on_a_keyword_the_intent_does_not_list_is_ignored():
    orders = IntentSpec(
        name="orders", agent="orders_agent", keywords=("entrega",), keyword_languages=(("pedido", ("pt",)),)
    )

    assert make_router(orders).keyword_match("el pedido y la entrega").off_language == ()


def test_the_compiled_matcher_agrees_with_the_loop_on_limited_keywords():
    rng = random.Random(5)
    sentences = {
        "pt": "meu pedido não chegou ainda quero cancelar a compra da geladeira com defeito",
        "es": "mi pedido no llegó todavía quiero anular la compra del refrigerador defectuoso",
        "en": "my order has not arrived yet I want to cancel the purchase of the faulty fridge",
    }
    vocabulary = {language: sentence.split() for language, sentence in sentences.items()}
    words = sorted({word for language in vocabulary.values() for word in language})
    intents = []
    for n in range(12):
        keywords = tuple(rng.sample(words, 4))
        limits = tuple((keyword, tuple(rng.sample(sorted(vocabulary), rng.randint(1, 2)))) for keyword in keywords[:2])
        exclusions = ((keywords[1], (f"{keywords[1]} {rng.choice(words)}",)),) if n % 3 == 0 else ()
        intents.append(
            IntentSpec(
                name=f"intent_{n:02d}",
                agent=f"agent_{n % 4}",
                priority=rng.randint(1, 5),
                keywords=keywords,
                keyword_exclusions=exclusions,
                keyword_languages=limits,
            )
        )
    router, loop = make_router(*intents), KeywordLoopMatcher(tuple(intents))
    off = 0
    for _ in range(300):
        language = rng.choice(sorted(vocabulary))
        text = " ".join(rng.choice(vocabulary[language]) for _ in range(rng.randint(1, 12)))
        compiled = router.keyword_match(text)
        assert compiled == loop.keyword_match(text), text
        off += bool(compiled.off_language)
    assert off > 50  # the random messages did leave limited keywords out
