"""The general-language frequencies the relevance bar weighs words by, read from wordfreq's data files without
importing wordfreq: held to what wordfreq itself says of the same words (a canary for a change of its format)."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import wordfreq

from agents.word_frequency import COUNTED_FROM, LANGUAGES, _buckets, zipf_frequency
from common.text import fold

WORDS = (
    "não", "você", "está", "going", "next", "long", "take", "hace", "quero", "internet", "pedido", "money",
    "dia", "month", "roaming", "fatura", "vencimento", "contraseña", "Portugal",
)  # fmt: skip


ROOT = Path(__file__).resolve().parents[2]


@cache
def _spellings() -> dict[str, set[str]]:
    """Each folded word of the three lists, with its spellings there."""
    found: dict[str, set[str]] = {}
    for language in LANGUAGES:
        for bucket in _buckets(language):
            for word in bucket:
                found.setdefault(fold(word), set()).add(word)
    return found


@pytest.mark.parametrize("word", WORDS)
def test_a_words_frequency_is_wordfreqs_highest_in_the_three_languages_once_folded(word):
    spellings = _spellings().get(fold(word), set())
    expected = max(
        (wordfreq.zipf_frequency(w, language, wordlist="small") for w in spellings | {word} for language in LANGUAGES),
        default=0.0,
    )

    if expected > COUNTED_FROM:
        assert zipf_frequency(fold(word)) == pytest.approx(expected, abs=0.01)
    else:
        assert zipf_frequency(fold(word)) == 0.0  # rare enough to weigh whole


def test_weighing_a_word_does_not_import_wordfreqs_tokenisers():
    code = (
        "import sys; from agents.word_frequency import word_weight; word_weight('going'); "
        "print(sorted(m for m in ('wordfreq', 'ftfy', 'langcodes') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)

    assert found.stdout.strip() == "[]"
