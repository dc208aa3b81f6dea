"""The demo's examples in three languages and the paraphrase sets that measure the examples tier (bench/paraphrases/).

A paraphrase is worth measuring only if nothing but generalisation can route it: no keyword of its profile
(as the compiled router matches them), not one of the profile's examples, not a near copy of one. The examples
must cover Portuguese, English and Spanish for every intent; which language a text is in is told here by a short
list of common words found in only one of the three (a text with none of them, or a tie, counts for no language),
so the count per language is a lower bound and a paraphrase's ``lang`` label is checked only where it can be told.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

from common.text import normalize
from releases.calibration import NEAR_COPY, words  # word overlap (Jaccard) at which a text is a near copy
from releases.management.commands.seed_demo import DEMO_DIR
from routing.router import FALLBACK_INTENT, CompiledRouter, IntentSpec

PARAPHRASES_DIR = Path(settings.BASE_DIR) / "bench" / "paraphrases"
PROFILES = ["telecom_contas", "retail_orders", "telecom_assistente"]
LANGUAGES = ("pt", "en", "es")
# Intents that only a state policy reaches: a bare "sim" means something only in that state, so no paraphrase.
STATE_ONLY = {
    "telecom_contas": {"billing_payment_confirmation"},
    "retail_orders": {"retail_cancellation_confirmation"},
    "telecom_assistente": set(),
}
MIN_EXAMPLES_PER_LANGUAGE = 8
MIN_ROUTED = 150
MIN_PER_LANGUAGE = 50
MIN_PER_INTENT = 12
MIN_FALLBACK, MAX_FALLBACK = 15, 30

TELLING_WORDS = {
    "pt": "não nao sim você voce vocês voces meu minha meus minhas seu sua isso esse essa um uma do da das ao "
    "pelo pela com em já ja ainda quero preciso posso consigo tenho estou tô tá dá vou qual quando onde cadê "
    "é são veio chegou paguei pra também deixa pode mudei melhor o os as na agora hoje mesmo muito estão tem vem "
    "quantos então acabei faço gostaria",
    "es": "el los las un una del al y en con mi mis tu sí ya quiero necesito puedo tengo qué cómo cuándo dónde "
    "cuál cuánto todavía hace llegó pagué lo le ¿ están vino déjalo listo dale adelante la ahora hoy muy mismo cambié "
    "mejor recién quedé",
    "en": "the my i is are you your it to of for with what when where how why can could do does did have has "
    "still yet want need this that and on in at not yes was won't don't i'm it's i'd please pls nope yep sure "
    "confirmed keep what's there's i've i'll didn't hasn't",
}
_SHARED = {
    word for word, count in Counter(w for words in TELLING_WORDS.values() for w in words.split()).items() if count > 1
}
TELLING = {language: set(words.split()) - _SHARED for language, words in TELLING_WORDS.items()}
_TOKEN = re.compile(r"¿|[^\W\d_]+(?:'[^\W\d_]+)?")


def language_of(text: str) -> str | None:
    """The language whose telling words ``text`` has most of, or ``None`` when it has none or a tie."""
    tokens = _TOKEN.findall(text.casefold())
    scores = {language: sum(token in words for token in tokens) for language, words in TELLING.items()}
    (best, top), (_, second) = sorted(scores.items(), key=lambda item: item[1], reverse=True)[:2]
    return best if top > second else None


def demo_intents(profile: str) -> list[dict[str, Any]]:
    path = DEMO_DIR / f"routing.{profile}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))["intents"]


def demo_router(profile: str) -> CompiledRouter:
    return CompiledRouter(
        intents=tuple(
            IntentSpec(
                name=intent["name"],
                agent=intent["agent"],
                priority=intent["priority"],
                keywords=tuple(intent["keywords"]),
                examples=tuple(intent["examples"]),
            )
            for intent in demo_intents(profile)
            if intent.get("enabled", True)
        )
    )


def paraphrase_set(profile: str) -> dict[str, Any]:
    return yaml.safe_load((PARAPHRASES_DIR / f"{profile}.yaml").read_text(encoding="utf-8"))


def messages(profile: str) -> list[dict[str, str]]:
    return paraphrase_set(profile)["messages"]


@pytest.mark.parametrize("profile", PROFILES)
def test_every_demo_intent_has_at_least_8_examples_in_each_language(profile):
    for intent in demo_intents(profile):
        found = Counter(language_of(example) for example in intent["examples"])
        assert len(intent["examples"]) >= MIN_EXAMPLES_PER_LANGUAGE * len(LANGUAGES), intent["name"]
        for language in LANGUAGES:
            assert found[language] >= MIN_EXAMPLES_PER_LANGUAGE, (intent["name"], language, found)


@pytest.mark.parametrize("profile", PROFILES)
def test_no_demo_intent_repeats_an_example(profile):
    for intent in demo_intents(profile):
        normalized = [normalize(example) for example in intent["examples"]]
        assert len(set(normalized)) == len(normalized), intent["name"]


@pytest.mark.parametrize("profile", PROFILES)
def test_the_paraphrase_set_names_its_profile_and_labels_only_its_intents_or_fallback(profile):
    document = paraphrase_set(profile)
    intents = {intent["name"] for intent in demo_intents(profile)}
    assert document["profile"] == profile
    for message in document["messages"]:
        assert set(message) == {"text", "intent", "lang"}, message
        assert message["intent"] in intents | {FALLBACK_INTENT}, message
        assert message["lang"] in LANGUAGES, message


@pytest.mark.parametrize("profile", PROFILES)
def test_no_paraphrase_contains_a_keyword_of_any_intent_of_its_profile(profile):
    router = demo_router(profile)
    hit = {m["text"]: [h.describe() for h in router.match(m["text"])] for m in messages(profile)}
    assert {text: hits for text, hits in hit.items() if hits} == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_no_paraphrase_is_an_example_of_its_profile_or_a_near_copy_of_one(profile):
    examples = [example for intent in demo_intents(profile) for example in intent["examples"]]
    normalized = {normalize(example) for example in examples}
    for message in messages(profile):
        assert normalize(message["text"]) not in normalized, message["text"]
        mine = words(message["text"])
        for example in examples:
            theirs = words(example)
            overlap = len(mine & theirs) / len(mine | theirs)
            assert overlap < NEAR_COPY, (message["text"], example, round(overlap, 2))


@pytest.mark.parametrize("profile", PROFILES)
def test_no_paraphrase_appears_twice(profile):
    counts = Counter(normalize(message["text"]) for message in messages(profile))
    assert [text for text, count in counts.items() if count > 1] == []


@pytest.mark.parametrize("profile", PROFILES)
def test_every_paraphrase_is_in_the_language_it_is_labelled_with_when_that_can_be_told(profile):
    wrong = [(m["text"], m["lang"], language_of(m["text"])) for m in messages(profile)]
    assert [item for item in wrong if item[2] not in (None, item[1])] == []


@pytest.mark.parametrize("profile", PROFILES)
def test_the_set_has_150_routed_messages_50_per_language_and_12_per_intent_spread_over_the_languages(profile):
    routed = [message for message in messages(profile) if message["intent"] != FALLBACK_INTENT]
    by_language = Counter(message["lang"] for message in routed)
    by_intent = Counter(message["intent"] for message in routed)
    by_both = Counter((message["intent"], message["lang"]) for message in routed)
    reachable = {intent["name"] for intent in demo_intents(profile)} - STATE_ONLY[profile]
    assert len(routed) >= MIN_ROUTED
    assert all(by_language[language] >= MIN_PER_LANGUAGE for language in LANGUAGES), by_language
    assert set(by_intent) == reachable
    for intent in reachable:
        assert by_intent[intent] >= MIN_PER_INTENT, (intent, by_intent[intent])
        assert all(by_both[intent, language] >= MIN_PER_INTENT // len(LANGUAGES) for language in LANGUAGES), intent


@pytest.mark.parametrize("profile", PROFILES)
def test_the_set_has_about_20_out_of_scope_messages_in_every_language(profile):
    fallback = [message for message in messages(profile) if message["intent"] == FALLBACK_INTENT]
    assert MIN_FALLBACK <= len(fallback) <= MAX_FALLBACK
    assert {message["lang"] for message in fallback} == set(LANGUAGES)


def test_the_intents_left_out_are_reached_only_by_a_state_policy():
    for profile in PROFILES:
        document = yaml.safe_load((DEMO_DIR / f"routing.{profile}.yaml").read_text(encoding="utf-8"))
        by_policy = {policy["intent"] for policy in (document.get("state_policies") or {}).values()}
        keywordless = {intent["name"] for intent in document["intents"] if not intent["keywords"]}
        assert by_policy & keywordless == STATE_ONLY[profile]


def test_language_of_tells_the_three_languages_apart_and_abstains_on_a_bare_word():
    assert language_of("Minha fatura veio alta") == "pt"
    assert language_of("¿Dónde está mi pedido?") == "es"
    assert language_of("Where is my order?") == "en"
    assert language_of("P100") is None


# -- the shared out-of-scope set (bench/out_of_scope.yaml): routed by every demo profile, none should take it ------

OUT_OF_SCOPE_KINDS = {
    "greeting", "thanks", "goodbye", "bot_question", "human_request", "chitchat", "general_knowledge", "other_business",
}  # fmt: skip
MIN_OUT_OF_SCOPE, MIN_OUT_OF_SCOPE_PER_LANGUAGE = 300, 100


def out_of_scope() -> list[dict[str, str]]:
    path = Path(settings.BASE_DIR) / "bench" / "out_of_scope.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))["messages"]


def test_the_out_of_scope_set_has_300_messages_100_per_language_and_every_kind_in_every_language():
    found = out_of_scope()
    assert all(set(message) == {"text", "lang", "kind"} for message in found)
    assert len(found) >= MIN_OUT_OF_SCOPE
    by_language = Counter(message["lang"] for message in found)
    assert set(by_language) == set(LANGUAGES)
    assert all(count >= MIN_OUT_OF_SCOPE_PER_LANGUAGE for count in by_language.values()), by_language
    assert {(message["kind"], message["lang"]) for message in found} == {
        (kind, language) for kind in OUT_OF_SCOPE_KINDS for language in LANGUAGES
    }


def test_no_out_of_scope_message_appears_twice_or_is_an_example_or_paraphrase_of_a_demo_profile():
    counts = Counter(normalize(message["text"]) or message["text"] for message in out_of_scope())  # emoji: as is
    assert [text for text, count in counts.items() if count > 1] == []
    known = {
        normalize(example) for profile in PROFILES for intent in demo_intents(profile) for example in intent["examples"]
    }
    known |= {normalize(message["text"]) for profile in PROFILES for message in messages(profile)}
    assert [text for text in counts if text in known] == []


def test_every_out_of_scope_message_is_in_the_language_it_is_labelled_with_when_that_can_be_told():
    wrong = [(m["text"], m["lang"], language_of(m["text"])) for m in out_of_scope()]
    assert [item for item in wrong if item[2] not in (None, item[1])] == []
