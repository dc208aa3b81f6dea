"""The shipped "none of these" corpus (routing/data/none_of_these.yaml): small talk and off-topic messages in the
three languages, generic across businesses, and apart from what measures it (the benchmark's held-out sets)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml
from django.conf import settings

from common.text import normalize
from routing.tests.test_paraphrase_set import LANGUAGES, PROFILES, demo_intents, language_of, messages, out_of_scope

CORPUS = Path(settings.BASE_DIR) / "routing" / "data" / "none_of_these.yaml"
KINDS = {"greeting": 25, "thanks": 25, "goodbye": 20, "bot_question": 14, "human_request": 15, "chitchat": 40,
         "off_topic": 60}  # fmt: skip


def corpus() -> dict[str, dict[str, list[str]]]:
    return yaml.safe_load(CORPUS.read_text(encoding="utf-8"))["kinds"]


def texts() -> list[str]:
    return [text for languages in corpus().values() for found in languages.values() for text in found]


def test_every_kind_has_its_minimum_in_every_language():
    found = corpus()
    assert set(found) == set(KINDS)
    for kind, minimum in KINDS.items():
        assert set(found[kind]) == set(LANGUAGES), kind
        assert all(len(found[kind][language]) >= minimum for language in LANGUAGES), (kind, minimum)


def test_no_text_appears_twice():
    counts = Counter(normalize(text) or text for text in texts())  # an emoji alone normalises to nothing: as is
    assert [text for text, count in counts.items() if count > 1] == []


def test_nothing_in_it_is_in_the_sets_that_measure_it_or_an_example_of_a_demo_profile():
    mine = {normalize(text) for text in texts()} - {""}
    held_out = {normalize(message["text"]) for message in out_of_scope()}
    held_out |= {normalize(message["text"]) for profile in PROFILES for message in messages(profile)}
    examples = {normalize(example) for profile in PROFILES for i in demo_intents(profile) for example in i["examples"]}
    assert sorted(mine & held_out) == []
    assert sorted(mine & examples) == []


def test_every_text_is_in_its_language_when_that_can_be_told():
    wrong = [
        (text, language, language_of(text))
        for languages in corpus().values()
        for language, found in languages.items()
        for text in found
    ]
    assert [item for item in wrong if item[2] not in (None, item[1])] == []
