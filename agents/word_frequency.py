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

The lists are read once per process, through wordfreq's public API (``get_frequency_dict`` of its "small" lists,
the words of Zipf :data:`COUNTED_FROM` or more kept, about 7,300 folded), in a child process (:class:`_Lists`): when
the process starts, where its routing holds a profile with knowledge (:func:`word_lists_warm`), else at the first
word weighed; a word's weight is read from them (:func:`word_weight`). Imported in
the process itself, wordfreq and its tokenisers (``ftfy``, ``langcodes``, ``regex``) and its cached lists stayed: about
20 MiB more in every web and Celery worker that answered from knowledge, which took the web worker past its memory
budget (docs/benchmarks.md, "Memory per process"). The child costs about 0.2 s of CPU once per process; its words
take about 1 MiB. A process whose profiles hold no knowledge starts none.

Read at the first word weighed, the child ran inside a customer's searched message: the message waited for it (1.3 s
of wall time at a load of 11 on two cores), and so did every other search of the process, on the lock, each holding
its database connection, so that the process's other messages queued for the pool behind them; a server measured
over a window its workers' first searches fell in counted the children's CPU too. Read at start, before the worker
listens, as the routing is compiled (:func:`routing.snapshot.snapshot_warm`), no message waits for it.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import threading
import time

from common.text import fold

LANGUAGES = ("pt", "en", "es")
# The Zipf frequency from which a word weighs less than a whole one, and the one from which it weighs the least
# (:data:`LEAST_WEIGHT`): from 4.5 ("invoice", "portugal", "senha"), below a word a text about the subject repeats,
# to 6.5 ("going", "quero", "dia" and above), the words any text holds.
COUNTED_FROM = 4.5
LEAST_FROM = 6.5
LEAST_WEIGHT = 0.2

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
RETRY_SECONDS = 300  # after a child failed, how long every word weighs whole before the lists are read again


def _lists_read() -> dict[str, float]:
    """Each folded word of Zipf frequency :data:`COUNTED_FROM` or more in one of :data:`LANGUAGES`, with its highest
    Zipf frequency among them (its spellings folded together), read by a child process (:data:`_LISTS_READ`)."""
    done = subprocess.run(  # noqa: S603 — this interpreter, a fixed script, arguments of ours
        [sys.executable, "-c", _LISTS_READ, json.dumps(LANGUAGES), str(COUNTED_FROM)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
        timeout=LISTS_READ_SECONDS,
    )
    found: dict[str, float] = {}
    for words in json.loads(done.stdout).values():
        for word, zipf in words.items():
            key = fold(word)
            if zipf > found.get(key, 0.0):
                found[key] = zipf
    return found


class _Lists:
    """The process's frequencies (:func:`_lists_read`), read at the first word weighed. A child that cannot run or
    answer leaves none, logged: every word then weighs whole, as the bar counted before the weights, rather than a
    customer's turn failing — for :data:`RETRY_SECONDS`, after which the next word weighed tries again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._words: dict[str, float] | None = None
        self._failed_at = -math.inf

    def words(self) -> dict[str, float]:
        if self._words is not None:
            return self._words
        with self._lock:
            if self._words is None and time.monotonic() - self._failed_at >= RETRY_SECONDS:
                try:
                    self._words = _lists_read()
                except (OSError, subprocess.SubprocessError, ValueError) as error:
                    self._failed_at = time.monotonic()
                    logger.warning(
                        "the word frequency lists could not be read (%s): every word weighs whole for %d s",
                        error,
                        RETRY_SECONDS,
                    )
        return self._words or {}


_LISTS = _Lists()


def word_lists_warm() -> None:
    """Read the lists now (the child process, about 0.25 s of CPU), not at the first word a customer's search weighs:
    for a process's start, before it serves, when its profiles hold knowledge. A child that fails is logged and
    tried again as at a word weighed (:class:`_Lists`)."""
    _LISTS.words()


def zipf_frequency(word: str) -> float:
    """``word``'s (folded) Zipf frequency in general language, the highest of :data:`LANGUAGES`'; 0 below
    :data:`COUNTED_FROM` (rare enough to weigh whole)."""
    return _LISTS.words().get(word, 0.0)


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
