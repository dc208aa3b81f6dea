"""The keywords of a profile's intents, compiled for the router (:mod:`routing.router`): pure functions over plain
data, no ORM.

An :class:`IntentSpec` is an intent as the router reads it. A :class:`KeywordScan` compiles the keywords of a
profile's intents into one Aho-Corasick automaton over the normalised text (:func:`common.text.normalize`), so a
message is scanned once whatever the number of keywords; :meth:`KeywordScan.keyword_match` says which intents a
message hits (:class:`KeywordMatch`), best first, and which keywords did not count, and why.

A keyword may have exclusions (``IntentSpec.keyword_exclusions``): phrases in which it does not count. A phrase
that contains the keyword (as whole words, normalised) cancels the keyword's occurrences inside an occurrence of the
phrase ("conta" not in "me conta"); any other phrase is a context, and cancels the keyword wherever it occurs in a
message that holds the phrase ("conta" not with "banco"). A keyword whose every occurrence is cancelled is no hit;
the automaton holds the phrases too (only when a profile has exclusions), so the message is still scanned once.

A keyword may be limited to languages (``IntentSpec.keyword_languages``: "pedido" to ``pt``): it counts only in a
message :func:`common.language.detect_language` reads as one of them; a message whose language it cannot tell counts
every keyword. The language is read once per message, and only when a limited keyword occurs in it. An exclusion
may be limited to languages too (``IntentSpec.exclusion_languages``: "me conta" to ``pt``): in a message read as
another language it cancels nothing (and the decision says so); one whose language cannot be told is cancelled by
every exclusion.

Keyword ties are broken deterministically, in this order:

1. lower ``priority`` number;
2. more distinct keywords of the intent found in the message;
3. the longer matched keyword (a phrase such as "segunda via" beats a word);
4. the earlier first match in the message;
5. the intent name, alphabetically.

:class:`KeywordLoopMatcher` is the reference: a loop over every keyword, with the same semantics and ranking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import ahocorasick

from common.language import detect_language
from common.text import normalize
from common.translations import Translations


@dataclass(frozen=True)
class IntentSpec:
    name: str
    agent: str
    domain: str = ""
    description: str = ""
    priority: int = 100
    keywords: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    mcp_tools: tuple[str, ...] = ()
    next_state: str = ""
    escalate_to: str = ""  # a team of people answers when this intent wins ("": the assistants)
    # (keyword, its exclusion phrases) for the keywords that have some, each keyword as it is in ``keywords``.
    keyword_exclusions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (keyword, the languages it counts in) for the keywords limited to some, each keyword as it is in ``keywords``.
    keyword_languages: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (keyword, exclusion phrase, the languages it cancels in) for the exclusions limited to some.
    exclusion_languages: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # A remote backend's entry (routing.documents.backend_intents): the gateway sends it the whole message; no
    # supervisor plan runs it.
    remote: bool = False
    # The subject line (``description``) in other languages than the profile's (common.translations).
    translations: Translations = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class KeywordHit:
    """One intent the message hit, with the evidence used to rank it."""

    intent: IntentSpec
    keywords: tuple[str, ...]
    first_position: int
    longest: int

    def rank(self) -> tuple[int, int, int, int, str]:
        return (self.intent.priority, -len(self.keywords), -self.longest, self.first_position, self.intent.name)

    def describe(self) -> dict[str, Any]:
        return {
            "intent": self.intent.name,
            "agent": self.intent.agent,
            "priority": self.intent.priority,
            "matched_keywords": list(self.keywords),
        }


ExclusionKind = Literal["inside", "context"]


def exclusion_inside(keyword: str, phrase: str) -> bool:
    """Whether exclusion ``phrase`` contains ``keyword`` as whole words, once both are normalised: then it cancels the
    keyword's occurrences inside it ("inside"); otherwise it is a context that cancels the keyword in the whole
    message ("context")."""
    return f" {normalize(keyword)} " in f" {normalize(phrase)} "


@dataclass(frozen=True)
class KeywordExclusion:
    """A keyword of an intent that occurred in a message but did not count: every occurrence was inside an
    occurrence of ``exclusion`` (``kind`` "inside"), or ``exclusion`` occurred in the message (``kind`` "context").
    ``exclusion`` is the first of the keyword's exclusions, in their stored order, that cancelled something."""

    intent: str
    keyword: str
    exclusion: str
    kind: ExclusionKind

    def describe(self) -> dict[str, str]:
        return {"intent": self.intent, "keyword": self.keyword, "exclusion": self.exclusion, "kind": self.kind}


@dataclass(frozen=True)
class KeywordOffLanguage:
    """A keyword of an intent that occurred in a message but did not count: it is limited to ``languages`` and the
    message reads as ``language``."""

    intent: str
    keyword: str
    languages: tuple[str, ...]
    language: str

    def describe(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "keyword": self.keyword,
            "languages": list(self.languages),
            "language": self.language,
        }


@dataclass(frozen=True)
class ExclusionOffLanguage:
    """An exclusion of an intent's keyword that occurred in a message but cancelled nothing: it is limited to
    ``languages`` and the message reads as ``language``."""

    intent: str
    keyword: str
    exclusion: str
    languages: tuple[str, ...]
    language: str

    def describe(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "keyword": self.keyword,
            "exclusion": self.exclusion,
            "languages": list(self.languages),
            "language": self.language,
        }


class KeywordMatch(NamedTuple):  # a named tuple: built once per message, cheaper than a frozen dataclass
    """What the keywords say about a message: the hits, best first, and the keywords their exclusions cancelled (in
    the order of their first occurrence, then intent and keyword); ``set_aside``: the hits the keyword check set aside
    (:meth:`routing.router.CompiledRouter.checked_keyword_match`), with why; ``off_language``: the keywords that did
    not count in the message's language (by intent and keyword); ``exclusions_off_language``: the exclusions that
    cancelled nothing in it (by intent, keyword and exclusion)."""

    hits: list[KeywordHit]
    excluded: tuple[KeywordExclusion, ...] = ()
    set_aside: dict[str, Any] | None = None
    off_language: tuple[KeywordOffLanguage, ...] = ()
    exclusions_off_language: tuple[ExclusionOffLanguage, ...] = ()


NO_KEYWORDS = KeywordMatch([])  # the keywords were not read (a state or small talk decided first)


class KeywordScan:
    """The keywords (and their exclusion phrases) of a profile's intents, compiled for repeated scans."""

    def __init__(self, intents: tuple[IntentSpec, ...]) -> None:
        self.intents = intents
        self._automaton, self._guarded = self._compile(intents)
        # (intent index, keyword) → the languages it counts in, for the keywords limited to some.
        self._limits = {
            (index, keyword): frozenset(languages)
            for index, intent in enumerate(intents)
            for keyword, languages in intent.keyword_languages
            if languages and keyword in intent.keywords
        }

    @staticmethod
    def _compile(intents: tuple[IntentSpec, ...]) -> tuple[ahocorasick.Automaton | None, bool]:
        """The automaton of the keywords and, when any intent has keyword exclusions, of their phrases too (then
        ``True``: :meth:`_match_guarded` reads it). Each key maps to its normalised length and its owners, ``(intent
        index, keyword)``; with exclusions also to the keywords it is an exclusion of, ``(intent index, keyword,
        phrase, its place among the keyword's exclusions, whether the phrase contains the keyword, the languages it
        cancels in — empty: every one)``."""
        # Keys are padded with spaces and the text is padded too, so every match
        # starts and ends on a word boundary of the normalised text.
        entries: dict[str, list[tuple[int, str]]] = {}
        phrases: dict[str, list[tuple[int, str, str, int, bool, frozenset[str]]]] = {}
        for index, intent in enumerate(intents):
            for keyword in intent.keywords:
                normalized = normalize(keyword)
                if normalized:
                    entries.setdefault(f" {normalized} ", []).append((index, keyword))
            limits = {(keyword, phrase): languages for keyword, phrase, languages in intent.exclusion_languages}
            for keyword, exclusions in intent.keyword_exclusions:
                if keyword not in intent.keywords:
                    continue
                for order, phrase in enumerate(exclusions):
                    normalized = normalize(phrase)
                    if normalized:
                        inside = exclusion_inside(keyword, phrase)
                        languages = frozenset(limits.get((keyword, phrase), ()))
                        owner = (index, keyword, phrase, order, inside, languages)
                        phrases.setdefault(f" {normalized} ", []).append(owner)
        if not entries:
            return None, False
        automaton = ahocorasick.Automaton()
        if phrases:
            for key in entries.keys() | phrases.keys():
                automaton.add_word(key, (len(key) - 2, tuple(entries.get(key, ())), tuple(phrases.get(key, ()))))
        else:
            for key, owners in entries.items():
                automaton.add_word(key, (len(key) - 2, tuple(owners)))
        automaton.make_automaton()
        return automaton, bool(phrases)

    def keyword_match(self, text: str) -> KeywordMatch:
        """:meth:`match`'s hits, with the keywords their exclusions cancelled and those the message's language left
        out."""
        if self._automaton is None:
            return KeywordMatch([])
        haystack = f" {normalize(text)} "
        matches: Any = self._automaton.iter(haystack)
        dropped: frozenset[tuple[int, str]] = frozenset()
        off: tuple[KeywordOffLanguage, ...] = ()
        if self._limits:
            matches = list(matches)
            dropped, off = self._off_language(matches, text)
        if self._guarded:
            return self._match_guarded(matches, dropped, off, text)
        found: dict[int, dict[str, Any]] = {}
        for end, (length, owners) in matches:
            start = end - length
            for index, keyword in owners:
                if dropped and (index, keyword) in dropped:
                    continue
                entry = found.setdefault(index, {"keywords": {}, "first": start, "longest": 0})
                entry["keywords"].setdefault(keyword, start)
                entry["first"] = min(entry["first"], start)
                entry["longest"] = max(entry["longest"], length)
        return KeywordMatch(self._hits(found), off_language=off)

    def _off_language(
        self, matches: list[tuple[int, tuple[Any, ...]]], text: str
    ) -> tuple[frozenset[tuple[int, str]], tuple[KeywordOffLanguage, ...]]:
        """The limited keywords among ``matches`` (the automaton's, over ``text``) that do not count in the message's
        language, as owners and as what the decision says of them; the language is read only when one occurs."""
        limits = self._limits
        present = {owner for _end, value in matches for owner in value[1] if owner in limits}
        if not present:
            return frozenset(), ()
        language = detect_language(text)
        if language is None:
            return frozenset(), ()
        dropped = frozenset(owner for owner in present if language not in limits[owner])
        off = (
            KeywordOffLanguage(self.intents[index].name, keyword, tuple(sorted(limits[(index, keyword)])), language)
            for index, keyword in dropped
        )
        return dropped, tuple(sorted(off, key=lambda item: (item.intent, item.keyword)))

    def _hits(self, found: dict[int, dict[str, Any]]) -> list[KeywordHit]:
        """The intents found (by index: their keywords with first positions, first match, longest match), best first."""
        hits = [
            KeywordHit(
                intent=self.intents[index],
                keywords=tuple(sorted(entry["keywords"], key=entry["keywords"].get)),
                first_position=entry["first"],
                longest=entry["longest"],
            )
            for index, entry in found.items()
        ]
        hits.sort(key=KeywordHit.rank)
        return hits

    def _match_guarded(
        self, matches: Any, dropped: frozenset[tuple[int, str]], off: tuple[KeywordOffLanguage, ...], text: str
    ) -> KeywordMatch:
        """:meth:`keyword_match` for intents with exclusions: the same scan (``matches``, over ``text``) records every
        occurrence of the keywords (but the ``dropped`` ones, off the message's language) and of the exclusion
        phrases, then the phrases cancel occurrences — those limited to languages only in a message of one of them
        (the module's docstring)."""
        occurrences: dict[tuple[int, str], tuple[int, list[int]]] = {}  # owner → (length, starts)
        phrases: list[tuple[int, int, tuple[tuple[int, str, str, int, bool, frozenset[str]], ...]]] = []
        for end, (length, owners, excluding) in matches:
            start = end - length
            for owner in owners:
                if dropped and owner in dropped:
                    continue
                occurrences.setdefault(owner, (length, []))[1].append(start)
            if excluding:
                phrases.append((start, end, excluding))
        cancelled: dict[tuple[int, str], set[int]] = {}
        applied: dict[tuple[int, str], tuple[int, str, ExclusionKind]] = {}  # owner → its first exclusion that bit
        idle: dict[tuple[str, str, str], ExclusionOffLanguage] = {}  # limited to other languages than the message's
        language: str | None = ""  # "": not read yet (only an occurring limited exclusion reads it)
        for phrase_start, phrase_end, excluding in phrases:
            for index, keyword, phrase, order, inside, languages in excluding:
                seen = occurrences.get((index, keyword))
                if seen is None:
                    continue
                if languages:
                    if language == "":
                        language = detect_language(text)
                    if language is not None and language not in languages:
                        name = self.intents[index].name
                        idle[(name, keyword, phrase)] = ExclusionOffLanguage(
                            name, keyword, phrase, tuple(sorted(languages)), language
                        )
                        continue
                length, starts = seen
                inner = (s for s in starts if phrase_start <= s and s + length <= phrase_end)
                hit = set(inner) if inside else set(starts)
                if not hit:
                    continue
                cancelled.setdefault((index, keyword), set()).update(hit)
                if (index, keyword) not in applied or order < applied[(index, keyword)][0]:
                    applied[(index, keyword)] = (order, phrase, "inside" if inside else "context")
        found: dict[int, dict[str, Any]] = {}
        excluded: list[tuple[int, str, str, KeywordExclusion]] = []
        for (index, keyword), (length, starts) in occurrences.items():
            gone = cancelled.get((index, keyword))
            kept = [s for s in starts if s not in gone] if gone else starts
            if not kept:
                _order, phrase, kind = applied[(index, keyword)]
                name = self.intents[index].name
                excluded.append((starts[0], name, keyword, KeywordExclusion(name, keyword, phrase, kind)))
                continue
            entry = found.setdefault(index, {"keywords": {}, "first": kept[0], "longest": 0})
            entry["keywords"][keyword] = kept[0]
            entry["first"] = min(entry["first"], kept[0])
            entry["longest"] = max(entry["longest"], length)
        excluded.sort(key=lambda item: item[:3])
        return KeywordMatch(
            self._hits(found),
            tuple(item[3] for item in excluded),
            off_language=off,
            exclusions_off_language=tuple(idle[key] for key in sorted(idle)),
        )


class KeywordLoopMatcher:
    """Reference implementation: a loop over every keyword (what the compiled router replaces).

    Keywords and exclusion phrases are normalised once, at build time, so the comparison with
    :class:`KeywordScan` is fair. Same semantics and ranking as
    :meth:`KeywordScan.keyword_match`; kept for the benchmark and for the test that
    checks both agree.
    """

    def __init__(self, intents: tuple[IntentSpec, ...]) -> None:
        self.entries = []
        for intent in intents:
            exclusions = dict(intent.keyword_exclusions)
            limits = {keyword: languages for keyword, languages in intent.keyword_languages if languages}
            phrase_limits = {(keyword, phrase): languages for keyword, phrase, languages in intent.exclusion_languages}
            keywords = [
                (
                    keyword,
                    f" {normalize(keyword)} ",
                    tuple(sorted(limits.get(keyword, ()))),
                    [
                        (
                            phrase,
                            f" {normalize(phrase)} ",
                            exclusion_inside(keyword, phrase),
                            tuple(sorted(phrase_limits.get((keyword, phrase), ()))),
                        )
                        for phrase in exclusions.get(keyword, ())
                        if normalize(phrase)
                    ],
                )
                for keyword in intent.keywords
                if normalize(keyword)
            ]
            self.entries.append((intent, keywords))

    def match(self, text: str) -> list[KeywordHit]:
        return self.keyword_match(text).hits

    def keyword_match(self, text: str) -> KeywordMatch:
        haystack = f" {normalize(text)} "
        hits = []
        excluded: list[tuple[int, str, str, KeywordExclusion]] = []
        off: list[KeywordOffLanguage] = []
        idle: list[ExclusionOffLanguage] = []
        for intent, keywords in self.entries:
            positions: dict[str, int] = {}
            longest = 0
            for keyword, padded, languages, exclusions in keywords:
                if keyword in positions:
                    continue
                if languages and padded in haystack:
                    language = detect_language(text)
                    if language is not None and language not in languages:
                        off.append(KeywordOffLanguage(intent.name, keyword, languages, language))
                        continue
                if not exclusions:  # the first occurrence is enough
                    position = haystack.find(padded)
                    if position >= 0:
                        positions[keyword] = position + 1
                        longest = max(longest, len(padded) - 2)
                    continue
                starts = _word_starts(haystack, padded)
                if not starts:
                    continue
                kept, first = starts, None
                for phrase, phrase_padded, inside, phrase_languages in exclusions:
                    phrase_starts = _word_starts(haystack, phrase_padded)
                    if not phrase_starts:
                        continue
                    if phrase_languages:
                        language = detect_language(text)
                        if language is not None and language not in phrase_languages:
                            idle.append(ExclusionOffLanguage(intent.name, keyword, phrase, phrase_languages, language))
                            continue
                    length, span = len(padded) - 2, len(phrase_padded) - 2
                    within = (s for s in starts if any(p <= s and s + length <= p + span for p in phrase_starts))
                    gone = set(within) if inside else set(starts)
                    if gone and first is None:
                        first = KeywordExclusion(intent.name, keyword, phrase, "inside" if inside else "context")
                    kept = [s for s in kept if s not in gone]
                if not kept:
                    assert first is not None
                    excluded.append((starts[0], intent.name, keyword, first))
                    continue
                positions[keyword] = kept[0]
                longest = max(longest, len(padded) - 2)
            if positions:
                hits.append(
                    KeywordHit(
                        intent=intent,
                        keywords=tuple(sorted(positions, key=positions.__getitem__)),
                        first_position=min(positions.values()),
                        longest=longest,
                    )
                )
        hits.sort(key=KeywordHit.rank)
        excluded.sort(key=lambda item: item[:3])
        off.sort(key=lambda item: (item.intent, item.keyword))
        idle.sort(key=lambda item: (item.intent, item.keyword, item.exclusion))
        return KeywordMatch(
            hits, tuple(item[3] for item in excluded), off_language=tuple(off), exclusions_off_language=tuple(idle)
        )


def _word_starts(haystack: str, padded: str) -> list[int]:
    """Where ``padded`` (a normalised phrase with a space each side) occurs in ``haystack``: the index of each
    occurrence's first letter, overlapping occurrences included ("conta conta" holds " conta " twice)."""
    starts = []
    position = haystack.find(padded)
    while position >= 0:
        starts.append(position + 1)
        position = haystack.find(padded, position + 1)
    return starts
