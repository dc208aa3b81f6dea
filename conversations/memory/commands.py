"""What a customer says to the platform's memory: "remember that …", "forget …", "what do you know about me?", in
Portuguese, English and Spanish. Pure: text in, :class:`Command` out.

Every message is read here, so the read starts with a check that costs next to nothing — a few substring tests on
the message's head, lower-cased (:func:`command_read`) — and a message that holds none of the commands' stems goes no
further: no regular expression runs, no row is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agents.public import FACT_MAX_CHARS  # what one fact keeps of the customer's words

REMEMBER, FORGET, RECALL = "remember", "forget", "recall"
HEAD_CHARS = 160  # the commands are read at the message's start (a recall question may follow a greeting)

# The stems any command holds, lower-cased; a message without one of them in its head is no command.
STEMS = (
    "rememb",
    "lembr",
    "recuerd",
    "recuérd",
    "forget",
    "esque",
    "olvid",
    "olvíd",
    "know about me",
    "sabe sobre mim",
    "sabe de mim",
    "sabes de m",
    "sabes sobre m",
)

# Words that may come before a command ("please remember that …", "ei, esquece …"); any other lead makes it a
# sentence about remembering ("I don't remember that invoice"), not a command.
_LEADS = (
    "please|pls|ok|okay|hey|hi|and|also|can you|could you"
    "|por favor|porfa|ei|oi|olá|ola|e|também|tambem|você pode|voce pode|pode|podes"
    "|oye|hola|y|también|tambien|puedes|puede"
)
_LEAD = r"(?:(?:" + _LEADS + r")[\s,!.:]+)*"
_REMEMBER = re.compile(
    r"^\W*" + _LEAD + r"(?:remember|lembr(?:e|a)(?:-se| se)?|recuerd(?:a|e)|recuérd(?:a|e)(?:lo)?)"
    r"(?:\s+(?:that|de que|que|this|isto|isso|esto)\b|\s*:)\s*:?\s*(?P<fact>\S.*)$",
    re.IGNORECASE | re.DOTALL,
)
_FORGET = re.compile(
    r"^\W*"
    + _LEAD
    + r"(?:forget|esque(?:ç|c)a(?:-se| se)?|esquece(?:-se| se)?|olvid(?:a|e)(?:te)?|olvíd(?:a|e)(?:lo|te)?)"
    r"(?:\s+(?:about|that|de que|que|sobre|de|disso|eso de que|lo de que)\b)?\s*:?\s*(?P<what>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_RECALL = re.compile(
    r"\b(?:what do you (?:know|remember) about me"
    r"|o que (?:você|voce|vc|tu) (?:sabe|lembra) (?:sobre|de) mim"
    r"|qu(?:é|e) (?:sabes|recuerdas|sabe usted) (?:de|sobre) m(?:í|i))\b",
    re.IGNORECASE,
)
# "forget that" with nothing after it: the last fact told.
_THE_LAST = frozenset({"", "that", "it", "this", "isso", "isto", "aquilo", "eso", "esto", "lo", "disso"})


@dataclass(frozen=True)
class Command:
    """A memory command: ``kind`` (:data:`REMEMBER`, :data:`FORGET`, :data:`RECALL`) and its words — the fact to
    keep, or what to forget (``""``: the last fact told)."""

    kind: str
    words: str = ""

    @property
    def forgets_the_last(self) -> bool:
        return self.kind == FORGET and not self.words


def _clean(words: str) -> str:
    return words.strip().rstrip(".!?;, ").strip()[:FACT_MAX_CHARS]


def command_read(text: str) -> Command | None:
    """The memory command ``text`` is, or ``None``. Only a message that starts with one (after a greeting or a
    "please") is a remember or forget command; "what do you know about me?" may come anywhere in its head."""
    head = text[:HEAD_CHARS].lower()
    if not any(stem in head for stem in STEMS):
        return None
    if match := _REMEMBER.match(text):
        fact = _clean(match["fact"])
        return Command(REMEMBER, fact) if fact else None
    if match := _FORGET.match(text):
        what = _clean(match["what"])
        return Command(FORGET, "" if what.lower() in _THE_LAST else what)
    if _RECALL.search(head):
        return Command(RECALL)
    return None
