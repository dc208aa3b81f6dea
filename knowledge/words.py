"""The words of passages as a source's dictionary keeps them (:class:`knowledge.models.KnowledgeWord`): pure text.

A word is a run of letters (digits and underscores split words, as PostgreSQL's parser and FTS5's ``unicode61``
split them) of at most :data:`MAX_WORD_CHARS`, in lower case; its folded form drops accents too, and its stem is the
folded form's first :data:`agents.passages.STEM_CHARS` letters, the unit the relevance bar compares words by, beside
their Snowball stems (:func:`agents.stems.word_stems`), which SQLite's full-text table indexes (:func:`passage_stems`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from agents.public import STEM_CHARS, content_words, word_stems
from common.text import fold

MAX_WORD_CHARS = 64
_LETTERS = re.compile(r"[^\W\d_]+")
# A compound written with a hyphen ("Wi-Fi", "e-mail", "pré-pago"): a word of its own beside its parts, which the
# customer types joined as often ("wifi", "email", "prepago").
_COMPOUND = re.compile(r"(?<![\w-])[^\W\d_]+(?:-[^\W\d_]+)+(?![\w-])")


def word_forms(word: str) -> tuple[str, str, str]:
    """(``word`` in lower case, folded, stem): a compound's folded form joined (``wi-fi``: ``wifi``)."""
    lower = word.casefold()
    folded = fold(lower).replace("-", "")
    return lower, folded, folded[:STEM_CHARS]


def passage_words(text: str) -> set[str]:
    """The distinct words of ``text``, in lower case, none longer than :data:`MAX_WORD_CHARS`: its runs of letters,
    and its compounds written with a hyphen whole (``wi-fi`` beside ``wi`` and ``fi``), which the dictionary holds
    folded as one word (:func:`word_forms`: ``wifi``) and PostgreSQL's parser reads whole too."""
    lower = text.casefold()
    compounds = _COMPOUND.findall(lower) if "-" in lower else []
    return {word for word in (*_LETTERS.findall(lower), *compounds) if len(word) <= MAX_WORD_CHARS}


def passage_stems(heading: str, text: str) -> str:
    """The Snowball stems of the words of four letters or more of a passage (``heading`` and ``text``), folded (a
    compound joined: ``wifi`` of ``Wi-Fi``), each once, space-separated: what SQLite's full-text table indexes beside
    them, and a search of a word matches by its own stems and its first letters (the words the relevance bar counts
    are as long)."""
    words = {word_forms(word)[1] for word in passage_words(f"{heading}\n{text}")}
    return " ".join(sorted({stem for word in words if len(word) >= 4 for stem in word_stems(word)}))


def words_counted(passages: Iterable[tuple[str, str]]) -> Counter[str]:
    """How many of ``passages`` (heading, text) hold each word."""
    counts: Counter[str] = Counter()
    for heading, text in passages:
        counts.update(passage_words(f"{heading}\n{text}"))
    return counts


def question_words(question: str) -> dict[str, str]:
    """The words of ``question`` that tell what it is about (:func:`agents.public.content_words`: folded, common
    and short words left out), by their stems, in order, each as the question first wrote it: the unit the analytics
    group unanswered questions by."""
    words: dict[str, str] = {}
    for word in content_words(question):
        words.setdefault(word[:STEM_CHARS], word)
    return words
