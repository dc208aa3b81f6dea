"""How a question reads the synonyms of the sources searched (:mod:`knowledge.synonyms`): pure text, no ORM.

A question **holds a term** when it holds each of the term's words (the relevance bar's comparison: case and accents
aside, alike on their first letters or a Snowball stem, :func:`agents.passages.holds`), the words of the kinds of
answer it asks for among its own (:func:`question_stems`). Its words that a held term
covers then count, in the relevance bar, as held by a passage holding any other term of the group
(:func:`words_held_with`), and the search looks for the group's other terms too (:func:`expanded`): "biquini tem
troca?" is read with "moda praia" and "maiô".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache

from agents.public import STEM_CHARS, content_words, holds, stems_of, word_keys
from common.text import normalize
from knowledge.answer_kinds import KIND_MARKS, kind_held, kind_words, kinds_asked, kinds_held
from knowledge.synonyms import Group

READINGS_KEPT = 1024  # questions whose reading a process keeps (a turn reads its message up to three times)
TERMS_KEPT = 20_000  # terms whose words and stems a process keeps
# The passages whose words are kept read, the most recently found: with their text, about 7 MiB at most (a search
# reads those of the passages it re-ranks, knowledge.search.WORDS_RERANKED, and the relevance bar the same again);
# as many texts' and headings' words read apart (passage_words' parts: about 1 MiB more for 512 passages than the
# words of each passage kept whole alone, measured with tracemalloc).
PASSAGES_READ_KEPT = 512
GROUPS_INDEXED_KEPT = 64  # tuples of synonym groups (a profile's sources, a version's) whose index a process keeps


@lru_cache(maxsize=PASSAGES_READ_KEPT)
def passage_words(heading: str, text: str) -> frozenset[str]:
    """The words a passage holds (:func:`agents.passages.stems_of`, heading and text, as one text): read once, not at
    every question that finds it (reading them was most of the Python a search ran). Its text and its heading are
    read apart, each once: a search holds a passage's text under its heading path and under its own heading alone
    (:func:`knowledge.search.section_held`). With them, the kinds of answer it holds
    (:func:`knowledge.answer_kinds.kinds_held`)."""
    shouted = not any(char.islower() for char in heading) and not any(char.islower() for char in text)
    words = _part_words(heading, shouted) | _part_words(text, shouted)
    return words | kinds_held(heading, heading=True) | kinds_held(text, heading=False)


@lru_cache(maxsize=PASSAGES_READ_KEPT)
def _part_words(part: str, shouted: bool) -> frozenset[str]:
    return frozenset(stems_of(part, shouted=shouted))


@lru_cache(maxsize=TERMS_KEPT)
def _term_words(term: str) -> tuple[str, ...]:
    """The words of ``term`` the bar compares (:func:`agents.passages.content_words`); a term of short words only
    is read joined ("wi fi": ``wifi``), and none when that is short too."""
    words = content_words(term)
    joined = normalize(term).replace(" ", "")
    return tuple(words or ([joined] if len(joined) >= 4 else []))


@lru_cache(maxsize=TERMS_KEPT)
def _term_stems(term: str) -> frozenset[str]:
    return frozenset(stems_of(term))


def _holds(term: str, stems: AbstractSet[str]) -> bool:
    words = _term_words(term)
    return bool(words) and all(holds(word, stems) for word in words)


@dataclass(frozen=True)
class Reading:
    """What a question's synonyms add: for each word of the question a held term covers, the group's terms other than
    those covering it (each as its words: another term the question holds too counts, "reclamei" of "reclamação" held
    by a passage saying "ouvidoria" in "ja reclamei, tem ouvidoria?"), and the terms the question does not hold as text
    for the search."""

    alternatives: Mapping[str, tuple[tuple[str, ...], ...]]
    extra: tuple[str, ...]


NOTHING = Reading({}, ())


def question_read(asked: Sequence[str], question: str, groups: Iterable[Group]) -> Reading:
    """The synonyms ``groups`` add to ``question``, whose words the bar counts are ``asked``
    (:func:`agents.passages.asked_words`). Kept per question and groups (:data:`READINGS_KEPT`): the turn's search
    and its relevance bar read the same message."""
    groups = tuple(groups)
    if not groups or not asked:
        return NOTHING
    return _read(tuple(asked), question, groups)


@dataclass(frozen=True)
class _Index:
    """Where the terms of a tuple of groups start, for a question to read only the groups it may hold a term of: the
    groups' positions by each entry of a text's stems (:func:`agents.passages.stems_of`) that holds the first word of
    one of their terms (:func:`agents.passages.word_keys`), and by each first word shorter than
    :data:`agents.passages.STEM_CHARS` (which the start of an entry holds)."""

    by_key: Mapping[str, tuple[int, ...]]
    by_start: Mapping[str, tuple[int, ...]]

    def groups_read(self, stems: AbstractSet[str]) -> list[int]:
        """The positions of the groups a term's first word of which ``stems`` hold, in order: a term of any other
        group is not held."""
        found: set[int] = set()
        for entry in stems:
            found.update(self.by_key.get(entry, ()))
            for length in _SHORT:
                found.update(self.by_start.get(entry[:length], ()))
        return sorted(found)


_SHORT = range(4, STEM_CHARS)  # the lengths of a term's words that the start of a text's entry holds


@lru_cache(maxsize=GROUPS_INDEXED_KEPT)
def _indexed(groups: tuple[Group, ...]) -> _Index:
    by_key: dict[str, dict[int, None]] = {}
    by_start: dict[str, dict[int, None]] = {}
    for position, group in enumerate(groups):
        for term in group:
            words = _term_words(term)
            if not words:
                continue
            for key in word_keys(words[0]):
                by_key.setdefault(key, {})[position] = None
            if len(words[0]) < STEM_CHARS:
                by_start.setdefault(words[0], {})[position] = None
    return _Index(
        {key: tuple(found) for key, found in by_key.items()}, {key: tuple(found) for key, found in by_start.items()}
    )


def question_stems(question: str) -> set[str]:
    """What a question holds of a term (:func:`agents.passages.stems_of`): its words and those of the kinds of answer
    it asks for (:func:`knowledge.answer_kinds.kind_words`): "a bolsa abre que horas?" holds the term "horário da
    bolsa", "que horas" asking for a horário."""
    kinds = kind_words(kinds_asked(question).marks)
    return stems_of(" ".join([question, *kinds]) if kinds else question)


@lru_cache(maxsize=READINGS_KEPT)
def _read(asked: tuple[str, ...], question: str, groups: tuple[Group, ...]) -> Reading:
    stems = question_stems(question)
    alternatives: dict[str, list[tuple[str, ...]]] = {}
    extra: list[str] = []
    for position in _indexed(groups).groups_read(stems):
        group = groups[position]
        held = [term for term in group if _holds(term, stems)]
        if not held:
            continue
        for word in asked:
            covering = [term for term in held if holds(word, _term_stems(term))]
            if covering:  # the group's other terms than those covering it, held by the question too or not
                alternatives.setdefault(word, []).extend(_term_words(term) for term in group if term not in covering)
        extra.extend(term for term in group if term not in held)
    return Reading(
        {word: tuple(dict.fromkeys(terms)) for word, terms in alternatives.items()}, tuple(dict.fromkeys(extra))
    )


def expanded(question: str, reading: Reading) -> str:
    """``question`` with the terms its synonyms add, for the search to look for."""
    return " ".join([question, *reading.extra]) if reading.extra else question


def words_held_with(asked: Sequence[str], stems: AbstractSet[str], reading: Reading) -> list[str]:
    """The words of ``asked`` a text of ``stems`` holds (:func:`agents.passages.holds`), in order, a word counting
    as held when the text holds another term of a group one of the question's terms covering it is in."""
    alternatives = reading.alternatives
    return [
        word
        for word in asked
        if (kind_held(word, asked, stems) if word in KIND_MARKS else holds(word, stems))
        or any(all(holds(other, stems) for other in words) for words in alternatives.get(word, ()))
    ]
