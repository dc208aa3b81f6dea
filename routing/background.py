"""The examples tier's background: messages that belong to no intent, which the intents compete with.

A message unlike every intent's examples still has a likeliest intent; the background gives the examples tier a
"none of these" to prefer (:class:`routing.examples.ExampleIndex`): a class per kind of the corpus shipped with the
product (``routing/data/none_of_these.yaml``: greetings, thanks, goodbyes, questions about the assistant, asking for
a person, chitchat and off-topic messages, in Portuguese, English and Spanish, generic across businesses), and one of
the profile's own out-of-scope examples (what its customers ask that another business handles). Pure data, no ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parent / "data" / "none_of_these.yaml"
PREFIX = "none:"  # a background class's label: PREFIX + its kind (no intent name has a colon)
OUT_OF_SCOPE = "out_of_scope"  # the kind of the profile's own out-of-scope examples
# What each kind is called where an editor reads it (the route preview, calibration).
LABELS = {
    "greeting": "small talk: a greeting",
    "thanks": "small talk: thanks",
    "goodbye": "small talk: a goodbye",
    "bot_question": "small talk: a question about the assistant",
    "human_request": "small talk: asking for a person",
    "chitchat": "chitchat",
    "off_topic": "off-topic",
    OUT_OF_SCOPE: "like the profile's out-of-scope examples",
}

Background = tuple[tuple[str, tuple[str, ...]], ...]  # (class label, its texts), in order


def none_label(label: str) -> str:
    """How a background class is named for an editor: ``none:greeting`` → "small talk: a greeting"."""
    kind = label.removeprefix(PREFIX)
    return LABELS.get(kind, kind.replace("_", " "))


@lru_cache(maxsize=1)
def corpus() -> Background:
    """The shipped corpus, a class per kind (all three languages together), read once per process."""
    data = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    return tuple(
        (PREFIX + kind, tuple(text for texts in by_language.values() for text in texts))
        for kind, by_language in data["kinds"].items()
    )


def background_of(out_of_scope: Sequence[str]) -> Background:
    """A profile's background: the shipped corpus and, when it has any, its own out-of-scope examples."""
    own = tuple(text for text in out_of_scope if text.strip())
    return corpus() + (((PREFIX + OUT_OF_SCOPE, own),) if own else ())
