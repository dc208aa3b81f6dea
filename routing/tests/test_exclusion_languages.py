"""Keyword exclusions limited to languages: an exclusion cancels its keyword only in a message of its languages (or
one whose language cannot be told); the compiled router and the reference loop agree; the decision says which
exclusions cancelled nothing; the language is read only when a limited exclusion occurs. The admin, the document, the
diff and YAML: ``test_exclusion_languages_admin.py``."""

from __future__ import annotations

import random

import pytest

from common import language as language_module
from routing.keywords import ExclusionOffLanguage, KeywordLoopMatcher
from routing.router import CompiledRouter, IntentSpec

# "internet do banco" is online banking in Portuguese: "banco" cancels "internet" there; a Spanish customer whose
# connection fails while at the bank ("estoy en el banco") still has a connectivity problem.
TECHNICAL = IntentSpec(
    name="technical_support",
    agent="support_agent",
    priority=20,
    keywords=("internet", "wifi"),
    keyword_exclusions=(("internet", ("banco", "internet das coisas")), ("wifi", ("banco",))),
    exclusion_languages=(("internet", "banco", ("pt",)), ("wifi", "banco", ("pt",))),
)
BILLING = IntentSpec(name="billing", agent="billing_agent", priority=30, keywords=("fatura", "factura"))


def make_router(*intents: IntentSpec) -> CompiledRouter:
    return CompiledRouter(intents=intents or (TECHNICAL, BILLING), fallback_agent="support_agent")


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


def test_an_exclusion_limited_to_portuguese_cancels_its_keyword_in_a_portuguese_message():
    found = make_router().keyword_match("a internet do banco não abre no meu celular")

    assert found.hits == []
    assert [(item.keyword, item.exclusion) for item in found.excluded] == [("internet", "banco")]
    assert found.exclusions_off_language == ()


def test_an_exclusion_limited_to_portuguese_cancels_nothing_in_a_spanish_message():
    found = make_router().keyword_match("no tengo internet en el celular y estoy en el banco esperando")

    assert [(hit.intent.name, hit.keywords) for hit in found.hits] == [("technical_support", ("internet",))]
    assert found.excluded == ()
    assert found.exclusions_off_language == (
        ExclusionOffLanguage("technical_support", "internet", "banco", ("pt",), "es"),
    )


def test_an_exclusion_limited_to_a_language_cancels_in_a_message_whose_language_cannot_be_told():
    assert make_router().match("wifi banco") == []


def test_an_exclusion_without_languages_cancels_in_every_language():
    found = make_router().keyword_match("my internet das coisas sensor is offline again today")

    assert found.hits == [] and [item.exclusion for item in found.excluded] == ["internet das coisas"]


def test_the_decision_says_which_exclusion_cancelled_nothing_in_the_message_s_language():
    decision = make_router().route_sync("no tengo internet en el celular y estoy en el banco esperando")

    assert decision.intent == "technical_support"
    assert decision.metadata["exclusions_off_language"] == [
        {
            "intent": "technical_support",
            "keyword": "internet",
            "exclusion": "banco",
            "languages": ["pt"],
            "language": "es",
        }
    ]


def test_the_language_is_read_only_when_a_limited_exclusion_occurs_with_its_keyword(readings):
    router = make_router()

    router.match("a internet caiu de novo")
    router.match("a fatura veio do banco")
    assert readings == []
    router.match("a internet do banco não abre")
    assert readings == ["a internet do banco não abre"]


def test_a_limit_on_a_phrase_the_keyword_does_not_exclude_is_ignored():
    technical = IntentSpec(
        name="technical_support",
        agent="support_agent",
        keywords=("internet",),
        keyword_exclusions=(("internet", ("banco",)),),
        exclusion_languages=(("internet", "wifi", ("pt",)),),
    )

    found = make_router(technical).keyword_match("no tengo internet y estoy en el banco")
    assert found.hits == [] and found.exclusions_off_language == ()


def test_the_compiled_matcher_agrees_with_the_loop_on_limited_exclusions():
    rng = random.Random(11)
    sentences = {
        "pt": "a internet do banco caiu e o sinal do celular sumiu quero a fatura da conta",
        "es": "la internet del banco se cayó y la señal del celular desapareció quiero la factura de la cuenta",
        "en": "the bank internet went down and the phone signal is gone I want the bill of the account",
    }
    vocabulary = {language: sentence.split() for language, sentence in sentences.items()}
    words = sorted({word for language in vocabulary.values() for word in language})
    intents = []
    for n in range(12):
        keywords = tuple(rng.sample(words, 4))
        phrases = tuple(
            phrase for phrase in dict.fromkeys(rng.choice(words) for _ in range(3)) if phrase != keywords[0]
        )
        limits = tuple(
            (keywords[0], phrase, tuple(rng.sample(sorted(vocabulary), rng.randint(1, 2)))) for phrase in phrases[:2]
        )
        intents.append(
            IntentSpec(
                name=f"intent_{n:02d}",
                agent=f"agent_{n % 4}",
                priority=rng.randint(1, 5),
                keywords=keywords,
                keyword_exclusions=((keywords[0], phrases),),
                exclusion_languages=limits,
            )
        )
    router, loop = make_router(*intents), KeywordLoopMatcher(tuple(intents))
    idle = 0
    for _ in range(300):
        language = rng.choice(sorted(vocabulary))
        text = " ".join(rng.choice(vocabulary[language]) for _ in range(rng.randint(1, 14)))
        compiled = router.keyword_match(text)
        assert compiled == loop.keyword_match(text), text
        idle += bool(compiled.exclusions_off_language)
    assert idle > 30  # the random messages did leave limited exclusions idle
