"""The business's texts in each language: a row's ``translations``, its words per language beside its own fields.

A text a customer reads (a specialist's display name, an intent's subject line, a goal's description) is written in
its field, in the profile's language (``AgentProfile.language``), and may have a value per other language in the
row's ``translations``, keyed by language, then by field::

    {"en": {"display_name": "Plans and services"}, "es": {"display_name": "Planes y servicios"}}

Keyed by the platform's languages (:data:`common.language.LANGUAGES`), so a language added there is edited, stored,
versioned and said without a migration. :func:`translated` says a text in a language, falling back to the field (the
profile's language); :func:`translations_missing` lists what lacks which language, for the admin's warning.

Pure: imports no app.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from common.language import LANGUAGES

Translations = Mapping[str, Mapping[str, str]]

ERROR_TRANSLATIONS = "Translations must be an object of languages, each an object of texts by field."
ERROR_TRANSLATION_LANGUAGE = "Unknown language {language!r}: use one of {known}."
ERROR_TRANSLATION_FIELD = "{language}: {field!r} has no translation; translated fields: {fields}."
ERROR_TRANSLATION_TEXT = "{language}: {field} must be text."
ERROR_TRANSLATION_LENGTH = "{language}: {field} has at most {limit} characters ({length} given)."


def translations_problems(
    value: object, fields: Iterable[str], limits: Mapping[str, int] | None = None
) -> list[tuple[str, str]]:
    """What is wrong with ``value`` as a row's translations of ``fields``: ``(language or "", message)`` pairs, empty
    when they are fine — an object of the platform's languages, each an object of texts of ``fields`` (each at most
    ``limits[field]`` characters, when given). The one rule of the models, the admin and the YAML import."""
    if not isinstance(value, Mapping):
        return [("", ERROR_TRANSLATIONS)]
    fields = tuple(fields)
    known = ", ".join(LANGUAGES)
    problems: list[tuple[str, str]] = []
    for language, texts in value.items():
        if language not in LANGUAGES:
            problems.append((str(language), ERROR_TRANSLATION_LANGUAGE.format(language=language, known=known)))
            continue
        if not isinstance(texts, Mapping):
            problems.append((language, ERROR_TRANSLATIONS))
            continue
        for field, text in texts.items():
            if field not in fields:
                message = ERROR_TRANSLATION_FIELD.format(language=language, field=field, fields=", ".join(fields))
                problems.append((language, message))
            elif not isinstance(text, str):
                problems.append((language, ERROR_TRANSLATION_TEXT.format(language=language, field=field)))
            elif limits and field in limits and len(text) > limits[field]:
                limit = limits[field]
                said = ERROR_TRANSLATION_LENGTH.format(language=language, field=field, limit=limit, length=len(text))
                problems.append((language, said))
    return problems


def translations_cleaned(value: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, str]]:
    """``value`` as it is stored and versioned: the platform's languages in their order, each text stripped, empty
    texts and languages left out (call it on a value :func:`translations_problems` passed)."""
    cleaned: dict[str, dict[str, str]] = {}
    for language in LANGUAGES:
        texts = {field: text.strip() for field, text in sorted((value or {}).get(language, {}).items())}
        if texts := {field: text for field, text in texts.items() if text}:
            cleaned[language] = texts
    return cleaned


def translated(text: str, translations: Translations | None, field: str, language: str | None, *, own: str) -> str:
    """``field``'s text in ``language``: ``text`` (the field, written in the profile's language ``own``) when that is
    the language asked or no translation into it exists, else the translation."""
    if language and language != own:
        found = ((translations or {}).get(language) or {}).get(field)
        if found:
            return found
    return text


def translated_only(text: str, translations: Translations | None, field: str, language: str | None, *, own: str) -> str:
    """``field``'s text in ``language`` only: as :func:`translated`, but ``""`` rather than the profile's language's
    text (for a sentence that would otherwise mix two languages)."""
    if not language or language == own:
        return text
    return ((translations or {}).get(language) or {}).get(field) or ""


def translations_missing(
    texts: Mapping[str, str], translations: Translations | None, *, own: str
) -> list[tuple[str, tuple[str, ...]]]:
    """Which of ``texts`` (field → its text in the profile's language ``own``; an empty one needs none) lack which of
    the platform's other languages: ``(field, languages)`` pairs, in ``texts``' order."""
    missing = []
    for field, text in texts.items():
        if not text:
            continue
        lacking = tuple(
            language
            for language in LANGUAGES
            if language != own and not ((translations or {}).get(language) or {}).get(field)
        )
        if lacking:
            missing.append((field, lacking))
    return missing
