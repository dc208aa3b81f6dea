"""The synonyms a business keeps for its help centre: groups of equivalent terms of a knowledge source ("moda praia,
biquíni, maiô"), which a search reads as one — pure text, no ORM.

A source holds its groups (``KnowledgeSource.synonyms``: a list of lists of terms, edited in the admin one group a
line, in its YAML export as ``synonyms:``), and they are part of the profile's versions: the profile's document holds
them by source name (``knowledge_synonyms``), so a published version searches with the groups it was published with
and the draft with the current ones. A search applies the groups of the sources it reads — the shared ones and the
tenant's own, never another tenant's.

How a question reads them: :mod:`knowledge.synonym_reading`. This module is their storage's: the shape, the bounds,
the admin's text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from django.core.exceptions import ValidationError

from common.text import normalize

Group = tuple[str, ...]
MAX_TERM_CHARS = 60
MAX_TERM_WORDS = 4
MAX_GROUP_TERMS = 20
MAX_SOURCE_TERMS = 1000  # a source's terms in all its groups (a tenant's are bounded by KNOWLEDGE_MAX_SYNONYM_TERMS)
TERM_SEPARATOR = ","


def synonyms_cleaned(value: object) -> list[list[str]]:
    """``value`` (a list of groups, each a list of terms) as a source stores it: each term stripped, each group's
    terms once (case and accents aside), groups of fewer than two terms dropped. Raises :class:`ValidationError` for
    another shape or a term or group past its bound."""
    if not isinstance(value, list) or not all(isinstance(group, list) for group in value):
        raise ValidationError("Synonyms are a list of groups, each a list of terms.")
    groups: list[list[str]] = []
    total = 0
    for group in value:
        terms: dict[str, str] = {}
        for term in group:
            if not isinstance(term, str):
                raise ValidationError(f"A synonym is a text: {term!r} is not.")
            text = " ".join(term.split())
            if len(text) > MAX_TERM_CHARS or len(normalize(text).split()) > MAX_TERM_WORDS:
                raise ValidationError(
                    f"A synonym is at most {MAX_TERM_WORDS} words and {MAX_TERM_CHARS} characters: {text[:80]!r}."
                )
            if normalize(text):
                terms.setdefault(normalize(text), text)
        if len(terms) > MAX_GROUP_TERMS:
            raise ValidationError(f"A group holds at most {MAX_GROUP_TERMS} synonyms.")
        if len(terms) >= 2:
            groups.append(list(terms.values()))
            total += len(terms)
    if total > MAX_SOURCE_TERMS:
        raise ValidationError(f"A source holds at most {MAX_SOURCE_TERMS} synonyms in all its groups.")
    return groups


def validate_synonyms(value: object) -> None:
    synonyms_cleaned(value)


def synonyms_parsed(text: str) -> list[list[str]]:
    """Groups written one a line, terms separated by commas (the admin's field)."""
    return [[term for term in line.split(TERM_SEPARATOR) if term.strip()] for line in text.splitlines() if line.strip()]


def synonyms_written(groups: Iterable[Sequence[str]]) -> str:
    """Groups as :func:`synonyms_parsed` reads them."""
    return "\n".join(f"{TERM_SEPARATOR} ".join(group) for group in groups)


def terms_count(groups: Iterable[Sequence[str]]) -> int:
    return sum(len(group) for group in groups)


def groups_of(synonyms: Mapping[str, Sequence[Sequence[str]]], sources: Iterable[str]) -> tuple[Group, ...]:
    """The groups of ``sources`` (by name) in ``synonyms`` (by source name), each once, in the sources' order."""
    out: dict[Group, None] = {}
    for name in sorted(set(sources)):
        for group in synonyms.get(name) or ():
            out.setdefault(tuple(group), None)
    return tuple(out)


# A version's synonyms as the compiled profile holds them: (source name, its groups), by source name.
Held = tuple[tuple[str, tuple[Group, ...]], ...]


def document_synonyms(value: object) -> Held | None:
    """The synonyms a profile's document holds (``knowledge_synonyms``: groups by source name); ``None`` when it
    holds none (a version published before synonyms were versioned: the current ones serve, as its documents do)."""
    if not isinstance(value, Mapping):
        return None
    return tuple(
        (str(name), tuple(tuple(str(term) for term in group) for group in groups if isinstance(group, list)))
        for name, groups in sorted(value.items())
        if isinstance(groups, list)
    )
