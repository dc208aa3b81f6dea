"""Small talk: greetings, thanks, goodbyes, questions about the assistant and requests for a person, in Portuguese,
English and Spanish, recognised in every profile before any intent (docs/routing.md, "Small talk").

Pure data, no ORM, no settings. A message is small talk when it is made only of the phrases of
``routing/data/small_talk.yaml`` and of its filler words: "Bom dia, tudo certo então", "ok obrigado, tchau",
"¿eres un robot?". The phrases are matched on the normalised text (:func:`common.text.normalize`: case, accents and
punctuation folded), a word's letters repeated for emphasis read once ("oiii", "obrigadooo" = "oi", "obrigado"), the
longest phrase first. Anything else in the message — "bom dia, minha fatura veio alta" — and it is not small talk:
the router reads it by its words. Bare replies ("sim", "ok", "não") are never small talk.

The kinds, in the order that names a message holding several ("oi, quero falar com um atendente" asks for a person):
``human_request``, ``bot_question``, ``goodbye``, ``thanks``, ``greeting``. Of the ways to read a message, the one
with the fewest filler words is taken, so a phrase is read whole before the words inside it: asking who answers ("vc
é humano?", "is this a real person or a bot?") is a ``bot_question`` although it names a person, as "humano" alone
would ask for one. Asking to be passed to a person ("posso falar com um humano?") is a ``human_request``, and so is a
message that asks both ("are you a bot? I want a human").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import Any

import yaml

from common.text import normalize

LEXICON = Path(__file__).resolve().parent / "data" / "small_talk.yaml"
KINDS = ("human_request", "bot_question", "goodbye", "thanks", "greeting")  # a message's kind: the first it holds
SMALL_TALK_INTENT = "small_talk:{kind}"  # the intent a decision on small talk names


def small_talk_kind(intent: str) -> str:
    """The kind of small talk a decision's ``intent`` names (:data:`SMALL_TALK_INTENT`); ``""`` for any other."""
    prefix = SMALL_TALK_INTENT.partition("{")[0]
    return intent[len(prefix) :] if intent.startswith(prefix) else ""


MAX_WORDS = 24  # small talk is short: a longer message is read by its words
_REPEATS = re.compile(r"(\w)\1+")
# A run of one letter written as the letter: the match's group, not the template "\1", which Python expands anew on
# each call (a message's words read in 1.1 µs instead of 2.2, a word in 0.3 instead of 1.0).
_LETTER = itemgetter(1)
_ALTERNATIVES = re.compile(r"\(([^()]*)\)")
_CLASS = re.compile(r"\{(\w+)\}")


def _words(text: str) -> tuple[str, ...]:
    """The normalised text's words, each run of one letter read once: "oiii" and "oi", "obrigadoo" and "obrigado"
    agree."""
    return tuple(_REPEATS.sub(_LETTER, normalize(text)).split())


@dataclass(frozen=True)
class SmallTalk:
    """What a small-talk message is: its ``kind`` (:data:`KINDS`) and the phrases it was read by."""

    kind: str
    phrases: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "phrases": list(self.phrases)}


def _expanded(phrase: str, classes: Mapping[str, Iterable[str]]) -> str:
    """``phrase`` with each ``{name}`` written as the alternatives of the word class ``name``: "({who}|)" is
    "(robo|bot|)" when the class ``who`` is robo and bot. Raises ``KeyError`` for a class the lexicon does not
    define."""
    return _CLASS.sub(lambda found: "|".join(classes[found.group(1)]), phrase)


def _pattern(phrase: str) -> tuple[str, set[str]]:
    """A lexicon phrase as a regular expression over canonical words (each ``(a|b|)`` an alternation, an empty
    alternative making it optional), and the words it may use."""
    parts = _ALTERNATIVES.split(phrase)  # text, alternatives, text, alternatives, ..., text
    pieces: list[str] = []
    vocabulary: set[str] = set()
    for index, part in enumerate(parts):
        options = [" ".join(_words(option)) for option in (part.split("|") if index % 2 else [part])]
        vocabulary.update(word for option in options for word in option.split())
        spelled = sorted({re.escape(option) + " " for option in options if option}, key=len, reverse=True)
        if not spelled:
            continue
        optional = "?" if "" in options and index % 2 else ""
        pieces.append(f"(?:{'|'.join(spelled)}){optional}")
    return "".join(pieces), vocabulary


def _anchors(phrase: str) -> set[str] | None:
    """Words of which a text holding ``phrase`` holds one: the words of its last part that is not optional (every
    word of a plain part is, and one option of alternatives is there when the phrase is); ``None`` when every part
    is optional."""
    parts = _ALTERNATIVES.split(phrase)  # text, alternatives, text, alternatives, ..., text
    for index in reversed(range(len(parts))):
        options = [_words(option) for option in (parts[index].split("|") if index % 2 else [parts[index]])]
        if index % 2 and not all(options):
            continue  # an empty alternative: the part may be left out
        if index % 2 == 0 and not options[0]:
            continue  # the spaces between two alternatives
        return {option[-1] for option in options}
    return None


class SmallTalkReader:
    """Reads whether a message is small talk (see the module docstring); built once from a lexicon.

    Each kind's phrases are two regular expressions over the message's canonical words, each followed by a space:
    its plain phrases, the longest first, and its phrases with alternatives (a regular expression's alternation takes
    the first alternative that matches, so a short spelling of one would hide a longer plain phrase: "human" and
    "human support"). A message is small talk when its words can be covered, left to right, by phrases and filler
    words. A message with a word that no phrase or filler uses — nearly every business request — is told apart at
    once."""

    def __init__(self, kinds: Mapping[str, Iterable[str]], filler: Iterable[str]) -> None:
        self.filler = frozenset(word for text in filler for word in _words(text))
        self.vocabulary: set[str] = set(self.filler)
        self.kinds: list[tuple[str, re.Pattern[str]]] = []  # a kind once or twice: its plain phrases, its others
        self.anywhere: dict[str, re.Pattern[str]] = {}  # a kind's phrases found inside any message
        # A kind's anchors (_anchors): a message holding none of them holds none of its phrases (None: no such words).
        self.anchors: dict[str, frozenset[str] | None] = {}
        for kind in KINDS:
            plain: list[str] = []
            spelled: list[str] = []
            anchors: set[str] | None = set()
            for phrase in kinds.get(kind, ()):
                pattern, vocabulary = _pattern(phrase)
                if pattern:
                    (spelled if _ALTERNATIVES.search(phrase) else plain).append(pattern)
                    self.vocabulary |= vocabulary
                    needed = _anchors(phrase)
                    anchors = None if anchors is None or needed is None else anchors | needed
            for alternatives in (plain, spelled):
                if alternatives:
                    alternatives.sort(key=len, reverse=True)
                    self.kinds.append((kind, re.compile("|".join(f"(?:{a})" for a in alternatives))))
            if plain or spelled:
                either = "|".join(f"(?:{a})" for a in plain + spelled)
                self.anywhere[kind] = re.compile(f"(?:^| )(?:{either})")
                self.anchors[kind] = None if anchors is None else frozenset(anchors)

    def found_in(self, text: str, kind: str) -> str | None:
        """The first phrase of ``kind`` that ``text`` holds among other words, or ``None``: "minha fatura veio alta e
        quero falar com um atendente" holds a request for a person. Words are read as :meth:`read` reads them, and
        as there a phrase inside a longer phrase of another kind is that phrase's: "is this a real person? my bill is
        wrong" names a person in a question and asks for none."""
        pattern = self.anywhere.get(kind)
        words = _words(text)
        if pattern is None or not words:
            return None
        anchors = self.anchors[kind]
        if anchors is not None and anchors.isdisjoint(words):
            return None  # most messages: none of the words a phrase of the kind needs, and no search of its phrases
        line = " ".join(words) + " "
        found = pattern.search(line)
        while found is not None:
            start = found.start() + (line[found.start()] == " ")
            if not self._inside_another(line, start, found.end(), kind):
                return found.group(0).strip()
            found = pattern.search(line, found.end() - 1)  # the next phrase starts after this one's closing space
        return None

    def _inside_another(self, line: str, start: int, end: int, kind: str) -> bool:
        """Whether a phrase of another kind than ``kind`` starts at or before ``start`` and reaches ``end``: looked
        for back from ``start`` over the words a phrase may use, at most :data:`MAX_WORDS` of them (no small-talk
        phrase is longer)."""
        begin = start
        for _ in range(MAX_WORDS):
            if line[begin : line.index(" ", begin)] not in self.vocabulary:
                return False  # no phrase holds this word, so none starts here or before and reaches ``end``
            for other, pattern in self.kinds:
                found = pattern.match(line, begin) if other != kind else None
                if found is not None and found.end() >= end:
                    return True
            if begin == 0:
                return False
            begin = line.rfind(" ", 0, begin - 1) + 1
        return False

    def read(self, text: str) -> SmallTalk | None:
        """The message's small talk, or ``None`` when anything in it is not a small-talk phrase or a filler word."""
        normalized = normalize(text)
        if not normalized or normalized.count(" ") >= MAX_WORDS:
            return None
        said = normalized.split()
        words = []
        for word in said:  # a business request has a word no phrase uses: told apart at that word
            # The vocabulary's words have no letter twice in a row: a word found as it is needs no reading.
            known = word if word in self.vocabulary else _REPEATS.sub(_LETTER, word)
            if known not in self.vocabulary:
                return None
            words.append(known)
        line = " ".join(words) + " "
        starts = [0]
        for word in words:
            starts.append(starts[-1] + len(word) + 1)
        at = {offset: position for position, offset in enumerate(starts)}
        # reach[p]: how the first p words were covered — (previous position, kind or "" for a filler word) — with
        # the fewest filler words.
        reach: dict[int, tuple[int, str, int]] = {0: (-1, "", 0)}
        for position in range(len(words)):
            if position not in reach:
                continue
            fillers = reach[position][2]
            steps = [(position + 1, "", fillers + 1)] if words[position] in self.filler else []
            for kind, pattern in self.kinds:
                found = pattern.match(line, starts[position])
                if found and found.end() > starts[position]:
                    steps.append((at[found.end()], kind, fillers))
            for end, kind, count in steps:
                if end not in reach or count < reach[end][2]:
                    reach[end] = (position, kind, count)
        if len(words) not in reach:
            return None
        found_kinds: list[str] = []
        phrases: list[str] = []
        position = len(words)
        while position > 0:
            previous, kind, _ = reach[position]
            if kind:
                found_kinds.append(kind)
                phrases.append(" ".join(said[previous:position]))
            position = previous
        if not found_kinds:
            return None
        kind = min(found_kinds, key=KINDS.index)
        return SmallTalk(kind=kind, phrases=tuple(reversed(phrases)))


@lru_cache(maxsize=1)
def small_talk_reader() -> SmallTalkReader:
    """The built-in reader, from ``routing/data/small_talk.yaml`` (read once per process)."""
    return SmallTalkReader(*lexicon())


def lexicon() -> tuple[dict[str, list[str]], list[str]]:
    """``routing/data/small_talk.yaml``: each kind's phrases in every language, the word classes written out, and the
    filler words."""
    data = yaml.safe_load(LEXICON.read_text(encoding="utf-8"))
    classes = data.get("classes", {})
    kinds = {
        kind: [
            _expanded(phrase, {name: words[language] for name, words in classes.items()})
            for language, phrases in by_language.items()
            for phrase in phrases
        ]
        for kind, by_language in data["kinds"].items()
    }
    filler = [word for words in data["filler"].values() for word in words]
    return kinds, filler


def person_asked_in(text: str) -> bool:
    """Whether ``text`` asks for a person anywhere in it (small talk's ``human_request`` phrases), business words
    around it or not. Small talk asks for one exactly when its kind is ``human_request``: "¿eres humano?" names a
    person and asks for none."""
    talk = small_talk_read(text)
    if talk is not None:
        return talk.kind == "human_request"
    return small_talk_reader().found_in(text, "human_request") is not None


@lru_cache(maxsize=1024)
def small_talk_read(text: str) -> SmallTalk | None:
    """Whether ``text`` is small talk, and of which kind (see the module docstring). Memoised: a turn asks it in
    more than one place (the decision, the specialist's moves)."""
    return small_talk_reader().read(text)
