"""Text normalisation shared by keyword storage, the compiled matcher and previews."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def _ranges(code_points: list[int]) -> str:
    """A regular expression's character class of ``code_points`` (sorted), as ranges."""
    parts, start = [], 0
    for index, code_point in enumerate(code_points):
        if index + 1 < len(code_points) and code_points[index + 1] == code_point + 1:
            continue
        first = code_points[start]
        parts.append(f"\\u{first:04x}" if first == code_point else f"\\u{first:04x}-\\u{code_point:04x}")
        start = index + 1
    return "".join(parts)


# Every combining mark of the Basic Multilingual Plane, removed by one regular expression (a C-level scan; a
# translation table looks every character up, three times slower on a message).
_COMBINING_MARKS = re.compile(f"[{_ranges([cp for cp in range(0x10000) if unicodedata.combining(chr(cp))])}]+")
# An ASCII text's letters and digits kept, everything else a space: one byte table, no regular expression.
_ASCII_WORDS = bytes(code if chr(code).isalnum() else 0x20 for code in range(128)) + b" " * 128


def fold(text: str) -> str:
    """Case and accents folded, everything else kept: ``"COBRANÇA!"`` → ``"cobranca!"``."""
    if text.isascii():
        return text.casefold()
    return _COMBINING_MARKS.sub("", unicodedata.normalize("NFKD", text)).casefold()


@lru_cache(maxsize=1024)
def normalize(text: str) -> str:
    """Fold case and accents and collapse everything that is not a letter or digit.

    ``"COBRANÇA!"`` → ``"cobranca"``; ``"Segunda-via"`` → ``"segunda via"``. Word
    boundaries survive as single spaces, so a phrase keyword matches a phrase and
    ``"conta"`` never matches inside ``"contato"``.

    Memoised: each routing step that reads a message (the keywords, the examples tier, the classifier) normalises
    it. A text that is ASCII once folded (most of what customers write here, accents removed) is split by a byte
    table instead of the regular expression: a 300-character message took 25 µs, about 15 now.
    """
    folded = fold(text)
    if folded.isascii():
        return " ".join(folded.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split())
    return _NON_WORD.sub(" ", folded).strip()


def phrase_found(text: str, phrases: Iterable[str]) -> str | None:
    """The first of ``phrases`` that occurs in ``text`` on word boundaries (case and accents ignored)."""
    haystack = f" {normalize(text)} "
    for phrase in phrases:
        needle = normalize(phrase)
        if needle and f" {needle} " in haystack:
            return phrase
    return None


def whole_number(raw: str) -> int | None:
    """``raw`` as a non-negative whole number when it is ASCII digits only, else ``None``. ``str.isdigit`` alone
    also accepts digits such as ``"²"`` that ``int`` refuses (a query parameter made of one was a 500)."""
    return int(raw) if raw.isascii() and raw.isdigit() else None


_RUNS = re.compile(r"[^\W\d_]+|\d+|[\W_]+")
_IDENTIFIER = re.compile(r"(?<![\w-])[\w-]*\d[\w-]*(?![\w-])")
_DIGIT = re.compile(r"\d")  # what every identifier holds
# A denial right before an identifier: "não (é) (o|no|do) X", "not (the) X", "no (es) (el|en el) X".
_DENIED = re.compile(
    r"(?:\b(?:não|nao|not)\s+(?:(?:é|e|is|was|era)\s+)?(?:(?:o|a|no|na|do|da|the|in)\s+)?"
    r"|\bno\s+(?:es\s+)?(?:el|la|en el|en la)\s+)$",  # Spanish "no" before its article: Portuguese "no" is "in the"
    re.IGNORECASE,
)
_EXAMPLE = re.compile(r"\b(?:ex\.?|e\.g\.?|p\.ex\.?|por ejemplo|por exemplo|for example)\s*:?\s*([\w-]*\d[\w-]*)", re.I)


def identifier_shape(value: str) -> str:
    """The form of an identifier: its runs of letters and digits and their lengths, case ignored (``"P100"`` and
    ``"P200"`` → ``"A1D3"``; ``"INV001"`` → ``"A3D3"``)."""
    return "".join(
        ("A" if run[0].isalpha() else "D" if run[0].isdigit() else "S") + str(len(run)) for run in _RUNS.findall(value)
    )


def identifiers(text: str) -> list[str]:
    """The identifier-like tokens of ``text``: letters, digits and dashes with at least one digit, in order; one the
    customer denies ("veio no P100, não no P200", "P100, not P200", "el P100, no el P200") is left out."""
    if _DIGIT.search(text) is None:  # most messages: the offline model reads each of a turn's history per tool
        return []
    return [found.group(0) for found in _IDENTIFIER.finditer(text) if not _DENIED.search(text[: found.start()])]


def described_example(description: str) -> str:
    """The example value a parameter's description gives ("Número do pedido (ex. P100)" → ``"P100"``), or ``""``."""
    found = _EXAMPLE.search(description or "")
    return found.group(1) if found else ""
