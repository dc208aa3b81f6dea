"""The general-language frequencies the relevance bar weighs words by, read through wordfreq's public API in a child
process when the first word is weighed: held to what wordfreq's own ``zipf_frequency`` says of the same words, their
spellings folded."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import wordfreq

from agents.word_frequency import COUNTED_FROM, LANGUAGES, zipf_frequency
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
        for word in wordfreq.get_frequency_dict(language, wordlist="small"):
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


def test_weighing_words_never_loads_wordfreq_or_its_tokenisers_into_the_process_that_weighs_them():
    code = (
        "import sys; from agents.passages import asked_words; from agents.word_frequency import word_weight; "
        "asked_words('going to Portugal next month'); print(word_weight('going'), word_weight('roaming')); "
        "print(sorted(m for m in ('wordfreq', 'ftfy', 'langcodes') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)

    weights, loaded = found.stdout.split("\n")[:2]
    assert [float(weight) for weight in weights.split()] == [pytest.approx(0.424), 1.0]  # "going" Zipf 5.94
    assert loaded == "[]"


@pytest.fixture
def lists_unread(monkeypatch):
    """The process's frequencies not read yet (its own lists are back after the test)."""
    from agents import word_frequency

    monkeypatch.setattr(word_frequency, "_LISTS", word_frequency._Lists())
    return word_frequency


def test_a_child_that_cannot_read_the_lists_leaves_every_word_weighing_whole_and_says_so(
    lists_unread, monkeypatch, caplog
):
    monkeypatch.setattr(lists_unread.sys, "executable", str(ROOT / "no-such-python"))

    assert lists_unread.word_weight("going") == 1.0
    assert "could not be read" in caplog.text


def test_after_a_failed_read_the_lists_are_read_again_once_the_pause_has_passed(lists_unread, monkeypatch):
    python = lists_unread.sys.executable
    monkeypatch.setattr(lists_unread.sys, "executable", str(ROOT / "no-such-python"))
    assert lists_unread.word_weight("going") == 1.0
    monkeypatch.setattr(lists_unread.sys, "executable", python)

    assert lists_unread.zipf_frequency("going") == 0.0  # within the pause: not tried again
    monkeypatch.setattr(lists_unread, "RETRY_SECONDS", 0)
    assert lists_unread.word_weight("going") == pytest.approx(0.424)  # "going" Zipf 5.94
