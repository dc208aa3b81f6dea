"""The conversation's language: what the platform's own words (common.i18n) and the offline model are written in.

Decided once a turn (:func:`language_decide`), in this order:

1. the channel's, when the client names one (a ``language`` field of the REST payload or the WebSocket frame, an
   A2A message's ``metadata.language``): it wins and is kept;
2. the kept one (the conversation's ``language`` column), changed only on clear evidence: a message of
   :data:`CHANGE_WORDS` words or more that reads as another language beyond doubt
   (:func:`common.language.language_clear`: the model sure of it, or the marks of that language alone). One
   ambiguous word — "ok", "sim", "no" — never changes it, nor a short reply Portuguese and Spanish share ("ok,
   confirmado por favor", which the model reads either way); a code such as "NDA-SE.ST" is one word, whatever its
   punctuation splits;
3. none kept yet: the message's, else the customer's earlier messages', else the ``Accept-Language`` the client sent
   (every browser sends one: a guess, not a choice), else the profile's own language (what its texts are written
   in), else :data:`common.i18n.DEFAULT_LANGUAGE` — not kept: the next message that tells decides. A message read
   as Portuguese or Spanish without certainty ("a bolsa abre que horas?": every word is both languages') is told
   apart by the same two, the client's language then the profile's, where one of them is the other of the pair —
   not kept either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from common.i18n import DEFAULT_LANGUAGE
from common.language import LANGUAGES, detect_language, language_clear

CHANGE_WORDS = 3  # a message this long that reads as another language changes the kept one
# The languages a short message without marks of either reads as both of (common.language's marks tell them apart).
NEIGHBOURS = ("pt", "es")
_WORD = re.compile(r"[^\W\d_]{2,}")


@dataclass
class TurnLanguage:
    """The language's part of one turn (``turn.language``): the turn's (:func:`language_decide`; the platform's own
    words use it), what the conversation keeps (its column as read, then what it keeps after this message) and the
    column as the turn found it (the analytics' daily totals count a change)."""

    code: str = ""
    kept: str = ""
    found: str = ""


def _words(text: str) -> int:
    """How many words ``text`` has: what spaces separate, each with two letters or more (an id, a number, an emoji
    is none; a listing's code, "NDA-SE.ST", one)."""
    return sum(1 for token in text.split() if _WORD.search(token))


def language_asked(value: str | None) -> str:
    """The platform's language a channel names — ``"en"``, ``"es-MX"``, an ``Accept-Language`` header such as
    ``"es-ES,es;q=0.9,en;q=0.5"`` (the first it speaks, by preference) — or ``""``."""
    if not value:
        return ""
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate(str(value).split(",")):
        tag, _, options = item.strip().partition(";")
        quality = 1.0
        if options.strip().startswith("q="):
            try:
                quality = float(options.strip()[2:])
            except ValueError:
                quality = 0.0
        primary = tag.strip().split("-")[0].split("_")[0].casefold()
        if primary in LANGUAGES and quality > 0:
            ranked.append((-quality, position, primary))
    return min(ranked)[2] if ranked else ""


def language_decide(
    *, kept: str, channel: str, text: str, earlier: Iterable[str] = (), hint: str = "", own: str = ""
) -> tuple[str, str]:
    """``(the turn's language, the one the conversation keeps)`` by the rules above; ``earlier``: the customer's
    earlier messages, newest first; ``hint``: the client's ``Accept-Language``, read by :func:`language_asked`;
    ``own``: the profile's language."""
    if channel in LANGUAGES:
        return channel, channel
    told = detect_language(text)
    if kept in LANGUAGES:
        if told is not None and told != kept and _words(text) >= CHANGE_WORDS and language_clear(text, told):
            return told, told
        return kept, kept
    if told is not None:
        prior = next((language for language in (hint, own) if language in NEIGHBOURS), told)
        if told in NEIGHBOURS and prior != told and not language_clear(text, told):  # read only where it may matter
            return prior, ""
        return told, told
    for said in earlier:
        told = detect_language(said)
        if told is not None:
            return told, told
    return next(language for language in (hint, own, DEFAULT_LANGUAGE) if language in LANGUAGES), ""
