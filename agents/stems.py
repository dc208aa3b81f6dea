"""The Snowball stems of a word in the platform's languages: what the relevance bar and the knowledge search on SQLite
compare words by, beside their first letters.

PostgreSQL's ``portuguese``, ``english`` and ``spanish`` text search configurations stem with the Snowball algorithms;
:func:`word_stems` runs the same three (the ``snowballstemmer`` package, pure Python) on a folded word (case and
accents aside, as customers type and as the bar compares), so that *billing* is *bill* and *troco* is *troca* on every
engine. A word is stemmed in the three languages whatever the question's: the bar reads a question against passages
of any language, as it reads the common words of all three. A stem costs tens of microseconds: each word's are kept
(:data:`STEMS_KEPT`), and the stemmers, which hold their word while they run, take turns.
"""

from __future__ import annotations

import threading
from functools import lru_cache

import snowballstemmer

STEMMED_LANGUAGES = ("portuguese", "english", "spanish")
STEMS_KEPT = 100_000  # words whose stems a process keeps (a word and its stems: a few hundred bytes)
_STEMMERS = tuple(snowballstemmer.stemmer(language) for language in STEMMED_LANGUAGES)
_TURNS = threading.Lock()


@lru_cache(maxsize=STEMS_KEPT)
def word_stems(word: str) -> frozenset[str]:
    """The stems of ``word`` (folded) in Portuguese, English and Spanish, each once: ``billing`` → {``billing``,
    ``bill``}, ``troco`` → {``troc``, ``troco``}."""
    with _TURNS:
        return frozenset(stemmer.stemWord(word) for stemmer in _STEMMERS)
