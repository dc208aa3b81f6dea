"""A question's misspelt words read as the words the published knowledge writes: pure text, no ORM.

As Algolia's and Elasticsearch's typo tolerance: a word the knowledge does not hold (by its first letters or a
Snowball stem, as the relevance bar compares words) and general language uses little is read as the knowledge's word
one edit from it — a letter added, dropped, changed, or two neighbours swapped (optimal string alignment) —, never on
its first letter, when there is one such word: "roming" is "roaming". A word the knowledge holds is never changed,
however near another it is. Two edits from eight letters (Algolia's default) read real words as others on the demo's
questions ("password" as "passport", "brazilian" as "brasilia", "prendida" as "pedida"), and an unanswerable question
was cited for it: one edit only. The search (:func:`knowledge.search.query_spelled`) reads the candidates from the
sources' words and rewrites the question before it is searched and held to the bar, on either engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from common.text import fold

MIN_CHARS = 4  # shorter words are left as they are: too many words are one edit from them
_WORD = re.compile(r"\w+")


def edits_allowed(word: str) -> int:
    """The edits a word of the question may be from the knowledge's word it is read as: none under
    :data:`MIN_CHARS` letters, else one."""
    return 1 if len(word) >= MIN_CHARS else 0


def edits(first: str, second: str, most: int) -> int:
    """The edits from ``first`` to ``second`` (optimal string alignment: a letter added, dropped or changed, or two
    neighbours swapped, each one edit), or ``most + 1`` once they are past ``most``."""
    if abs(len(first) - len(second)) > most:
        return most + 1
    before: list[int] = []
    row = list(range(len(second) + 1))
    for i, letter in enumerate(first, 1):
        current = [i] + [0] * len(second)
        for j, other in enumerate(second, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (letter != other))
            if i > 1 and j > 1 and letter == second[j - 2] and first[i - 2] == other:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > most:
            return most + 1
        before, row = row, current
    return row[-1]


def spelling_of(word: str, candidates: Iterable[str]) -> str | None:
    """The knowledge's word ``word`` (folded) is read as: the one of ``candidates`` (folded words) starting with
    ``word``'s first letter at the fewest edits from it (:func:`edits`), at most :func:`edits_allowed`. ``None`` when
    there is none, or two or more as near: between equals, a reading would be a guess ("pena" is "peca" or "pela").
    """
    most = edits_allowed(word)
    fewest = most + 1
    found: list[str] = []
    for candidate in candidates:
        if not most or candidate[:1] != word[:1] or candidate == word:
            continue
        distance = edits(word, candidate, min(most, fewest))
        if distance < fewest:
            fewest, found = distance, [candidate]
        elif distance == fewest and distance <= most:
            found.append(candidate)
    return found[0] if len(found) == 1 else None


def respelt(text: str, spellings: Mapping[str, str]) -> str:
    """``text`` with each word whose folded form ``spellings`` names written as that spelling instead."""
    if not spellings:
        return text
    return _WORD.sub(lambda found: spellings.get(fold(found.group(0)), found.group(0)), text)
