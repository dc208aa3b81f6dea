"""How often a word is used in general Portuguese, English and Spanish: how little it tells of what a question is about.

A question's word that any text may hold ("going", "next", "long", "take", "hace", "quero") is weak evidence that a
passage answers it: the passage need not repeat it. The relevance bar (:mod:`agents.passages`) weighs each word it
counts by its frequency in general language, read from `wordfreq <https://pypi.org/project/wordfreq/>`_ (word
frequencies of many corpora: subtitles, Wikipedia, news, books, the web), on its Zipf scale — the base-10 logarithm
of the word's uses per billion words: 7 for "the" and "que", 6 for "going" and "dia", 5 for "internet" and "pedido",
3 for "roaming" and "fatura", 0 for a word it does not know (a name, a code, a misspelling). A word counts at the
highest of its three languages' frequencies (the bar does not know which language a word is in: "hace" is a common
Spanish word, whatever the conversation's language), folded as the bar folds words (case and accents aside: the
lists spell "não", the bar "nao").

The lists are read at the first word weighed, once per process, through wordfreq's public API
(``get_frequency_dict`` of its "small" lists, the words of Zipf :data:`COUNTED_FROM` or more kept, about 7,300
folded), in a child process (:func:`_frequencies`), and a word's weight is kept (:func:`word_weight`). Imported in
the process itself, wordfreq and its tokenisers (``ftfy``, ``langcodes``, ``regex``) and its cached lists stayed: about
20 MiB more in every web and Celery worker that answered from knowledge, which took the web worker past its memory
budget (docs/benchmarks.md, "Memory per process"). The child costs about 0.2 s of CPU once per process; its words
take about 1 MiB. A process whose profiles hold no knowledge starts none.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from functools import lru_cache

from common.text import fold

LANGUAGES = ("pt", "en", "es")
# The Zipf frequency from which a word weighs less than a whole one, and the one from which it weighs the least
# (:data:`LEAST_WEIGHT`): from 4.5 ("invoice", "portugal", "senha"), below a word a text about the subject repeats,
# to 6.5 ("going", "quero", "dia" and above), the words any text holds.
COUNTED_FROM = 4.5
LEAST_FROM = 6.5
LEAST_WEIGHT = 0.2
WEIGHTS_KEPT = 8192  # words whose weight a process keeps

logger = logging.getLogger(__name__)


# What the child process runs: wordfreq's public API, each word of Zipf ``COUNTED_FROM`` or more with its Zipf frequency
# (rounded as ``wordfreq.zipf_frequency`` rounds), per language, as JSON.
_LISTS_READ = """
import json, math, sys
import wordfreq
languages, least = json.loads(sys.argv[1]), float(sys.argv[2])
lists = {}
for language in languages:
    zipfs = {w: round(math.log10(f) + 9, 2) for w, f in wordfreq.get_frequency_dict(language, wordlist="small").items()}
    lists[language] = {w: z for w, z in zipfs.items() if z >= least}
json.dump(lists, sys.stdout, ensure_ascii=False)
"""
LISTS_READ_SECONDS = 60  # a hang guard for the child, never a measure


@lru_cache(maxsize=1)
def _frequencies() -> dict[str, float]:
    """Each folded word of Zipf frequency :data:`COUNTED_FROM` or more in one of :data:`LANGUAGES`, with its highest
    Zipf frequency among them (its spellings folded together), read by a child process (:data:`_LISTS_READ`). A child
    that cannot run or answer leaves none, logged: every word then weighs whole, as the bar counted before the
    weights, rather than a customer's turn failing."""
    try:
        done = subprocess.run(  # noqa: S603 — this interpreter, a fixed script, arguments of ours
            [sys.executable, "-c", _LISTS_READ, json.dumps(LANGUAGES), str(COUNTED_FROM)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=True,
            timeout=LISTS_READ_SECONDS,
        )
        lists = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        logger.warning("the word frequency lists could not be read (%s): every word weighs whole", error)
        return {}
    found: dict[str, float] = {}
    for words in lists.values():
        for word, zipf in words.items():
            key = fold(word)
            if zipf > found.get(key, 0.0):
                found[key] = zipf
    return found


def zipf_frequency(word: str) -> float:
    """``word``'s (folded) Zipf frequency in general language, the highest of :data:`LANGUAGES`'; 0 below
    :data:`COUNTED_FROM` (rare enough to weigh whole)."""
    return _frequencies().get(word, 0.0)


@lru_cache(maxsize=WEIGHTS_KEPT)
def word_weight(word: str) -> float:
    """What ``word`` (folded) weighs as evidence that a text answers a question holding it, in
    [:data:`LEAST_WEIGHT`, 1]: 1 below Zipf :data:`COUNTED_FROM`, :data:`LEAST_WEIGHT` from :data:`LEAST_FROM`,
    linear between."""
    zipf = zipf_frequency(word)
    if zipf <= COUNTED_FROM:
        return 1.0
    if zipf >= LEAST_FROM:
        return LEAST_WEIGHT
    return 1.0 - (1.0 - LEAST_WEIGHT) * (zipf - COUNTED_FROM) / (LEAST_FROM - COUNTED_FROM)
