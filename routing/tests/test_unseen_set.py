"""The unseen evaluation set (bench/unseen/): held-out messages written from the demo intents' descriptions alone.

Only its shape is checked here: the languages and kinds it promises, enough messages per language, intent and
kind, labels that name an intent the profile has, and no message twice (across both files, as the router folds
them). The intents are written out below rather than read from the demo configuration, so that the set stays
labelled against the descriptions it was written from.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

from common.text import normalize

UNSEEN_DIR = Path(settings.BASE_DIR) / "bench" / "unseen"
LANGUAGES = {"pt", "en", "es"}
KINDS = {
    "greeting", "thanks", "goodbye", "bot_question", "human_request", "chitchat", "general_knowledge",
    "other_business",
}  # fmt: skip
INTENTS = {
    "telecom_contas": {
        "billing_payment_request", "billing_invoice_explanation", "retail_order_tracking", "technical_support",
        "product_information", "support_request",
    },
    "retail_orders": {
        "billing_invoice_explanation", "retail_order_cancellation", "retail_order_tracking", "product_information",
        "support_request",
    },
    "telecom_assistente": {"billing_invoice_explanation", "retail_order_tracking", "support_request"},
}  # fmt: skip
MIN_OUT_OF_SCOPE_PER_LANGUAGE = 100
MIN_PER_KIND_AND_LANGUAGE = 12
MIN_PER_INTENT = 18
MIN_PER_INTENT_AND_LANGUAGE = 5


def out_of_scope() -> list[dict[str, Any]]:
    return yaml.safe_load((UNSEEN_DIR / "out_of_scope.yaml").read_text(encoding="utf-8"))["messages"]


def in_scope() -> dict[str, list[dict[str, Any]]]:
    return yaml.safe_load((UNSEEN_DIR / "in_scope.yaml").read_text(encoding="utf-8"))["profiles"]


def test_every_out_of_scope_message_has_a_text_a_known_language_and_a_known_kind():
    for message in out_of_scope():
        assert set(message) == {"text", "lang", "kind"}, message
        assert isinstance(message["text"], str) and message["text"].strip(), message
        assert message["lang"] in LANGUAGES, message
        assert message["kind"] in KINDS, message


def test_the_out_of_scope_set_has_100_messages_per_language_and_every_kind_in_every_language():
    messages = out_of_scope()
    per_language = Counter(message["lang"] for message in messages)
    assert all(per_language[language] >= MIN_OUT_OF_SCOPE_PER_LANGUAGE for language in LANGUAGES), per_language
    per_kind = Counter((message["kind"], message["lang"]) for message in messages)
    short = {pair: per_kind[pair] for pair in _pairs(KINDS) if per_kind[pair] < MIN_PER_KIND_AND_LANGUAGE}
    assert short == {}


def test_the_in_scope_set_covers_exactly_the_three_demo_profiles():
    assert set(in_scope()) == set(INTENTS)


@pytest.mark.parametrize("profile", sorted(INTENTS))
def test_every_in_scope_message_has_a_text_a_known_language_and_an_intent_of_its_profile(profile):
    for message in in_scope()[profile]:
        assert set(message) == {"text", "lang", "intent"}, message
        assert isinstance(message["text"], str) and message["text"].strip(), message
        assert message["lang"] in LANGUAGES, message
        assert message["intent"] in INTENTS[profile], message


@pytest.mark.parametrize("profile", sorted(INTENTS))
def test_every_intent_of_a_profile_has_its_messages_spread_over_the_three_languages(profile):
    messages = in_scope()[profile]
    per_intent = Counter(message["intent"] for message in messages)
    assert {intent: per_intent[intent] for intent in INTENTS[profile] if per_intent[intent] < MIN_PER_INTENT} == {}
    per_pair = Counter((message["intent"], message["lang"]) for message in messages)
    short = {pair: per_pair[pair] for pair in _pairs(INTENTS[profile]) if per_pair[pair] < MIN_PER_INTENT_AND_LANGUAGE}
    assert short == {}


def test_no_text_appears_twice_in_the_set():
    texts = [message["text"] for message in out_of_scope()]
    texts += [message["text"] for messages in in_scope().values() for message in messages]
    counts = Counter(normalize(text) or text for text in texts)  # an emoji alone normalises to nothing: as is
    assert [text for text, count in counts.items() if count > 1] == []


def _pairs(labels: set[str]) -> list[tuple[str, str]]:
    return [(label, language) for label in sorted(labels) for language in sorted(LANGUAGES)]
