"""Text normalisation shared by keyword storage, the compiled matcher and previews."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)

# Every combining mark of the Basic Multilingual Plane, removed in one C-level
# ``str.translate`` (a per-character Python loop costs more on the message path).
_COMBINING = dict.fromkeys(cp for cp in range(0x10000) if unicodedata.combining(chr(cp)))


def fold(text: str) -> str:
    """Case and accents folded, everything else kept: ``"COBRANÇA!"`` → ``"cobranca!"``."""
    if text.isascii():
        return text.casefold()
    return unicodedata.normalize("NFKD", text).translate(_COMBINING).casefold()


@lru_cache(maxsize=1024)
def normalize(text: str) -> str:
    """Fold case and accents and collapse everything that is not a letter or digit.

    ``"COBRANÇA!"`` → ``"cobranca"``; ``"Segunda-via"`` → ``"segunda via"``. Word
    boundaries survive as single spaces, so a phrase keyword matches a phrase and
    ``"conta"`` never matches inside ``"contato"``.

    Memoised: each routing step that reads a message (the keywords, the examples tier, the classifier) normalises
    it, and a long one costs tens of microseconds.
    """
    return _NON_WORD.sub(" ", fold(text)).strip()


def phrase_found(text: str, phrases: Iterable[str]) -> str | None:
    """The first of ``phrases`` that occurs in ``text`` on word boundaries (case and accents ignored)."""
    haystack = f" {normalize(text)} "
    for phrase in phrases:
        needle = normalize(phrase)
        if needle and f" {needle} " in haystack:
            return phrase
    return None
